"""Flat kernels (codegen/kernel.py FLAT: one element per invocation) on grids large enough to take
FLAT_LOCAL_X-wide workgroups: broadcast and same-shape binary ops, a fused elementwise chain, a
transpose, a gather copy and a pad, against LiteRT; and a batch-native bundle run for fewer items than
its bound (the prefix of a 256-wide grid), each item against its own batch-1 run."""
import numpy as np
import pytest

pytest.importorskip("vulkan")

import gpuc  # noqa: E402
from gpuc.compiler.codegen.kernel import FLAT_LOCAL_X, FLAT_MIN_INVOCATIONS, Kernel  # noqa: E402
from helpers.builder import ModelBuilder  # noqa: E402
from helpers.ops import Const, check, one_op  # noqa: E402

ROWS, COLS = 213, 181          # 38553 elements: above FLAT_MIN_INVOCATIONS, not a multiple of 256


def _x(seed, shape=(ROWS, COLS)):
    return np.random.default_rng(seed).uniform(-4, 4, shape).astype(np.float32)


def test_wide_workgroups_only_for_flat_templates_on_large_grids():
    assert Kernel("binary_math", [], FLAT_MIN_INVOCATIONS).local_x == FLAT_LOCAL_X
    assert Kernel("binary_math", [], FLAT_MIN_INVOCATIONS - 1).local_x == 64
    assert Kernel("softmax", [], 10 ** 6).local_x == 64                 # workgroup-level template
    assert Kernel("copy_nd", [], 10 ** 6, local_x=32).local_x == 32     # an explicit size stays
    assert ROWS * COLS >= FLAT_MIN_INVOCATIONS


@pytest.mark.parametrize("op", ["ADD", "MUL", "SQUARED_DIFFERENCE"])
def test_binary_same_shape_and_broadcast(gpu, op):
    check(gpu, *one_op(op, [_x(1), _x(2)], "float32"))
    check(gpu, *one_op(op, [_x(3), _x(4, (1, COLS))], "float32"))


def test_fused_chain(gpu):
    mb = ModelBuilder()
    a, b = mb.input("a", [ROWS, COLS]), mb.input("b", [ROWS, COLS])
    t, u, y = (mb.tensor(n, [ROWS, COLS]) for n in ("t", "u", "y"))
    mb.op("ADD", [a, b], [t])
    mb.op("LOGISTIC", [t], [u])
    mb.op("MUL", [u, a], [y])
    mb.output(y)
    check(gpu, mb.finish(), [_x(5), _x(6)])


def test_transpose_gather_pad(gpu):
    x = _x(7, (7, 31, 181))
    check(gpu, *one_op("TRANSPOSE", [x, Const(np.array([2, 0, 1], np.int32))], "float32", out_shape=[181, 7, 31]))
    idx = np.random.default_rng(8).integers(0, ROWS, 300).astype(np.int32)
    check(gpu, *one_op("GATHER", [_x(9), Const(idx)], "float32", out_shape=[300, COLS], axis=0))
    check(gpu, *one_op("PAD", [_x(10), Const(np.array([[3, 2], [1, 4]], np.int32))], "float32",
                       out_shape=[ROWS + 5, COLS + 5]))


def test_batch_native_prefix_of_wide_grid():
    """--max-batch 8 of a model whose per-item elementwise grid (4921 elements) makes 8 items wide:
    runs of 3 and 8 items match each item's batch-1 run."""
    mb = ModelBuilder()
    shape = [1, 37, 133]
    a, b = mb.input("a", shape), mb.input("b", shape)
    t, y, yt = mb.tensor("t", shape), mb.tensor("y", shape), mb.tensor("yt", [1, 133, 37])
    mb.op("SUB", [a, b], [t])
    mb.op("TRANSPOSE", [t, mb.const("p", np.array([0, 2, 1], np.int32))], [yt])
    mb.op("MUL", [a, b], [y])
    mb.output(y)
    mb.output(yt)
    model = mb.finish()
    one = gpuc.load(gpuc.compile(model, cache=False))
    many = gpuc.load(gpuc.compile(model, cache=False, max_batch=8))
    try:
        for n in (3, 8):
            xa, xb = _x(11 + n, (n, 37, 133)), _x(12 + n, (n, 37, 133))
            outs = many.run([xa, xb])
            for i in range(n):
                ref = one.run([xa[i:i + 1], xb[i:i + 1]])
                for o, r in zip(outs, ref):
                    np.testing.assert_array_equal(o[i:i + 1], r)
    finally:
        one.close()
        many.close()
