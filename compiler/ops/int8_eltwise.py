"""Native int8 ADD / SUB / MUL / MAXIMUM, MINIMUM / MEAN / SOFTMAX / pooling / RELU, RELU6, RELU_N1_TO_1,
LEAKY_RELU / LOGISTIC, TANH, HARD_SWISH (shaders/int8_eltwise.comp), as LiteRT's builtin integer kernels compute
them (passes/quant.py native_int8 makes these ops from the TFLite ones):

* ADD: both inputs rescaled to 2 * max(input scales) with a left shift of 20, summed, requantized to
  the output (add.cc's int8 parameters; gemmlowp rounding), fused activation clamp.  Equal shapes, or
  one input broadcast along the other's leading dims.
* MEAN: the int32 sum minus zero point * count, times input scale / output scale with 1/count folded
  into the multiplier (reduce.h QuantizedMeanOrSum); the reduced axes contiguous.  keep_dims over
  axes [1, 2] of a 4-D input (axis data exactly [1, 2] or [2, 1]) runs LiteRT's optimized Mean
  (optimized/integer_ops/mean.h) instead: the raw int32 sum times the float32 input scale / (count *
  output scale) plus a float-rounded bias, output zp - round(input zp * input scale / output scale);
  channels in whole blocks of 16 (its vector path) rounded as RQ_UPWARD, the rest RQ_GEMMLOWP
  (found by experiment on LiteRT 2.3, tests/ops/test_int8_kernels.py).
* AVERAGE_POOL_2D / MAX_POOL_2D: input and output on one grid (LiteRT requires it); the average is
  the window's sum over its cells inside the input, rounded half away from zero (integer_ops/pooling.h).
* SUB (sub.cc): ADD's parameters and arithmetic with the rescaled inputs subtracted.
* MAXIMUM / MINIMUM (maximum_minimum.cc): the larger / smaller raw byte, whatever the grids (LiteRT compares the
  int8 values as they are), broadcast as ADD / SUB / MUL are.
* ADD / SUB / MUL broadcast as numpy does (up to MAX_RANK dims, BCAST) where the smaller input is not a
  trailing part of the other's shape (e.g. [N, H, W, C] with [N, 1, W, 1]).
* LEAKY_RELU (activations.cc QuantizeLeakyRelu): the input minus its zero point requantized by input scale /
  output scale where it is at least 0, by input scale x alpha / output scale below (both computed in float),
  plus the output zero point, clamped; alpha > 0.
* MUL (mul.cc): (a - a's zero point) * (b - b's zero point) requantized by a multiplier LiteRT computes in
  float (input scales' product / output scale; gemmlowp rounding), plus the output zero point, fused activation
  clamp; shapes as ADD's.
* HARD_SWISH (activations.cc HardSwishPrepare, reference_ops::HardSwish): LiteRT's 16-bit fixed-point
  algorithm (int8_hard_swish.py) evaluated at compile time for all 256 input bytes, run as a table.
* EXP (exp.cc, int8: LUTPopulate): the same table of glibc's expf (int8_libm), any output grid, values past the
  int8 range saturating (as LiteRT's table does: found by experiment on LiteRT 2.3).
* LOGISTIC / TANH (activations.cc, int8: EvalUsingLookupTable): a 256-entry int8 table made at compile time
  as LiteRT's LUTPopulate makes it in float32 (dequantize, transform with glibc's expf / tanhf, times 1 / output
  scale, rounded half away, plus the zero point, clamped); the output grids LiteRT requires (1/256, -128;
  1/128, 0).
* RELU / RELU6 / RELU_N1_TO_1 (activations.cc QuantizedReluX): the input minus its zero point times input
  scale / output scale (gemmlowp rounding), plus the output zero point, clamped to the activation's range on
  the output grid (the bounds rounded as CalculateActivationRangeQuantized rounds them).
* SOFTMAX: LiteRT's table path on x86 (optimized_ops::Softmax): a 256-entry float table of
  exp(-input_scale * beta * d), computed here at compile time, summed in order per row.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from gpuc.compiler.codegen.kernel import Kernel
from gpuc.compiler.ops import register, template
from gpuc.compiler.ops.int8_facts import declare_int8
from gpuc.compiler.ops import int8_libm
from gpuc.compiler.ops.int8_common import (QMAX, QMIN, act_range, f32, int8_activation, lut_populate, native_form,
                                           per_tensor, quantize_multiplier, scale_zp)
from gpuc.compiler.ops.conv import window
from gpuc.compiler.ops.math import words
from gpuc.compiler.ops.step_chunks import in_chunks
from gpuc.compiler.ops.util import checked, fused_act, size

from gpuc.compiler.ops.int8_common import ADD, AVG_POOL, MAX_POOL, MEAN, SOFTMAX  # noqa: E402 (the int8 op names)
from gpuc.compiler.ops.int8_common import (EXP, HARD_SWISH, LEAKY_RELU, LOGISTIC, MAXIMUM, MINIMUM, MUL, RELU,  # noqa: E402
                                           RELU6, RELU_N1_TO_1, SUB, TANH)
from gpuc.compiler.ops.int8_hard_swish import hard_swish_table  # noqa: E402
_POOLS = {AVG_POOL: 3, MAX_POOL: 4, "AVERAGE_POOL_2D": 3, "MAX_POOL_2D": 4}
# the activation each RELU form clamps to (int8_common.act_range codes: TFLite's fused activation values)
_RELUS = {RELU: 1, RELU_N1_TO_1: 2, RELU6: 3, "RELU": 1, "RELU_N1_TO_1": 2, "RELU6": 3}
# the table ops: transform (float32 in, float32 out, as LiteRT's C++ lambda computes it) and the output grid
_LUTS = {LOGISTIC: "LOGISTIC", TANH: "TANH", HARD_SWISH: "HARD_SWISH", EXP: "EXP", "LOGISTIC": "LOGISTIC",
         "TANH": "TANH", "HARD_SWISH": "HARD_SWISH", "EXP": "EXP"}
_LUT_GRID = {"LOGISTIC": (1.0 / 256, -128), "TANH": (1.0 / 128, 0)}     # (HARD_SWISH, EXP: any output grid)


def _io(node, graph, n_in, consts: bool = False):
    """The n_in inputs and the output: int8 activations (consts: an input may also be a per-tensor quantized
    int8 constant, which the native form reads as its bytes: passes/quant.py leaves it int8)."""
    ts = [graph.t(i) for i in node.inputs[:n_in]] + [graph.t(node.outputs[0])]
    for k, t in enumerate(ts):
        const_ok = consts and k < n_in and t.is_const and t.dtype == "int8" and t.data is not None and per_tensor(t)
        if not int8_activation(graph, t.id) and not const_ok:
            raise ValueError(f"tensor {t.name!r} is not a per-tensor quantized int8 activation")
    return ts


def _add_plan(node, graph):
    a, b, y = _io(node, graph, 2, consts=True)
    if fused_act(node) not in (0, 1, 2, 3):
        raise ValueError(f"fused activation {fused_act(node)} not supported")
    if a.size < b.size:
        a, b = b, a
    sb = list(b.shape)
    while sb and sb[0] == 1:
        sb.pop(0)
    fits = tuple(a.shape) == tuple(b.shape) or not sb or tuple(a.shape[len(a.shape) - len(sb):]) == tuple(sb)
    if tuple(a.shape) != tuple(y.shape) or len(sb) > len(a.shape) or not fits:
        raise ValueError(f"shapes {list(a.shape)} + {list(b.shape)} -> {list(y.shape)}: only equal shapes or "
                         "a broadcast along leading dims run in int8")
    return a, b, y


MAX_RANK = 6          # the general broadcast's dims (BCAST: output dims and each input's strides, 0 where broadcast)


def _bcast_plan(node, graph) -> tuple:
    """(a, b, y, defines) of a binary int8 op under numpy broadcasting (inputs in the node's order; rank at most
    MAX_RANK): OD0.. the output dims, AS0.. / BS0.. each input's element strides (0 along broadcast dims)."""
    a, b, y = _io(node, graph, 2, consts=True)
    if fused_act(node) not in (0, 1, 2, 3):
        raise ValueError(f"fused activation {fused_act(node)} not supported")
    try:
        shape = np.broadcast_shapes(tuple(a.shape), tuple(b.shape))
    except ValueError:
        raise ValueError(f"shapes {list(a.shape)} and {list(b.shape)} do not broadcast") from None
    if tuple(shape) != tuple(y.shape) or len(shape) > MAX_RANK:
        raise ValueError(f"shapes {list(a.shape)} and {list(b.shape)} -> {list(y.shape)}: not a broadcast of at "
                         f"most {MAX_RANK} dims")
    pad = MAX_RANK - len(shape)
    od = [1] * pad + [int(v) for v in shape]

    def strides(t):
        dims = [1] * (MAX_RANK - len(t.shape)) + [int(v) for v in t.shape]
        st, acc = [0] * MAX_RANK, 1
        for k in range(MAX_RANK - 1, -1, -1):
            st[k] = acc if dims[k] != 1 else 0
            acc *= dims[k]
        return st
    d = {f"OD{k}": od[k] for k in range(MAX_RANK)}
    d.update({f"AS{k}": v for k, v in enumerate(strides(a))}, **{f"BS{k}": v for k, v in enumerate(strides(b))})
    return a, b, y, dict(d, BCAST=1)


