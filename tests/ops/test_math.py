"""Elementwise math (compiler/ops/math.py) against LiteRT: unary float32/int32 ops, binary float32 and
int32 ops with numpy broadcasting, fused activations, constant operands and LiteRT's edge values
(zeros for RSQRT / LOG, negative operands for FLOOR_DIV / FLOOR_MOD, int32 wrap-around, x/0).

Every model runs in LiteRT, whose outputs are the reference: float32 within rtol 1e-4 and
atol 1e-5 * max(1, max|ref|), integer and bool outputs exactly.
"""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("vulkan")

from gpuc.compiler.ew_table import TABLE  # noqa: E402
from helpers.catalogue import BINARY, UNARY_VARIANTS  # noqa: E402
from helpers.data import I32_MAX, I32_MIN, irand, rnd  # noqa: E402
from helpers.litert import assert_equals_either, run_litert  # noqa: E402
from helpers.ops import Const, check, check_rejected, one_op  # noqa: E402


def nonzero(a, fill=1):
    a = np.array(a)
    a[a == 0] = fill
    return a


# ---------------------------------------------------------------------------------------------------
# unary

def _unary_input(op, shape, seed):
    """A NaN-free input for `op`, with its edge values in the first elements."""
    if op in ("SQRT", "RSQRT", "LOG"):
        x = rnd(shape, seed, 0.01, 10.0)
        edge = [0.0, -0.0, 1.0, 4.0] if op != "SQRT" else [0.0, -0.0, 2.0, 1e-30]
    elif op == "EXP":
        x, edge = rnd(shape, seed, -10.0, 10.0), [0.0, -87.0, 80.0, 1e-3]
    elif op in ("SIN", "COS"):
        x, edge = rnd(shape, seed, -20.0, 20.0), [0.0, np.pi / 2, -np.pi, 1e-4]
    elif op == "ROUND":
        x, edge = rnd(shape, seed, -6.0, 6.0), [-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, -0.4999999, 2.4999998]
    elif op in ("ELU", "GELU"):
        x, edge = rnd(shape, seed, -8.0, 6.0), [0.0, -1e-3, 1e-3, -6.0, -3.0]
    elif op == "HARD_SWISH":
        x, edge = rnd(shape, seed, -5.0, 5.0), [-3.0, 3.0, 0.0, -2.9]
    elif op == "RELU_0_TO_1":
        x, edge = rnd(shape, seed, -1.5, 2.0), [0.0, 1.0, -0.0, 0.5]
    else:
        x, edge = rnd(shape, seed, -4.0, 4.0), [0.0, -0.0, 1.0, -2.0]
    flat = x.reshape(-1)
    flat[:min(len(edge), flat.size)] = np.asarray(edge[:flat.size], np.float32)
    return x


def _vid(v):
    op, opts = v
    return op + "".join(f"-{k}={val}" for k, val in opts.items())


@pytest.mark.parametrize("shape", [(2, 3, 5), (7,), (1, 1, 1, 1, 1)], ids=["2x3x5", "7", "1x1x1x1x1"])
@pytest.mark.parametrize("variant", UNARY_VARIANTS, ids=_vid)
def test_unary_float(gpu, variant, shape):
    op, opts = variant
    x = _unary_input(op, shape, seed=len(shape) + 11)
    check(gpu, *one_op(op, [x], "float32", **opts))


@pytest.mark.parametrize("variant", UNARY_VARIANTS, ids=_vid)
def test_unary_float_const_operand(gpu, variant):
    """The op applied to a constant (a model without runtime inputs)."""
    op, opts = variant
    check(gpu, *one_op(op, [Const(_unary_input(op, (3, 4), seed=5))], "float32", **opts))


@pytest.mark.parametrize("op", ["ABS", "NEG", "SIGN"])
def test_unary_int32(gpu, op):
    x = irand((3, 7), 3, -1000, 1000)
    x.reshape(-1)[:4] = [0, I32_MAX, I32_MIN + 1, -1]
    check(gpu, *one_op(op, [x], "int32"))


@pytest.mark.parametrize("op", ["SIGN", "FLOOR", "CEIL", "ROUND", "RSQRT", "LOG", "SQRT", "ABS", "NEG"])
def test_unary_denormals(gpu, op):
    """GPUs may flush denormals to zero; the ops where that would change the result by more than a
    denormal (SIGN FLOOR CEIL RSQRT LOG SQRT) look at the bits."""
    x = np.float32([1e-40, -1e-40, 1e-45, -3e-39, 1.1e-38, 2.0])
    if op in ("RSQRT", "LOG", "SQRT"):
        x = np.abs(x)
    check(gpu, *one_op(op, [x], "float32"))


def test_gelu_erf_and_tanh_forms_differ(gpu):
    """The two GELU forms are distinguishable at this tolerance, and each matches LiteRT's."""
    x = np.linspace(-5, 3, 33, dtype=np.float32)
    exact = check(gpu, *one_op("GELU", [x], "float32", approximate=False))[0]
    approx = check(gpu, *one_op("GELU", [x], "float32", approximate=True))[0]
    assert np.abs(exact - approx).max() > 1e-4


