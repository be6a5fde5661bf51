"""ARG_MAX / ARG_MIN (compiler/ops/argminmax.py) against LiteRT: every axis (negative too), float32,
int32, uint8, int8 and bool input, int32 and int64 output, ties (first index wins), NaN and inf, long
axes (one workgroup per output)."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("vulkan")

from helpers.op_support import gpu_reason  # noqa: E402
from helpers.ops import Const, check, one_op  # noqa: E402


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
    """NaNs are skipped; +-inf compare as values (as LiteRT; a NaN in the first position is left out:
    LiteRT's answer for it depends on its vector path)."""
    x = np.array([[2, np.nan, 1, 3], [1, np.nan, 5, 2], [3, 2, 1, np.nan], [np.inf, 1, np.inf, -np.inf],
                  [0, np.nan, np.nan, 0]], np.float32)
    check(gpu, *_arg(op, x, 1, "int32"))


@pytest.mark.parametrize("op", ["ARG_MAX", "ARG_MIN"])
@pytest.mark.parametrize("shape,axis,dtype,out_dtype", [((3, 300), 1, "float32", "int32"),
                                                         ((2, 1030, 3), 1, "int32", "int64"),
                                                         ((1, 5000), -1, "float32", "int64"),
                                                         ((4100, 2), 0, "int32", "int32")])
def test_arg_long_axis(gpu, op, shape, axis, dtype, out_dtype):
    """Long axes: one workgroup per output (tree reduction keeping the first index on ties)."""
    rng = np.random.default_rng(len(shape) * 7 + shape[0])
    if dtype == "int32":
        x = rng.integers(-3, 3, shape).astype(np.int32)          # ties everywhere
    else:
        x = np.round(rng.uniform(-3, 3, shape), 1).astype(np.float32)
        np.moveaxis(x, axis, 0)[1::7] = np.nan                   # NaNs are skipped
    check(gpu, *_arg(op, x, axis, out_dtype))


@pytest.mark.parametrize("length", [4, 600])
def test_arg_leading_nan_skipped(gpu, length):
    """gpuc's rule for a NaN in the first position (where LiteRT's answer depends on its vector path):
    skipped like every NaN; an all-NaN line gives 0.  Short (loop) and long (workgroup) axes."""
    x = np.tile(np.arange(length, dtype=np.float32) % 5, (3, 1))
    x[:, 0] = np.nan
    x[2] = np.nan
    for op, fn in (("ARG_MAX", np.nanargmax), ("ARG_MIN", np.nanargmin)):
        model, feeds = _arg(op, x, 1, "int32")
        (got,) = gpu.run(model, feeds)
        assert got.tolist() == [int(fn(x[0])), int(fn(x[1])), 0]


@pytest.mark.parametrize("op", ["ARG_MAX", "ARG_MIN"])
@pytest.mark.parametrize("dtype", ["uint8", "int8", "bool"])
@pytest.mark.parametrize("shape,axis", [((3, 5, 7), 1), ((2, 7), -1), ((2, 600), 1), ((5, 3, 2), 0)])
def test_arg_byte_inputs(gpu, op, dtype, shape, axis):
    """1-byte inputs (read 4 per word): uint8, int8 (sign-extended) and bool, non-quantized."""
    rng = np.random.default_rng(shape[0] * 11 + axis)
    x = (rng.integers(0, 2, shape) if dtype == "bool" else
         rng.integers(0, 256, shape) if dtype == "uint8" else rng.integers(-128, 128, shape)).astype(dtype)
    check(gpu, *_arg(op, x, axis, "int32"))


@pytest.mark.parametrize("op", ["ARG_MAX", "ARG_MIN"])
@pytest.mark.parametrize("shape,dtype,out_dtype", [((1, 1, 20011), "float32", "int32"), ((3, 9000), "int32", "int64")])
def test_arg_split_long_row(gpu, op, shape, dtype, out_dtype):
    """Lines longer than SPLIT_CHUNK (an LLM's vocabulary row): split over workgroups, then combined.
    The best value sits in several parts (ties across parts and inside one): the first index wins."""
    rng = np.random.default_rng(shape[-1])
    x = (rng.integers(-50, 50, shape) if dtype == "int32" else rng.uniform(-3, 3, shape)).astype(dtype)
    best = 99 if op == "ARG_MAX" else -99
    line = x.reshape(-1, shape[-1])
    for r, at in enumerate([[4500, 4501, 9000, 17000], [8191, 8192, 100], [8999, 4096, 4095]][:line.shape[0]]):
        line[r, [a % shape[-1] for a in at]] = best     # ties across the 4096-element parts and inside one
    if dtype == "float32":
        line[0, 3] = np.nan                    # skipped
    model, feeds = _arg(op, x, -1, out_dtype)
    (got,) = gpu.run(model, feeds)
    fn = np.nanargmax if op == "ARG_MAX" else np.nanargmin
    assert got.reshape(-1).tolist() == [int(fn(r)) for r in line]