def binary_plan(node, graph) -> tuple:
    """(a, b, y, broadcast defines or {}, whether a and b are in the node's order): ADD's fast plan (equal
    shapes, or the smaller one along the other's trailing dims), else the general broadcast."""
    try:
        a, b, y = _add_plan(node, graph)
        return a, b, y, {}, a.id == node.inputs[0]
    except ValueError:
        a, b, y, d = _bcast_plan(node, graph)
        return a, b, y, d, True


def _mean_axes(node, graph):
    x, y = _io(node, graph, 1)
    ax_t = graph.t(node.inputs[1])
    if not ax_t.is_const:
        raise ValueError("axis must be constant")
    rank = len(x.shape)
    axes = sorted({int(v) % rank for v in np.asarray(ax_t.data).reshape(-1)}) if rank else []
    if not axes:
        raise ValueError("no axis to reduce")
    if axes != list(range(axes[0], axes[-1] + 1)):
        raise ValueError(f"axes {axes} are not contiguous")
    outer, r = size(x.shape[:axes[0]]), size(x.shape[axes[0]:axes[-1] + 1])
    return x, y, outer, r, size(x.shape[axes[-1] + 1:])


def _optimized_mean(node, graph) -> bool:
    """LiteRT's optimized Mean takes keep_dims over axis data exactly [1, 2] / [2, 1] of a 4-D input."""
    raw = [int(v) for v in np.asarray(graph.t(node.inputs[1]).data).reshape(-1)]
    return bool(node.attrs.get("keep_dims")) and len(graph.t(node.inputs[0]).shape) == 4 and sorted(raw) == [1, 2]


