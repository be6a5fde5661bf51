"""Comparisons, logic, SELECT / SELECT_V2 and CAST (compiler/ops/compare.py) against LiteRT.

Bool / uint8 / int8 tensors are bytes packed 4 per 32-bit word on the GPU; element counts that are
not a multiple of 4 (partial last words), tiny tensors and broadcasting all appear below.  Outputs
must equal LiteRT's exactly (float outputs of SELECT / CAST too: they are copies or exact casts).
"""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("vulkan")

from helpers.builder import ModelBuilder  # noqa: E402
from helpers.data import I32_MAX, I32_MIN, irand, rnd  # noqa: E402
from helpers.litert import run_litert  # noqa: E402
from helpers.ops import Const, check, check_rejected, one_op  # noqa: E402


def brand(shape, seed):
    return np.random.default_rng(seed).integers(0, 1, tuple(shape), endpoint=True).astype(bool)


def values(dtype, shape, seed):
    """Small value ranges so that equal elements occur."""
    if dtype == "float32":
        return (irand(shape, seed, -3, 3) * 0.5).astype(np.float32)
    if dtype == "int32":
        return irand(shape, seed, -3, 3)
    if dtype == "bool":
        return brand(shape, seed)
    if dtype == "uint8":
        return np.random.default_rng(seed).integers(0, 255, tuple(shape), endpoint=True).astype(np.uint8)
    if dtype == "int8":
        return np.random.default_rng(seed).integers(-128, 127, tuple(shape), endpoint=True).astype(np.int8)
    raise ValueError(dtype)


SHAPES = {  # name -> (a shape, b shape, b constant)
    "same-3x5": ((3, 5), (3, 5), False),          # 15 elements: a partial last word
    "same-2x2x4": ((2, 2, 4), (2, 2, 4), False),
    "same-1": ((1,), (1,), False),
    "bcast-3x1-4": ((3, 1), (4,), False),
    "bcast-2x1x3-5x1": ((2, 1, 3), (5, 1), False),
    "const-b-7": ((2, 7), (7,), True),
    "const-scalar-b": ((3, 3), (), True),
}

COMPARE = [(op, dt) for op in ("LESS", "LESS_EQUAL", "GREATER", "GREATER_EQUAL", "EQUAL", "NOT_EQUAL")
           for dt in ("float32", "int32")] + [("EQUAL", "bool"), ("NOT_EQUAL", "bool"),
                                              ("LOGICAL_AND", "bool"), ("LOGICAL_OR", "bool")]


@pytest.mark.parametrize("shapes", list(SHAPES))
@pytest.mark.parametrize("op_dtype", COMPARE, ids=[f"{o}-{d}" for o, d in COMPARE])
def test_compare(gpu, op_dtype, shapes):
    op, dt = op_dtype
    sa, sb, b_const = SHAPES[shapes]
    a, b = values(dt, sa, 1), values(dt, sb, 2)
    check(gpu, *one_op(op, [a, Const(b) if b_const else b], "bool"))


def test_compare_const_first_operand(gpu):
    check(gpu, *one_op("LESS", [Const(np.float32([[0.5], [-1.0], [2.0]])), np.float32([0.5, 1.0, -3.0, 2.0, 0.0])],
                       "bool"))
    check(gpu, *one_op("LOGICAL_OR", [Const(np.array([True, False, False])), brand((2, 3), 4)], "bool"))


