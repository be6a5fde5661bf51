"""Native int8 REDUCE_MAX / REDUCE_MIN ("INT8_REDUCE_MAX", "INT8_REDUCE_MIN": compiler/ops/int8_reduce.py) and
ARG_MAX / ARG_MIN of an int8 activation ("INT8_ARG_MAX", "INT8_ARG_MIN", int32 and int64 indices): bit for bit
LiteRT's builtin kernels (BUILTIN_WITHOUT_DEFAULT_DELEGATES), raw bytes compared, first index on ties; an int8
REDUCE_MAX / REDUCE_MIN onto another grid is refused, as LiteRT refuses it."""
import numpy as np
import pytest

pytest.importorskip("vulkan")

import gpuc  # noqa: E402
from gpuc.errors import UnsupportedError  # noqa: E402
from helpers.builder import ModelBuilder  # noqa: E402
from helpers.litert import run_litert  # noqa: E402
from helpers.int8_exact import exact as _exact, ops_after_passes as _ops, qin as _qin  # noqa: E402

I8 = "int8"
SHAPE = [2, 3, 5, 7]
# (axes, keep_dims): contiguous, split (kept dims between), negative and repeated, all, none left in between
REDUCE_CASES = [([1, 2], True), ([0, 2], False), ([-1], False), ([3, -1, 1], True), ([0, 1, 2, 3], False),
                ([2], True), ([0, 3], True)]


def _reduced(axes, keep):
    red = {a % 4 for a in axes}
    return [1 if i in red else d for i, d in enumerate(SHAPE)] if keep else [d for i, d in enumerate(SHAPE)
                                                                            if i not in red]


@pytest.mark.parametrize("op", ["REDUCE_MAX", "REDUCE_MIN"])
@pytest.mark.parametrize("case", REDUCE_CASES, ids=lambda c: f"{c[0]}-keep{int(c[1])}")
def test_reduce_max_min_bit_exact(gpu, op, case):
    axes, keep = case
    rng = np.random.default_rng(len(op) + 7 * len(axes) + keep)
    mb = ModelBuilder()
    q = (0.05, 3)
    x = mb.input("x", SHAPE, I8, quant=q)
    y = mb.tensor("y", _reduced(axes, keep), I8, quant=q)
    mb.op(op, [x, mb.const("ax", np.array(axes, np.int32))], [y], keep_dims=keep)
    mb.output(y)
    _exact(gpu, mb.finish(), [_qin(rng, SHAPE)], "INT8_" + op)


@pytest.mark.parametrize("q", [(0.07, 3), (0.05, -4)], ids=["scale", "zero_point"])
def test_reduce_max_onto_another_grid_is_refused_as_litert_does(q):
    mb = ModelBuilder()
    x = mb.input("x", [1, 4, 4, 2], I8, quant=(0.05, 3))
    y = mb.tensor("y", [1, 2], I8, quant=q)
    mb.op("REDUCE_MAX", [x, mb.const("ax", np.array([1, 2], np.int32))], [y], keep_dims=False)
    mb.output(y)
    model = mb.finish()
    with pytest.raises(Exception):
        run_litert(model, [np.zeros((1, 4, 4, 2), np.int8)])
    with pytest.raises(UnsupportedError, match=r"REDUCE_MAX \(operator #0\): int8 output 'y' .* another grid"):
        gpuc.compile(model, cache=False)


@pytest.mark.parametrize("op", ["ARG_MAX", "ARG_MIN"])
@pytest.mark.parametrize("axis,out", [(3, "int32"), (1, "int64"), (-2, "int32")])
def test_arg_max_min_of_int8_bit_exact(gpu, op, axis, out):
    """After an int8 max pool (the model stays int8): a few distinct values, so ties are common."""
    rng = np.random.default_rng(len(op) + axis)
    mb = ModelBuilder()
    q = (0.05, 3)
    x = mb.input("x", SHAPE, I8, quant=q)
    p = mb.tensor("p", SHAPE, I8, quant=q)
    mb.op("MAX_POOL_2D", [x], [p], padding="SAME", stride_w=1, stride_h=1, filter_width=1, filter_height=1)
    y = mb.tensor("y", [d for i, d in enumerate(SHAPE) if i != axis % 4], out)
    mb.op(op, [p, mb.const("ax", np.array([axis], np.int32))], [y], output_type=out.upper())
    mb.output(y)
    model = mb.finish()
    assert {"INT8_MAX_POOL_2D", "INT8_" + op} <= set(_ops(model))
    xin = rng.integers(-3, 3, SHAPE).astype(np.int8)
    ref = run_litert(model, [xin])[0]
    got = gpu.run(model, [xin])[0]
    assert got.dtype == ref.dtype == np.dtype(out) and got.shape == ref.shape
    np.testing.assert_array_equal(got, ref)