def _softmax_plan(node, graph):
    x, y = _io(node, graph, 1)
    if not x.shape or x.shape[-1] < 1:
        raise ValueError("softmax needs a last dimension")
    s, zp = scale_zp(y)
    if zp != -128 or s != f32(1.0 / 256):
        raise ValueError("int8 softmax output must have scale 1/256 and zero point -128 (LiteRT requires it)")
    return x, y


def _pool_plan(node, graph):
    x, y = _io(node, graph, 1)
    if scale_zp(x) != scale_zp(y):
        raise ValueError("input and output quantization differ (LiteRT's int8 pooling requires them equal)")
    if fused_act(node) not in (0, 1, 2, 3):
        raise ValueError(f"fused activation {fused_act(node)} not supported")
    if node.epilogue.pad and node.op not in (MAX_POOL, "MAX_POOL_2D"):
        raise ValueError("a folded PAD is not supported")      # (a max pool's: int8_move.fold_pads, window takes it)
    kh, kw = int(node.attrs.get("filter_height", 0)), int(node.attrs.get("filter_width", 0))
    if kh < 1 or kw < 1:
        raise ValueError(f"filter {kh}x{kw} must be at least 1x1")
    geo, c, _ = window(node, graph, kh, kw)
    if geo["DH"] != 1 or geo["DW"] != 1:
        raise ValueError("pooling has no dilation")
    geo.pop("DH"), geo.pop("DW"), geo.pop("N")
    return x, y, dict(geo, C=c, KH=kh, KW=kw)