def test_compare_edges(gpu):
    f = np.float32
    # denormals compare exactly (by bits) even where GPU arithmetic flushes them to zero
    a = f([0.0, -0.0, np.inf, -np.inf, 1e-38, 3e38, -1.0, 1e-40, -1e-40, 1e-45, 2e-45, -0.0])
    b = f([-0.0, 0.0, np.inf, np.inf, 0.0, np.inf, -1.0, 0.0, 0.0, 2e-45, 1e-45, 1e-45])
    for op in ("LESS", "LESS_EQUAL", "GREATER", "GREATER_EQUAL", "EQUAL", "NOT_EQUAL"):
        check(gpu, *one_op(op, [a, b], "bool"))
    # NaN: unordered, only NOT_EQUAL holds
    a, b = f([np.nan, 1.0, np.nan, -np.nan]), f([1.0, np.nan, np.nan, np.inf])
    for op in ("LESS", "LESS_EQUAL", "GREATER", "GREATER_EQUAL", "EQUAL", "NOT_EQUAL"):
        check(gpu, *one_op(op, [a, b], "bool"))
    ia = np.int32([I32_MIN, I32_MAX, 0, -1, I32_MIN])
    ib = np.int32([I32_MAX, I32_MIN, 0, 1, I32_MIN])
    for op in ("LESS", "GREATER_EQUAL", "EQUAL"):
        check(gpu, *one_op(op, [ia, ib], "bool"))


@pytest.mark.parametrize("shape", [(3, 5), (1,), (2, 2, 4), (9,)], ids=lambda s: "x".join(map(str, s)))
def test_logical_not(gpu, shape):
    check(gpu, *one_op("LOGICAL_NOT", [brand(shape, 3)], "bool"))


def test_logical_not_const(gpu):
    check(gpu, *one_op("LOGICAL_NOT", [Const(brand((2, 5), 6))], "bool"))


def test_chained_bool_ops(gpu):
    """bool tensors produced and consumed on the GPU: LESS -> LOGICAL_AND -> SELECT_V2, 3x7 elements."""
    mb = ModelBuilder()
    x, y = mb.input("x", [3, 7], "float32"), mb.input("y", [3, 7], "float32")
    m = mb.input("m", [7], "bool")
    lt, both, out = mb.tensor("lt", [3, 7], "bool"), mb.tensor("both", [3, 7], "bool"), mb.tensor("out", [3, 7])
    notm = mb.tensor("notm", [7], "bool")
    mb.op("LESS", [x, y], [lt])
    mb.op("LOGICAL_NOT", [m], [notm])
    mb.op("LOGICAL_AND", [lt, notm], [both])
    mb.op("SELECT_V2", [both, x, y], [out])
    mb.output(out)
    mb.output(both)
    check(gpu, mb.finish(), [rnd((3, 7), 1), rnd((3, 7), 2), brand((7,), 3)])


# ---------------------------------------------------------------------------------------------------
# SELECT / SELECT_V2

VALUE_DTYPES = ["float32", "int32", "bool", "uint8", "int8"]

SELECT_CASES = {  # name -> (op, cond shape, x shape, y shape, which operand is constant)
    "v1-same-3x5": ("SELECT", (3, 5), (3, 5), (3, 5), None),
    "v1-rows-3-of-3x5": ("SELECT", (3,), (3, 5), (3, 5), None),
    "v1-rows-2-of-2x3x2": ("SELECT", (2,), (2, 3, 2), (2, 3, 2), None),
    "v1-const-x": ("SELECT", (2, 3), (2, 3), (2, 3), "x"),
    "v2-same-7": ("SELECT_V2", (7,), (7,), (7,), None),
    "v2-bcast-all": ("SELECT_V2", (3,), (2, 1), (1, 3), None),
    "v2-bcast-cond-2x1x3-x-4x1": ("SELECT_V2", (2, 1, 3), (4, 1), (3,), None),
    "v2-const-cond": ("SELECT_V2", (1, 5), (3, 5), (3, 1), "cond"),
    "v2-const-scalar-y": ("SELECT_V2", (2, 5), (2, 5), (), "y"),
}


@pytest.mark.parametrize("case", list(SELECT_CASES))
@pytest.mark.parametrize("dtype", VALUE_DTYPES)
def test_select(gpu, dtype, case):
    op, sc, sx, sy, const = SELECT_CASES[case]
    ops = {"cond": brand(sc, 1), "x": values(dtype, sx, 2), "y": values(dtype, sy, 3)}
    if const:
        ops[const] = Const(ops[const])
    out_shape = np.broadcast_shapes(sc, sx, sy) if op == "SELECT_V2" else sx
    check(gpu, *one_op(op, [ops["cond"], ops["x"], ops["y"]], dtype, out_shape=out_shape))