# ---------------------------------------------------------------------------------------------------
# binary

def _operands(op, dtype, sa, sb, seed):
    """NaN-free operands for op: divisors without zeros, positive bases for fractional powers."""
    if dtype == "int32":
        if op == "POW":
            return irand(sa, seed, -6, 6), irand(sb, seed + 1, 0, 5)
        if op in ("ADD", "SUB", "MUL", "SQUARED_DIFFERENCE"):
            a, b = irand(sa, seed, -3 * 10**5, 3 * 10**5), irand(sb, seed + 1, -3 * 10**5, 3 * 10**5)
            a.reshape(-1)[:2] = [I32_MAX, I32_MIN][:a.size]            # wrap-around
            return a, b
        a, b = irand(sa, seed, -50, 50), irand(sb, seed + 1, -9, 9)
        return a, nonzero(b, 3)
    if op == "POW":
        return rnd(sa, seed, 0.1, 3.0), rnd(sb, seed + 1, -2.5, 2.5)
    if op == "PRELU":
        return rnd(sa, seed, -3, 3), rnd(sb, seed + 1, -0.5, 1.5)
    if op in ("DIV", "FLOOR_DIV", "FLOOR_MOD"):
        b = rnd(sb, seed + 1, 0.25, 3.0) * np.where(irand(sb, seed + 2, 0, 1) > 0, 1, -1).astype(np.float32)
        return rnd(sa, seed, -10, 10), b
    return rnd(sa, seed, -5, 5), rnd(sb, seed + 1, -5, 5)


SHAPES = {  # name -> (a shape, b shape, b constant)
    "same-2x3x4": ((2, 3, 4), (2, 3, 4), False),
    "bcast-2x1x4-3x1": ((2, 1, 4), (3, 1), False),
    "bcast-1-to-2x5": ((1,), (2, 5), False),
    "const-b-4": ((3, 4), (4,), True),
    "const-scalar-b": ((2, 3), (), True),
}


@pytest.mark.parametrize("shapes", list(SHAPES))
@pytest.mark.parametrize("op_dtype", BINARY, ids=[f"{o}-{d}" for o, d in BINARY])
def test_binary(gpu, op_dtype, shapes):
    op, dt = op_dtype
    sa, sb, b_const = SHAPES[shapes]
    if op == "PRELU":
        sa = np.broadcast_shapes(sa, sb)          # LiteRT: PRELU's output shape is the input's
    a, b = _operands(op, dt, sa, sb, seed=len(shapes))
    if not TABLE[op].broadcast and tuple(sa) != tuple(sb):
        check_rejected(*one_op(op, [a, b], dt), "does not broadcast")      # (LiteRT: equal shapes only)
        return
    check(gpu, *one_op(op, [a, Const(b) if b_const else b], dt))


def test_binary_const_first_operand(gpu):
    a = np.array([[7.5], [-7.5], [1.0]], np.float32)
    check(gpu, *one_op("FLOOR_MOD", [Const(a), np.array([2.0, -2.0, 0.3], np.float32)], "float32"))
    check(gpu, *one_op("DIV", [Const(np.int32([[-7], [7]])), np.int32([2, -2, 3])], "int32"))


def test_binary_rank6_broadcast(gpu):
    a, b = rnd((1, 2, 1, 2, 1, 3), 1, 0.5, 2), rnd((2, 1, 2, 1, 3, 1), 2, -2, 2)
    check(gpu, *one_op("POW", [a, b], "float32"))
    check(gpu, *one_op("FLOOR_DIV", [irand(a.shape, 3), nonzero(irand(b.shape, 4, -5, 5))], "int32"))


ACTS = ["NONE", "RELU", "RELU6", "RELU_N1_TO_1", "TANH", "SIGN_BIT"]


@pytest.mark.parametrize("act", ACTS)
@pytest.mark.parametrize("op_dtype", [("DIV", "float32"), ("DIV", "int32"), ("ADD", "int32"), ("SUB", "int32"),
                                      ("MUL", "int32")], ids=lambda v: f"{v[0]}-{v[1]}")
def test_fused_activation(gpu, op_dtype, act):
    op, dt = op_dtype
    if dt == "int32":
        a, b = irand((3, 5), 7, -20, 20), nonzero(irand((5,), 8, -4, 4))
    else:
        a, b = rnd((3, 5), 7, -20, 20), rnd((5,), 8, 0.5, 4) * np.float32([1, -1, 1, -1, 1])
    check(gpu, *one_op(op, [a, b], dt, fused_activation_function=act))