ADD_FIELDS = ("OFF_A", "M_A", "S_A", "OFF_B", "M_B", "S_B", "MO", "SO", "OUT_ZP", "ACT_MIN", "ACT_MAX")


def add_params(a, b, y, act: int) -> dict:
    """LiteRT's int8 ADD parameters (add.cc) for inputs a, b and output y, fused activation `act`: the
    ADD_FIELDS, also the residual epilogue of ops/int8_conv.py (a fused ADD)."""
    (s1, z1), (s2, z2), (so, zo) = scale_zp(a), scale_zp(b), scale_zp(y)
    twice = 2.0 * f32(max(s1, s2))
    m1, e1 = quantize_multiplier(s1 / twice)
    m2, e2 = quantize_multiplier(s2 / twice)
    mo, eo = quantize_multiplier(twice / f32((1 << 20) * np.float32(so)))
    lo, hi = act_range(act, y)
    return dict(OFF_A=-z1, M_A=m1, S_A=e1, OFF_B=-z2, M_B=m2, S_B=e2, MO=mo, SO=eo, OUT_ZP=zo, ACT_MIN=lo, ACT_MAX=hi)


def equal_add(node, graph) -> bool:
    """An int8 ADD of two inputs of its output's shape (no broadcast) that runs natively."""
    try:
        a, b, y = _add_plan(node, graph)
    except ValueError:
        return False
    return tuple(a.shape) == tuple(b.shape) == tuple(y.shape)


@checked
def _check(node, graph):
    if node.op in (ADD, "ADD", MUL, "MUL", SUB, "SUB", MAXIMUM, "MAXIMUM", MINIMUM, "MINIMUM"):
        binary_plan(node, graph)
    elif node.op in (MEAN, "MEAN"):
        _mean_axes(node, graph)
    elif node.op in _POOLS:
        _pool_plan(node, graph)
    elif node.op in _RELUS:
        _io(node, graph, 1)
    elif node.op in (LEAKY_RELU, "LEAKY_RELU"):
        _io(node, graph, 1)
        if not float(node.attrs.get("alpha", 0.0)) > 0:
            raise ValueError("alpha must be above 0")
    elif node.op in _LUTS:
        _lut_plan(node, graph)
    else:
        _softmax_plan(node, graph)
    return None


def _lut_plan(node, graph):
    x, y = _io(node, graph, 1)
    if _LUTS[node.op] == "HARD_SWISH":
        hard_swish_table(scale_zp(x), scale_zp(y))          # (raises ValueError where LiteRT refuses the grids)
        return x, y
    if _LUTS[node.op] == "EXP":
        return x, y
    s, zp = scale_zp(y)
    want = _LUT_GRID[_LUTS[node.op]]
    if zp != want[1] or s != f32(want[0]):
        raise ValueError(f"int8 {_LUTS[node.op]} output must have scale {want[0]:g} and zero point {want[1]} "
                         "(LiteRT requires it)")
    return x, y


def _lut_table(kind: str, x, y) -> np.ndarray:
    """The table by input byte + 128: LUTPopulate's (int8_common.lut_populate, every step in float32) of
    1 / (1 + expf(-v)), tanhf(v), expf(v) with glibc's functions emulated bit for bit (int8_libm; numpy's float32
    exp and tanh differ from them on about 4 in 10 inputs, which moved a table entry on about 1 in 3,000 random
    input grids); HARD_SWISH's fixed-point table."""
    if kind == "HARD_SWISH":
        return hard_swish_table(scale_zp(x), scale_zp(y)).astype(np.int32)
    f = np.float32
    fn = {"EXP": lambda v: int8_libm.expf(float(v)), "TANH": lambda v: int8_libm.tanhf(float(v)),
          "LOGISTIC": lambda v: f(1) / (f(1) + f(int8_libm.expf(float(-v))))}[kind]
    return lut_populate(scale_zp(x), scale_zp(y), fn)