def test_select_v1_bad_condition_rejected():
    """LiteRT's SELECT (v1) needs the condition's shape, or a rank-1 row selector; gpuc reports it too."""
    check_rejected(*one_op("SELECT", [brand((2, 1), 1), rnd((2, 3), 2), rnd((2, 3), 3)], "float32",
                           out_shape=(2, 3)), "condition shape")


# ---------------------------------------------------------------------------------------------------
# CAST

def cast_input(dtype, shape, seed):
    """Values that exercise truncation, saturation and wrap-around, NaN-free."""
    n = int(np.prod(shape))
    if dtype == "float32":
        edge = [-300.5, -200.7, -128.5, -3.7, -1.0, -0.5, -0.0, 0.5, 127.9, 128.5, 255.9, 256.2, 300.7, 3e9, -3e9,
                1e-30, 16777217.0]
        v = np.concatenate([np.float32(edge), rnd((max(n - len(edge), 0),), seed, -400, 400)])[:n]
        return v.astype(np.float32).reshape(shape)
    if dtype == "int32":
        edge = [-300, -129, -128, -1, 0, 127, 128, 255, 256, 300, I32_MAX, I32_MIN, 16777217, 1]
        v = np.concatenate([np.int64(edge), irand((max(n - len(edge), 0),), seed, -70000, 70000)])[:n]
        return v.astype(np.int32).reshape(shape)
    return values(dtype, shape, seed)


@pytest.mark.parametrize("shape", [(3, 7), (5,), (2, 2, 4)], ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("dst", VALUE_DTYPES)
@pytest.mark.parametrize("src", VALUE_DTYPES)
def test_cast(gpu, src, dst, shape):
    check(gpu, *one_op("CAST", [cast_input(src, shape, 7)], dst))


@pytest.mark.parametrize("dst", ["int32", "uint8", "int8", "bool"])
def test_cast_float_nan_inf(gpu, dst):
    """LiteRT saturates infinities and sends NaN to the type's maximum (bool: True); a denormal is
    True as a bool."""
    check(gpu, *one_op("CAST", [np.float32([np.nan, np.inf, -np.inf, 1.5, -0.0, 1e-40, -1e-45])], dst))


@pytest.mark.parametrize("dst", VALUE_DTYPES)
@pytest.mark.parametrize("src", VALUE_DTYPES)
def test_litert_cast_numpy_twin(src, dst):
    """compare.litert_cast (numpy, for constant folding) equals LiteRT's CAST."""
    from gpuc.compiler.ops.compare import litert_cast
    x = cast_input(src, (4, 6), 9)
    if src == "float32":
        x.reshape(-1)[-3:] = [np.nan, np.inf, -np.inf]
    ref = run_litert(*one_op("CAST", [x], dst))[0]
    out = litert_cast(x, dst)
    assert out.dtype == ref.dtype
    np.testing.assert_array_equal(out, ref)


def test_cast_const_input(gpu):
    """A CAST of a constant (folded at compile time) meeting a CAST of a runtime input."""
    mb = ModelBuilder()
    x = mb.input("x", [2, 3], "int32")
    c = mb.const("c", np.array([[True, False, True]]))
    cf, xb, y = mb.tensor("cf", [1, 3], "int32"), mb.tensor("xb", [2, 3], "bool"), mb.tensor("y", [2, 3], "bool")
    mb.op("CAST", [c], [cf])
    mb.op("CAST", [x], [xb])
    mb.op("EQUAL", [x, cf], [y])
    mb.output(y)
    mb.output(xb)
    check(gpu, mb.finish(), [np.int32([[1, 0, 5], [0, 0, 1]])])
