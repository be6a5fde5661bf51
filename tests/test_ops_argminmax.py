"""ARG_MAX / ARG_MIN (compiler/ops/argminmax.py) against LiteRT: every axis (negative too), float32
and int32 input, int32 and int64 output, ties (first index wins)."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("vulkan")

from op_support import gpu_reason  # noqa: E402
from test_ops_math import Const, check, one_op  # noqa: E402


def _arg(op, x, axis, out_dtype, axis_dtype=np.int32):
    shape = list(x.shape)
    del shape[axis % x.ndim]
    return one_op(op, [x, Const(np.array([axis], axis_dtype))], out_dtype, out_shape=shape,
                  output_type=out_dtype.upper())


CASES = [((2, 3, 5), 2, "float32"), ((2, 3, 5), 0, "float32"), ((4, 3, 5), -2, "int32"),
         ((7,), 0, "float32"), ((2, 1, 3, 4, 2), 3, "int32")]


@pytest.mark.parametrize("op", ["ARG_MAX", "ARG_MIN"])
@pytest.mark.parametrize("out_dtype", ["int32", "int64"])
@pytest.mark.parametrize("shape,axis,dtype", CASES)
def test_arg(gpu, op, out_dtype, shape, axis, dtype):
    rng = np.random.default_rng(hash((shape, axis)) % 1000)
    if dtype == "int32":
        x = rng.integers(-5, 5, shape).astype(np.int32)      # many ties
    else:
        x = rng.uniform(-3, 3, shape).astype(np.float32)
    check(gpu, *_arg(op, x, axis, out_dtype))


def test_arg_ties_first_index(gpu):
    x = np.array([[1, 3, 3, 0], [2, 2, 2, 2], [-1, -1, 5, 5]], np.float32)
    for op in ("ARG_MAX", "ARG_MIN"):
        refs = check(gpu, *_arg(op, x, 1, "int32"))
        assert refs[0].tolist() == ([1, 0, 2] if op == "ARG_MAX" else [3, 0, 0])


def test_arg_int64_axis_tensor(gpu):
    x = np.random.default_rng(1).uniform(-1, 1, (3, 4, 6)).astype(np.float32)
    check(gpu, *_arg("ARG_MAX", x, -1, "int64", axis_dtype=np.int64))


def test_arg_runtime_axis_rejected():
    model, _ = one_op("ARG_MAX", [np.zeros((2, 3), np.float32), np.array([1], np.int32)], "int32",
                      out_shape=[2], output_type="INT32")
    assert "axis" in (gpu_reason(model) or "")


@pytest.mark.parametrize("op", ["ARG_MAX", "ARG_MIN"])
def test_arg_nan_and_inf(gpu, op):
    """A leading NaN stays the answer, a later NaN is never picked; +-inf compare as values (as LiteRT)."""
    x = np.array([[np.nan, 1, 2, 3], [1, np.nan, 5, 2], [3, 2, 1, np.nan], [np.inf, 1, np.inf, -np.inf]], np.float32)
    check(gpu, *_arg(op, x, 1, "int32"))
