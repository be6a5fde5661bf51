"""NaN, +-Inf and -0.0 in the inputs reach the outputs as they do in LiteRT (issue 19), op family by op
family: one special value is written into a few positions of every float input, and each output
element must be finite exactly where LiteRT's is, with either of its interpreters (XNNPACK, or the
plain builtin kernels: they differ, e.g. the builtin kernels clamp +-Inf to +-FLT_MAX under a fused
activation of NONE, and XNNPACK's max-pooling drops NaN).  Where gpuc's element is finite it is
close to a finite LiteRT element; integer and bool outputs equal one of the two exactly.
"""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("vulkan")

import gpuc  # noqa: E402
from gpuc.compiler.ew_table import TABLE  # noqa: E402
from helpers.catalogue import BINARY, CASES, UNARY_VARIANTS  # noqa: E402
from helpers.data import rnd  # noqa: E402
from helpers.litert import run_litert_both  # noqa: E402
from helpers.ops import Const, one_op  # noqa: E402

SPECIALS = {"nan": np.nan, "posinf": np.inf, "neginf": -np.inf, "negzero": -0.0}


def spread(size: int, i: int) -> set:
    """Three positions over a tensor of `size` elements (shifted by input number i)."""
    return {i % size, (size // 2 + i) % size, size - 1 - (i % size)}


def poke(feeds, value, which=None, at=spread):
    """Copies of `feeds` with `value` at positions `at(size, i)` of each float input i (by default
    three spread ones, shifted by i so that two operands do not line up)."""
    out = []
    for i, x in enumerate(feeds):
        x = np.array(x, copy=True)
        if x.dtype.kind == "f" and x.size and (which is None or i in which):
            flat = x.reshape(-1)
            for p in at(x.size, i):
                flat[p] = value
        out.append(x)
    return out


def element_matches(o: np.ndarray, r: np.ndarray, rtol: float) -> np.ndarray:
    """Per element: same finiteness and, where finite, close (floats); equal (anything else)."""
    if o.dtype.kind != "f":
        return o == r
    fo, fr = np.isfinite(o), np.isfinite(r)
    scale = max(1.0, float(np.abs(r[fr]).max(initial=0.0)))
    with np.errstate(invalid="ignore"):
        close = np.abs(o.astype(np.float64) - r) <= rtol * np.abs(r.astype(np.float64)) + 0.1 * rtol * scale
    return (fo == fr) & (~fo | close)


def assert_like_litert(outs, refs, what: str, rtol: float = 1e-4):
    for k, o in enumerate(outs):
        ok = np.zeros(o.shape, bool)
        for r in refs:
            if r is not None:
                assert o.shape == r[k].shape and o.dtype == r[k].dtype, f"{what} output {k}"
                ok |= element_matches(o, r[k], rtol)
        if not ok.all():
            bad = np.argwhere(~ok)[:4]
            rows = [f"{tuple(i)}: gpuc {o[tuple(i)]} litert {[r[k][tuple(i)] for r in refs if r is not None]}"
                    for i in bad]
            raise AssertionError(f"{what} output {k}: {int((~ok).sum())} of {o.size} elements unlike LiteRT\n"
                                 + "\n".join(rows))


def check_specials(gpu, model: bytes, feeds, ref_model=None, post=None, precision="fp32", which=None,
                   specials=tuple(SPECIALS), at=spread):
    m = gpuc.load(gpuc.compile(model, precision=precision), device=gpu.device)
    try:
        for name in specials:
            fed = poke(feeds, SPECIALS[name], which, at)
            refs = run_litert_both(ref_model or model, fed, post)
            if all(r is None for r in refs):      # LiteRT fails on this input: nothing to match
                continue
            assert_like_litert(m.run([x.copy() for x in fed]), refs, name, 1e-4 if precision == "fp32" else 2e-2)
    finally:
        m.close()


# ---------------------------------------------------------------------------------------------------
# the single-op catalogue of helpers/catalogue.py (conv, depthwise, fully connected with every fused
# activation, ADD/SUB/MUL, reductions, pooling, softmax, concatenation, pad, reshape, activations, a fused chain)

def not_last(size: int, i: int) -> set:
    return spread(size, i) - {size - 1}


def catalogue_positions(name: str):
    """LiteRT's DEPTHWISE_CONV_2D with a fused TANH returns FLT_MAX, not NaN, at the outputs that a NaN
    in the input's last element feeds (its border path; NaN everywhere else): gpuc returns NaN there
    too, so those cases leave the last element alone."""
    return not_last if name.startswith("dwconv") and "-TANH-" in name else spread


@pytest.mark.parametrize("name", list(CASES))
def test_catalogue(gpu, name):
    c = CASES[name]()
    check_specials(gpu, c.model, c.inputs, c.ref_model, c.ref_post, at=catalogue_positions(name))


# ---------------------------------------------------------------------------------------------------
# elementwise math

@pytest.mark.parametrize("variant", UNARY_VARIANTS, ids=lambda v: v[0] + "".join(f"-{k}={x}" for k, x in v[1].items()))
def test_unary(gpu, variant):
    op, opts = variant
    check_specials(gpu, *one_op(op, [rnd((2, 3, 5), 1, -4, 4)], "float32", **opts))


@pytest.mark.parametrize("op", [o for o, dt in BINARY if dt == "float32"])
@pytest.mark.parametrize("bcast", [False, True])
def test_binary(gpu, op, bcast):
    if bcast and not TABLE[op].broadcast:
        pytest.skip(f"LiteRT's {op} needs equal shapes")
    a = rnd((2, 3, 4), 2, 0.25, 3)
    b = rnd((3, 1) if bcast else (2, 3, 4), 3, 0.25, 3)
    if op == "PRELU":
        b = rnd((4,), 3, -0.5, 1.5)
    check_specials(gpu, *one_op(op, [a, b], "float32"))


@pytest.mark.parametrize("op", ["MAXIMUM", "MINIMUM", "DIV", "SQUARED_DIFFERENCE"])
def test_binary_constant_operand(gpu, op):
    check_specials(gpu, *one_op(op, [rnd((3, 4), 4, -2, 2), Const(rnd((4,), 5, 0.5, 2))], "float32"))


@pytest.mark.parametrize("op", ["ADD", "SUB", "MUL", "DIV"])
@pytest.mark.parametrize("act", ["RELU", "RELU6", "RELU_N1_TO_1"])
def test_binary_fused_activation(gpu, op, act):
    check_specials(gpu, *one_op(op, [rnd((2, 6), 6, -3, 3), rnd((2, 6), 7, 0.5, 3)], "float32",
                                fused_activation_function=act))


@pytest.mark.parametrize("op", ["LESS", "LESS_EQUAL", "GREATER", "GREATER_EQUAL", "EQUAL", "NOT_EQUAL"])
def test_compare(gpu, op):
    a = rnd((3, 5), 8, -2, 2)
    check_specials(gpu, *one_op(op, [a, a[::-1].copy()], "bool"))


def test_select(gpu):
    cond = np.random.default_rng(9).integers(0, 2, (3, 5)).astype(bool)
    for op in ("SELECT", "SELECT_V2"):
        check_specials(gpu, *one_op(op, [cond, rnd((3, 5), 10), rnd((3, 5), 11)], "float32"))


@pytest.mark.parametrize("op", ["ARG_MAX", "ARG_MIN"])
@pytest.mark.parametrize("axis", [0, 1])
def test_arg(gpu, op, axis):
    """Special values past the first of each line (LiteRT's answer for a NaN first depends on which of
    its vector paths runs)."""
    x = rnd((4, 6), 12, -3, 3)
    shape = [6] if axis == 0 else [4]
    at = (lambda size, i: {9, 16}) if axis == 1 else (lambda size, i: {13, 20})
    check_specials(gpu, *one_op(op, [x, Const(np.int32([axis]))], "int32", out_shape=shape, output_type="INT32"),
                   at=at)


@pytest.mark.parametrize("dtype", ["int32", "uint8", "int8", "int16", "bool"])
def test_cast(gpu, dtype):
    check_specials(gpu, *one_op("CAST", [rnd((3, 4), 13, -300, 300)], dtype))


def test_quantize(gpu):
    from helpers.builder import ModelBuilder
    mb = ModelBuilder()
    x = mb.input("x", [3, 4])
    y = mb.tensor("y", [3, 4], "int8", quant=(0.05, 3))
    mb.op("QUANTIZE", [x], [y])
    mb.output(y)
    check_specials(gpu, mb.finish(), [rnd((3, 4), 14, -4, 4)])


# ---------------------------------------------------------------------------------------------------
# normalisation, resize, matmul, cumulative sums

@pytest.mark.parametrize("op", ["LOG_SOFTMAX", "L2_NORMALIZATION", "SOFTMAX"])
@pytest.mark.parametrize("shape", [(3, 7), (2, 300)])
def test_row_ops(gpu, op, shape):
    opts = {"beta": 1.0} if op == "SOFTMAX" else {}
    check_specials(gpu, *one_op(op, [rnd(shape, 15, -3, 3)], "float32", **opts))


@pytest.mark.parametrize("op", ["RESIZE_BILINEAR", "RESIZE_NEAREST_NEIGHBOR"])
def test_resize(gpu, op):
    x = rnd((1, 4, 5, 3), 16)
    check_specials(gpu, *one_op(op, [x, Const(np.int32([7, 9]))], "float32", out_shape=(1, 7, 9, 3),
                                align_corners=False, half_pixel_centers=False))


@pytest.mark.parametrize("const_b", [False, True])
def test_batch_matmul(gpu, const_b):
    a, b = rnd((2, 3, 6), 17), rnd((2, 6, 5), 18)
    check_specials(gpu, *one_op("BATCH_MATMUL", [a, Const(b) if const_b else b], "float32", out_shape=(2, 3, 5)))


def test_cumsum(gpu):
    check_specials(gpu, *one_op("CUMSUM", [rnd((3, 5), 19), Const(np.int32(1))], "float32"))


# ---------------------------------------------------------------------------------------------------
# fp16 storage: a special value in gives the same special value out

@pytest.mark.parametrize("name", [n for n in CASES if n.split("-")[0] in
                                  ("conv2d", "dwconv", "fc", "maxpool", "softmax", "reduce_max", "mean", "chain")][::3])
def test_catalogue_fp16(gpu, name):
    c = CASES[name]()
    check_specials(gpu, c.model, c.inputs, c.ref_model, c.ref_post, precision="fp16", specials=("nan", "posinf"),
                   at=catalogue_positions(name))


# ---------------------------------------------------------------------------------------------------
# convolution variants, recurrent cells, data movement, fused elementwise chains

@pytest.mark.parametrize("act", ["NONE", "RELU", "RELU6"])
def test_transpose_conv(gpu, act):
    w, b = rnd((4, 3, 3, 2), 20), rnd((4,), 21)
    check_specials(gpu, *one_op("TRANSPOSE_CONV", [Const(np.int32([1, 7, 9, 4])), Const(w), rnd((1, 3, 4, 2), 22),
                                                  Const(b)], "float32", out_shape=(1, 7, 9, 4), padding="VALID",
                                stride_h=2, stride_w=2, fused_activation_function=act))


@pytest.mark.parametrize("act", ["NONE", "RELU"])
def test_conv3d(gpu, act):
    x, w = rnd((1, 3, 4, 4, 2), 23), rnd((2, 2, 2, 2, 3), 24)
    check_specials(gpu, *one_op("CONV_3D", [x, Const(w), Const(rnd((3,), 25))], "float32", out_shape=(1, 3, 4, 4, 3),
                                padding="SAME", stride_d=1, stride_h=1, stride_w=1, dilation_dfactor=1,
                                dilation_hfactor=1, dilation_wfactor=1, fused_activation_function=act))


@pytest.mark.parametrize("kw", [dict(), dict(cell_clip=3.0, proj=True, proj_clip=2.0), dict(act=1, peephole=True)],
                         ids=["tanh", "clips-proj", "relu-peephole"])
def test_lstm(gpu, kw):
    """A state-carrying op: each special value on a fresh load (a NaN would stay in the state)."""
    from helpers.models import lstm_model
    model, shape = lstm_model(**kw)
    for name in SPECIALS:
        check_specials(gpu, model, [rnd(shape, 26)], specials=(name,))


MOVEMENT = {
    "transpose": ("TRANSPOSE", lambda x: [x, Const(np.int32([2, 0, 1]))], (5, 3, 4), {}),
    "gather": ("GATHER", lambda x: [x, Const(np.int32([2, 0, 2]))], (3, 3, 5), dict(axis=1)),
    "tile": ("TILE", lambda x: [x, Const(np.int32([1, 2, 1]))], (3, 8, 5), {}),
    "mirror_pad": ("MIRROR_PAD", lambda x: [x, Const(np.int32([[0, 0], [1, 1], [2, 2]]))], (3, 6, 9),
                   dict(mode="REFLECT")),
    "strided_slice": ("STRIDED_SLICE", lambda x: [x, Const(np.int32([0, 1, 0])), Const(np.int32([3, 4, 5])),
                                                  Const(np.int32([1, 2, 2]))], (3, 2, 3), {}),
}


@pytest.mark.parametrize("name", list(MOVEMENT))
def test_movement(gpu, name):
    op, args, shape, opts = MOVEMENT[name]
    check_specials(gpu, *one_op(op, args(rnd((3, 4, 5), 27)), "float32", out_shape=shape, **opts))


def test_fused_chains(gpu):
    """FUSED_ELEMENTWISE kernels (passes/ew_fusion.py): long unary chains, hard swish, a LayerNorm."""
    from helpers.models import UNARY_CHAINS, chain_model, hard_swish_model, layer_norm_model
    for chain in UNARY_CHAINS:
        check_specials(gpu, chain_model(chain), [rnd((2, 5, 7), 28, 0.1, 2), rnd((7,), 29)])
    check_specials(gpu, chain_model([("ADD", {}), ("MUL", {}), ("TANH", {}), ("SUB", {}), ("RELU6", {})]),
                   [rnd((2, 5, 7), 30), rnd((7,), 31)])
    check_specials(gpu, hard_swish_model(), [rnd((1, 4, 4, 3), 32, -5, 5)])
    check_specials(gpu, layer_norm_model(), [rnd((2, 3, 8), 33, -3, 3)])


def test_layer_norm(gpu):
    """LAYER_NORM kernels (passes/layer_norm.py): short rows (one invocation each) and long rows (one
    workgroup each), litert-torch's and Keras's forms; a special value makes its row NaN as the chain does."""
    from helpers.models import ln_model
    check_specials(gpu, ln_model(shape=(3, 7), out="xinv", keep_dims=False), [rnd((3, 7), 34, -3, 3)])
    check_specials(gpu, ln_model(shape=(2, 3, 200), out="keras"), [rnd((2, 3, 200), 35, -3, 3)])
