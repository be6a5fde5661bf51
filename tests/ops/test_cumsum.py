"""CUMSUM (compiler/ops/cumsum.py) against LiteRT: every axis (negative too), exclusive, reverse,
float32, int32 and int64 (wrap-around)."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("vulkan")

from helpers.op_support import gpu_reason  # noqa: E402
from helpers.ops import Const, check, one_op  # noqa: E402


def _x(shape, dtype, seed):
    rng = np.random.default_rng(seed)
    if dtype == "int32":
        return rng.integers(-100, 100, shape).astype(np.int32)
    return rng.uniform(-2, 2, shape).astype(np.float32)


@pytest.mark.parametrize("exclusive", [False, True])
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("shape,axis,dtype", [((2, 3, 5), 2, "float32"), ((4, 3, 5), 0, "int32"),
                                              ((2, 6, 3), -2, "float32"), ((9,), -1, "int32"),
                                              ((2, 1, 3, 4), 3, "float32")])
def test_cumsum(gpu, shape, axis, dtype, exclusive, reverse):
    x = _x(shape, dtype, len(shape) + axis)
    check(gpu, *one_op("CUMSUM", [x, Const(np.array(axis, np.int32))], dtype, exclusive=exclusive, reverse=reverse))


@pytest.mark.parametrize("exclusive", [False, True])
@pytest.mark.parametrize("reverse", [False, True])
def test_cumsum_int64(gpu, exclusive, reverse):
    """int64: 32-bit word pairs with a carry; values far beyond int32, signs mixed, wrap-around."""
    rng = np.random.default_rng(5)
    x = rng.integers(-2**40, 2**40, (3, 7, 2)).astype(np.int64)
    x[0, 0, 0], x[0, 1, 0] = 2**63 - 3, 10                    # wraps past INT64_MAX
    x[1, :, 1] = -1                                            # borrows through the high word
    check(gpu, *one_op("CUMSUM", [x, Const(np.array(1, np.int32))], "int64", exclusive=exclusive, reverse=reverse))


def test_cumsum_int32_wraps(gpu):
    x = np.array([[2**31 - 5, 3, 7, -2**31 + 1]], np.int32)
    check(gpu, *one_op("CUMSUM", [x, Const(np.array(1, np.int32))], "int32"))


def test_cumsum_runtime_axis_rejected():
    model, _ = one_op("CUMSUM", [np.zeros((2, 3), np.float32), np.array(1, np.int32)], "float32", out_shape=[2, 3])
    assert "axis" in (gpu_reason(model) or "")


@pytest.mark.parametrize("exclusive,reverse", [(False, False), (True, True)])
@pytest.mark.parametrize("shape,axis,dtype", [((70000,), 0, "float32"), ((1, 70000, 2), 1, "int64")])
def test_long_axes_in_chunks(gpu, shape, axis, dtype, exclusive, reverse):
    """Axes past step_chunks.LOOP_BUDGET: one dispatch a chunk, each resuming the scan (float32 bit for bit with
    LiteRT's sequential sums; int64 carries). One invocation's scan of 70,000 was wrong on lavapipe."""
    rng = np.random.default_rng(len(shape))
    x = rng.uniform(-2, 2, shape).astype(np.float32) if dtype == "float32" else \
        rng.integers(-2**40, 2**40, shape).astype(np.int64)
    model, feeds = one_op("CUMSUM", [x, Const(np.array(axis, np.int32))], dtype, exclusive=exclusive, reverse=reverse)
    ref = check(gpu, model, feeds)[0]
    np.testing.assert_array_equal(gpu.run(model, feeds)[0], ref)