def softmax_table(in_scale: float, beta: float) -> np.ndarray:
    """table[255 - v] = expf(-in_scale * beta * v) (PopulateSoftmaxLookupTable), glibc's expf (int8_libm)."""
    sc = np.float32(-np.float32(in_scale) * np.float32(beta))
    vals = [np.float32(int8_libm.expf(float(np.float32(sc * np.float32(v))))) for v in range(256)]
    return np.array(vals[::-1], np.float32)


@register(ADD, SUB, MUL, MAXIMUM, MINIMUM, MEAN, SOFTMAX, AVG_POOL, MAX_POOL, RELU, RELU6, RELU_N1_TO_1, LOGISTIC, TANH, LEAKY_RELU,
          HARD_SWISH, EXP, check=_check,
          dtypes=("int8",),
          inputs=(1, 2), quantized_io=True,
          summary="internal: native int8 add / mean / softmax / pooling / relu (passes/quant.py native_int8)")
def lower_int8_eltwise(node, graph):
    y = graph.t(node.outputs[0])
    d = dict(NOUT=y.size)
    if node.op in (ADD, SUB):
        a, b, y, bc, in_order = binary_plan(node, graph)
        sub = 0 if node.op == ADD else 1 if in_order else 2       # 2: b - a (the inputs swapped)
        d.update(add_params(a, b, y, fused_act(node)))
        d.update(bc, OP=0, B_MOD=b.size, SUB=sub)
        binds = [("out_", words(graph, y.id)), ("a", words(graph, a.id)), ("b", words(graph, b.id))]
    elif node.op in (MAXIMUM, MINIMUM):
        a, b, y, bc, _ = binary_plan(node, graph)
        d.update(bc, OP=10 if node.op == MAXIMUM else 11, B_MOD=b.size)
        binds = [("out_", words(graph, y.id)), ("a", words(graph, a.id)), ("b", words(graph, b.id))]
    elif node.op == MUL:
        a, b, y, bc, _ = binary_plan(node, graph)
        d.update(bc)
        (s1, z1), (s2, z2), (so, zo) = scale_zp(a), scale_zp(b), scale_zp(y)
        m, sh = quantize_multiplier(f32(np.float32(np.float32(s1) * np.float32(s2)) / np.float32(so)))  # mul.cc: float
        lo, hi = act_range(fused_act(node), y)
        d.update(OP=6, OFF_A=-z1, OFF_B=-z2, MO=m, SO=sh, OUT_ZP=zo, ACT_MIN=lo, ACT_MAX=hi, B_MOD=b.size)
        binds = [("out_", words(graph, y.id)), ("a", words(graph, a.id)), ("b", words(graph, b.id))]
    elif node.op == LEAKY_RELU:
        x, y = _io(node, graph, 1)
        f = np.float32
        (si, zi), (so, zo) = scale_zp(x), scale_zp(y)
        m, s = quantize_multiplier(f32(f(si) / f(so)))                               # LeakyReluPrepare: float
        ma, sa = quantize_multiplier(f32(f(f(si) * f(node.attrs.get("alpha", 0.0))) / f(so)))
        d.update(OP=9, IN_ZP=zi, MO=m, SO=s, M_A=ma, S_A=sa, OUT_ZP=zo)
        binds = [("out_", words(graph, y.id)), ("a", words(graph, x.id))]
    elif node.op in _LUTS:
        x, y = _lut_plan(node, graph)
        lut = graph.add_const(f"{y.name}#table", _lut_table(_LUTS[node.op], x, y))
        d.update(OP=7)
        binds = [("out_", words(graph, y.id)), ("a", words(graph, x.id)), ("lut", lut)]
    elif node.op == MEAN:
        x, y, outer, r, inner = _mean_axes(node, graph)
        (si, zi), (so, zo) = scale_zp(x), scale_zp(y)
        if _optimized_mean(node, graph):
            f = np.float32
            m, s = quantize_multiplier(float(f(si) / (f(r) * f(so))))
            temp = f(f(zi) * f(si)) / f(so)
            temp = temp + f(0.5) if temp > 0 else temp - f(0.5)
            d.update(OP=1, OUTER=outer, R=r, INNER=inner, IN_ZP=0, MO=m, SO=s, OUT_ZP=zo - int(temp), MEAN_OPT=1,
                     BLK=inner // 16 * 16)
        else:
            m, s = quantize_multiplier(si / so)
            sh = min(r.bit_length() - 1, 32, 31 + s)
            m, s = (m << sh) // r, s - sh
            d.update(OP=1, OUTER=outer, R=r, INNER=inner, IN_ZP=zi, MO=m, SO=s, OUT_ZP=zo)
        binds = [("out_", words(graph, y.id)), ("a", words(graph, x.id))]
    elif node.op in _POOLS:
        x, y, geo = _pool_plan(node, graph)
        lo, hi = act_range(fused_act(node), y)
        d.update(geo, OP=_POOLS[node.op], ACT_MIN=lo, ACT_MAX=hi)
        binds = [("out_", words(graph, y.id)), ("a", words(graph, x.id))]
    elif node.op in _RELUS:
        x, y = _io(node, graph, 1)
        (si, zi), (so, zo) = scale_zp(x), scale_zp(y)
        m, s = quantize_multiplier(f32(np.float32(si) / np.float32(so)))     # ReluPrepare: float / float
        lo, hi = act_range(_RELUS[node.op], y)
        d.update(OP=5, IN_ZP=zi, MO=m, SO=s, OUT_ZP=zo, ACT_MIN=lo, ACT_MAX=hi)
        binds = [("out_", words(graph, y.id)), ("a", words(graph, x.id))]
    else:
        x, y = _softmax_plan(node, graph)
        si, _ = scale_zp(x)
        lut = graph.add_const(f"{y.name}#softmax_table", softmax_table(si, float(node.attrs.get("beta", 1.0))))
        so, zo = scale_zp(y)
        d.update(OP=2, L=int(x.shape[-1]), OUT_SCALE=so, OUT_ZP=zo)
        binds = [("out_", words(graph, y.id)), ("a", words(graph, x.id)), ("lut", lut)]
    k = Kernel("int8_eltwise", binds, -(-y.size // 4), d, node.label())
    if d["OP"] == 2:
        return with_row_stats(k, graph, y.size // int(x.shape[-1]))
    return with_partials(k, graph) if d["OP"] in (1, 3, 4) else [k]


PARTIAL_FROM = 4096          # MEANs and pools over more elements than this: partial sums first
PART = 2048                  # elements a partial sums (pools: whole window rows, at least one)


def with_partials(k: Kernel, graph) -> list:
    """Kernel `k` (OP 1 MEAN, OP 3 / 4 average / max pool: each invocation reduces 4 outputs' elements in turn) as
    it is for short reductions.  A longer one first sums (pools: sums and counts, or maxima) parts of PART elements,
    an invocation a part of an output, into int32 partials, and `k` combines them (PARTS): exact integer sums in any
    order.  (4 outputs of 22,500 elements an invocation passed llvmpipe's loop limit: off by one on lavapipe.)"""
    d = k.defines
    pool = d["OP"] != 1
    total, rows = (d["KH"] * d["KW"], d["KH"]) if pool else (d["R"], d["R"])
    if total <= PARTIAL_FROM:
        return [k]
    rp = max(1, PART // d["KW"]) if pool else PART
    parts = -(-rows // rp)
    ps = graph.add_tensor(f"{k.label}/partials", [d["NOUT"] * parts * (2 if pool else 1)], "int32")
    a = [b for b in k.bindings if b[0] == "a"]
    pk = Kernel("int8_eltwise", [("ps", ps)] + a, d["NOUT"] * parts, dict(d, PSUM=1, PARTS=parts, RP=rp),
                f"{k.label}: {parts} partial sums")
    return [pk, dataclasses.replace(k, bindings=list(k.bindings) + [("ps", ps)], defines=dict(d, PARTS=parts, RP=rp))]


ROW_STATS_FROM = 2048        # rows longer than this: their statistics once, then the elements


def with_row_stats(k: Kernel, graph, rows: int) -> list:
    """Kernel `k` (OP 2, 17 or 19: SOFTMAX, LOG_SOFTMAX, L2_NORMALIZATION, whose invocations each walk their row
    for its max and in-order sum) as it is for short rows.  A longer row gets its statistics once, an invocation
    a row (chunks of it within step_chunks.LOOP_BUDGET: each invocation walked it twice, O(L^2) work a row, past
    llvmpipe's loop limit beyond 32,767), and `k` reads them (ROWSTATS)."""
    if k.defines["L"] <= ROW_STATS_FROM or rows == 0:
        return [k]
    rs = graph.add_tensor(f"{k.label}/row_stats", [2 * rows], "int32")
    binds = [("rs", rs)] + [b for b in k.bindings if b[0] in ("a", "lut")]
    out = []
    for phase in ([0, 1] if k.defines["OP"] != 19 else [1]):
        s = Kernel("int8_eltwise", binds, rows, dict(k.defines, STATS=1, PHASE=phase),
                   f"{k.label}: row {'max' if phase == 0 else 'sum'}", rw=("rs",))
        out += in_chunks(s, graph, 1, "L", tag=f"_phase{phase}_")
    return out + [dataclasses.replace(k, bindings=list(k.bindings) + [("rs", rs)], defines=dict(k.defines, ROWSTATS=1))]


_BASE = dict(SUB=0, NOUT=30, OFF_A=3, OFF_B=-2, M_A=1 << 30, S_A=0, M_B=1 << 30, S_B=-1, MO=1 << 30, SO=-3, OUT_ZP=1,
             ACT_MIN=QMIN, ACT_MAX=QMAX, B_MOD=30, MEAN_OPT=0, BLK=16, OUTER=2, R=5, INNER=3, IN_ZP=4, L=10, OUT_SCALE=1.0 / 256, KMAX=4, SI_BITS=0x3c000000, SC_BITS=0x3d800000,
             H=5, W=5, C=3, OH=3, OW=3, KH=3, KW=3, SH=2, SW=2, PT=1, PL=1)
VARIANTS = {
    "int8_eltwise:bcast": (dict(_BASE, OP=0, BCAST=1, **{f"OD{k}": 2 for k in range(MAX_RANK)},
                                **{f"AS{k}": 1 for k in range(MAX_RANK)}, **{f"BS{k}": 0 for k in range(MAX_RANK)}),
                           {"OP": [0, 6, 10, 11, 15, 16]}, ["out_", "a", "b"], {"out_": "uint32", "a": "uint32", "b": "uint32"}),
    "int8_eltwise": (dict(_BASE, OP=0), {"SUB": [0, 1, 2]}, ["out_", "a", "b"], {"out_": "uint32", "a": "uint32", "b": "uint32"}),
    "int8_eltwise:mean": (dict(_BASE, OP=1), {"MEAN_OPT": [0, 1]}, ["out_", "a"], {"out_": "uint32", "a": "uint32"}),
    "int8_eltwise:pool": (dict(_BASE, OP=3), {"OP": [3, 4]}, ["out_", "a"], {"out_": "uint32", "a": "uint32"}),
    "int8_eltwise:partials": (dict(_BASE, OP=1, PSUM=1, PARTS=3, RP=2), {"OP": [1, 3, 4]}, ["ps", "a"],
                              {"ps": "int32", "a": "uint32"}),
    "int8_eltwise:combine": (dict(_BASE, OP=1, PARTS=3, RP=2), {"OP": [1, 3, 4], "MEAN_OPT": [0, 1]},
                             ["out_", "a", "ps"], {"out_": "uint32", "a": "uint32", "ps": "int32"}),
    "int8_eltwise:relu": (dict(_BASE, OP=5), {"OP": [5, 9, 19]}, ["out_", "a"], {"out_": "uint32", "a": "uint32"}),
    "int8_eltwise:mul": (dict(_BASE, OP=6), {"OP": [6, 10, 11, 15, 16]}, ["out_", "a", "b"],   # (15, 16: int8_binary.py)
                         {"out_": "uint32", "a": "uint32", "b": "uint32"}),
    "int8_eltwise:table": (dict(_BASE, OP=7), {"OP": [7, 12]}, ["out_", "a", "lut"],      # (12: int8_resize.py)
                           {"out_": "uint32", "a": "uint32", "lut": "int32"}),
    "int8_eltwise:reduce": (dict(_BASE, OP=13, **{f"{v}{k}": 2 for v in ("KD", "KS", "RD", "RS")
                                                  for k in range(MAX_RANK)}),
                            {"OP": [13, 14]}, ["out_", "a"], {"out_": "uint32", "a": "uint32"}),    # (int8_reduce.py)
    "int8_eltwise:pair": (dict(_BASE, OP=18, **{f"OD{k}": 2 for k in range(MAX_RANK)},          # (int8_div.py)
                               **{f"AS{k}": 1 for k in range(MAX_RANK)}, **{f"BS{k}": 0 for k in range(MAX_RANK)}),
                          {"BCAST": [0, 1]}, ["out_", "a", "b", "lut"],
                          {"out_": "uint32", "a": "uint32", "b": "uint32", "lut": "int32"}),
    "int8_eltwise:softmax": (dict(_BASE, OP=2), {"OP": [2, 17]}, ["out_", "a", "lut"],      # (17: int8_normalize.py)
                             {"out_": "uint32", "a": "uint32", "lut": "float32"}),
    "int8_eltwise:rowstats": (dict(_BASE, OP=2, ROWSTATS=1), {"OP": [2, 17]}, ["out_", "a", "lut", "rs"],
                              {"out_": "uint32", "a": "uint32", "lut": "float32", "rs": "int32"}),
    "int8_eltwise:rowstats-l2": (dict(_BASE, OP=19, ROWSTATS=1), {}, ["out_", "a", "rs"],
                                 {"out_": "uint32", "a": "uint32", "rs": "int32"}),
    "int8_eltwise:stats": (dict(_BASE, STATS=1), {"OP": [2, 17, 19], "PHASE": [0, 1], "CHUNKED": [0, 1]},
                           ["rs", "a", "lut", "steps"],
                           {"rs": "int32", "a": "uint32", "lut": "float32", "steps": "int32"},
                           lambda d: dict(rw=("rs",))),
}

native_form(("ADD", ADD), ("MEAN", MEAN), ("SOFTMAX", SOFTMAX), ("AVERAGE_POOL_2D", AVG_POOL),
            ("MAX_POOL_2D", MAX_POOL), ("RELU", RELU), ("RELU6", RELU6), ("RELU_N1_TO_1", RELU_N1_TO_1), ("MUL", MUL),
            ("LOGISTIC", LOGISTIC), ("TANH", TANH), ("SUB", SUB), ("LEAKY_RELU", LEAKY_RELU),
            ("HARD_SWISH", HARD_SWISH), ("MAXIMUM", MAXIMUM), ("MINIMUM", MINIMUM), ("EXP", EXP), check=_check)

declare_int8(ADD, SUB, MUL, MAXIMUM, MINIMUM, MEAN, SOFTMAX, AVG_POOL, MAX_POOL, RELU, RELU6, RELU_N1_TO_1,
             LOGISTIC, TANH, LEAKY_RELU, HARD_SWISH, EXP, templates=("int8_eltwise",), flops=lambda n, g: 2 * g.t(n.inputs[0]).size)
template("int8_eltwise", item_major=False, flat=True)