def test_float_edges(gpu):
    f = np.float32
    # x / 0 is +-inf (LiteRT's builtin kernels clamp it to +-FLT_MAX, XNNPACK does not), 0 / 0 is NaN
    model, feeds = one_op("DIV", [f([1, -2, 3, -4, 0]), f([0, 0, -0.0, -0.0, 0])], "float32")
    assert_equals_either(gpu.run(model, feeds), model, feeds)
    # exact floor of the real quotient (5 / 0.1 rounds to 50 in float, but the quotient is below 50)
    a = f([5, -5, 7.5, -7.5, 7.5, -7.5, 1e-30, -1e-30, 1e6, -3, 0.3, 1])
    b = f([0.1, 0.1, 2, 2, -2, -2, 3, 3, 1e-3, 0.7, 0.1, 1e-7])
    check(gpu, *one_op("FLOOR_DIV", [a, b], "float32"))
    check(gpu, *one_op("FLOOR_MOD", [a, b], "float32"))
    check(gpu, *one_op("FLOOR_MOD", [f([1, -1, 0]), f([0, 0, 0])], "float32"))       # NaN, like LiteRT
    # denormal dividends (which GPUs may flush to zero): the floor still steps below zero
    check(gpu, *one_op("FLOOR_DIV", [f([-1e-40, 1e-40, -1e-40, 1e-40]), f([3, 3, -3, -3])], "float32"))
    check(gpu, *one_op("FLOOR_MOD", [f([-1e-40, 1e-40, -1e-40, 1e-40]), f([3, 3, -3, -3])], "float32"))
    # POW: negative bases with integer exponents, zero bases, fractional powers of negatives -> NaN
    check(gpu, *one_op("POW", [f([-2, -2, -3, 0, 0, -0.0, 2, 4, 1, -1.5, 10]),
                               f([3, 2, -3, 0, -1, -1, -1, 0.5, 7.3, 40, 30])], "float32"))
    check(gpu, *one_op("POW", [f([-2, -0.5, -8]), f([0.5, 1.5, 1 / 3])], "float32"))
    # MAXIMUM / MINIMUM / SQUARED_DIFFERENCE with infinities and overflow
    check(gpu, *one_op("MAXIMUM", [f([np.inf, -np.inf, 1]), f([1, 1, -np.inf])], "float32"))
    check(gpu, *one_op("SQUARED_DIFFERENCE", [f([3e38, 1e20]), f([-3e38, 0])], "float32"))


def test_floor_div_zero_quotients_keep_litert_sign(gpu):
    """floor(a / b) = 0 is +0 unless a is a zero over b of the other sign (a DIV by it then gives +inf, not -inf:
    a fuzzed chain caught -0 from a quotient of 0.146)."""
    f = np.float32
    a, b = f([-0.0776, 0.0776, 0, -0.0, 0, -0.0, 0.5, -0.5]), f([-0.53, 0.53, -1, 1, 1, -1, 2, -2])
    model, feeds = one_op("FLOOR_DIV", [a, b], "float32")
    out, ref = gpu.run(model, feeds)[0], run_litert(model, feeds)[0]
    assert np.array_equal(out, ref) and np.array_equal(np.signbit(out), np.signbit(ref)), (out, ref)


def test_int_edges(gpu):
    i = np.int32
    a = i([7, -7, 7, -7, 0, I32_MAX, I32_MIN, I32_MIN, I32_MAX, I32_MIN, -1, 1])
    b = i([2, 2, -2, -2, 3, 2, 7, 1, -1, -1, I32_MIN, I32_MAX])
    for op in ("DIV", "FLOOR_DIV", "SQUARED_DIFFERENCE", "ADD", "SUB", "MUL", "MAXIMUM", "MINIMUM"):
        check(gpu, *one_op(op, [a, b], "int32"))
    # FLOOR_MOD: LiteRT crashes on INT_MIN % -1, leave that one out
    check(gpu, *one_op("FLOOR_MOD", [a[a != I32_MIN], b[a != I32_MIN]], "int32"))
    # POW: exact within range, out of range -> INT_MIN (LiteRT converts std::pow's double result)
    check(gpu, *one_op("POW", [i([3, -3, 2, 0, 0, 7, -1, -2, 2, 1, -1, 46341, 46340, -2]),
                               i([3, 3, 31, 0, 2, 20, 5, 31, 30, 2**31 - 1, 2**31 - 1, 2, 2, 32])], "int32"))
    check(gpu, *one_op("MUL", [i([65536, 123456, -99999]), i([65536, 654321, 77777])], "int32"))


# ---------------------------------------------------------------------------------------------------
# what LiteRT rejects, gpuc reports at compile time

def test_constant_zero_divisor_rejected():
    check_rejected(*one_op("DIV", [np.int32([1, 2]), Const(np.int32([1, 0]))], "int32"), "division by 0")
    check_rejected(*one_op("FLOOR_DIV", [np.float32([1, 2]), Const(np.float32([0, 1]))], "float32"), "division by 0")
    check_rejected(*one_op("FLOOR_MOD", [np.int32([1, 2]), Const(np.int32([0, 1]))], "int32"), "division by 0")


def test_constant_negative_int_exponent_rejected():
    check_rejected(*one_op("POW", [np.int32([2, 3]), Const(np.int32([1, -1]))], "int32"), "negative")


def test_prelu_broadcasting_input_rejected():
    """LiteRT needs PRELU's output shape to be the input's; an alpha that broadcasts the input is rejected."""
    check_rejected(*one_op("PRELU", [np.float32([-1, 2, -3]), Const(np.full((2, 1), 0.5, np.float32))], "float32"),
                   "differs from the input")
