"""Native int8 DIV (INT8_DIV), as LiteRT's builtin int8 kernel computes it (div.cc; reference_ops DivElementwise /
optimized_ops BroadcastDivSlowQuantized, the same arithmetic): with a = x1 - zp1 and b = x2 - zp2 (signs moved so
that b > 0), b's reciprocal by GetReciprocal (gemmlowp's one_over_one_plus_x_for_x_in_0_1, three Newton-Raphson
steps in Q2.29), a shifted left by its redundant sign bits times that reciprocal, then times the output multiplier
(input scale 1 / (input scale 2 x output scale), computed in float as LiteRT's Prepare computes it) and divided by
2^(-total shift) with gemmlowp's rounding, where total shift = output shift - reciprocal shift - headroom: plus the
output zero point, clamped to the fused activation.  Total shifts of 32 and more occur (small quotients on coarse
output grids); LiteRT's x86 build then shifts by the count modulo 32 (found by experiment on LiteRT 2.3: every
byte pair on random grids), and so does this table.  The result depends on the two bytes only, so the whole
256 x 256 table is made here at compile time (int8, 16,384 words) and read per output element (shaders/
int8_eltwise.comp OP 18); both inputs broadcast as ADD's.
A divisor byte equal to its zero point (division by zero) fails LiteRT's invocation; gpuc refuses a constant
divisor holding one (REFUSALS) and, for an activation, writes the fused activation's bound of the dividend's sign
(its zero point for 0 / 0)."""
from __future__ import annotations

import numpy as np

from gpuc.compiler.codegen.kernel import Kernel
from gpuc.compiler.ops import register
from gpuc.compiler.ops.int8_facts import declare_int8
from gpuc.compiler.ops.int8_common import (QMAX, QMIN, REFUSALS, act_range, per_tensor, native_form,
                                           quantize_multiplier, scale_zp, srdhm)
from gpuc.compiler.ops.int8_eltwise import binary_plan
from gpuc.compiler.ops.math import words
from gpuc.compiler.ops.util import checked, fused_act

from gpuc.compiler.ops.int8_common import DIV  # noqa: E402 (the int8 op names)


def _wrap32(x):
    return ((np.asarray(x, np.int64) + 2 ** 31) % 2 ** 32) - 2 ** 31


def _clz32(x):
    x = np.asarray(x, np.int64) & 0xffffffff
    n = np.full(x.shape, 32, np.int64)
    for k in range(31, -1, -1):
        n = np.where((n == 32) & (x >> k != 0), 31 - k, n)
    return n


def _saturating_shl(x, e: int):
    thr = (1 << (31 - e)) - 1
    return np.where(x > thr, 2 ** 31 - 1, np.where(x < -thr, -2 ** 31, _wrap32(x << e)))


def _one_over_one_plus_x(a):
    """gemmlowp's one_over_one_plus_x_for_x_in_0_1 of Q0.31 raws."""
    half = (a + (2 ** 31 - 1) + 1) // 2                      # RoundingHalfSum(a, One()): the sum is >= 0
    x = _wrap32(1515870810 + srdhm(half, -1010580540))       # 48/17 - 32/17 half (Q2.29)
    for _ in range(3):
        x = _wrap32(x + _saturating_shl(srdhm(x, _wrap32((1 << 29) - srdhm(half, x))), 2))
    return _saturating_shl(x, 1)


def div_multiplier(x1, x2, y) -> tuple[int, int]:
    """div.cc's output multiplier: input scale 1 / (input scale 2 x output scale), all float32."""
    f = np.float32
    (s1, _), (s2, _), (so, _) = scale_zp(x1), scale_zp(x2), scale_zp(y)
    return quantize_multiplier(float(f(s1) / f(f(s2) * f(so))))


def div_table(x1, x2, y, act: int) -> np.ndarray:
    """The int8 result for every (x1 byte + 128, x2 byte + 128)."""
    (_, z1), (_, z2), (_, zo) = scale_zp(x1), scale_zp(x2), scale_zp(y)
    om, osh = div_multiplier(x1, x2, y)
    lo, hi = act_range(act, y)
    a0 = np.arange(QMIN, QMAX + 1).reshape(256, 1) - z1
    b0 = np.arange(QMIN, QMAX + 1).reshape(1, 256) - z2
    a, b = (v.astype(np.int64).copy() for v in np.broadcast_arrays(a0, b0))
    neg = b < 0
    a[neg], b[neg] = -a[neg], -b[neg]
    zero = b == 0
    b[zero] = 1
    hr = _clz32(b)
    inv = _one_over_one_plus_x(_wrap32((b << hr) - 2 ** 31))            # GetReciprocal(b, 31)
    head = np.where(a == 0, 31, _clz32(np.where(a >= 0, a, ~a)) - 1)    # CountLeadingSignBits
    q = srdhm(srdhm(_wrap32(a << head), inv), om)
    e = head + (31 - hr) - osh                                          # -total shift (>= 0: div_refused)
    mask = _wrap32((np.int64(1) << e) - 1)                              # (int32 of 2^e - 1: -1 from 32 on)
    r = (q >> (e & 31)) + ((_wrap32(q & mask)) > (mask >> 1) + (q < 0))  # x86: the shift count modulo 32
    out = np.clip(zo + r, lo, hi)
    out[zero] = np.where(a[zero] > 0, hi, np.where(a[zero] < 0, lo, min(max(zo, lo), hi)))
    return out.astype(np.int8)


def _zero_divisor(node, graph):
    """REFUSALS: a constant int8 divisor holding its zero point fails every LiteRT invocation: None, or why."""
    if len(node.inputs) < 2 or node.inputs[1] < 0:
        return None
    d = graph.t(node.inputs[1])
    if not d.is_const or d.dtype != "int8" or d.data is None or not per_tensor(d):
        return None
    _, zp = scale_zp(d)
    if (np.asarray(d.data).reshape(-1).astype(np.int64) == zp).any():
        return (f"constant int8 divisor {d.name!r} holds its zero point {zp} (a division by zero: LiteRT's int8 "
                "DIV fails every invocation)")
    return None


REFUSALS["DIV"] = _zero_divisor


def _plan(node, graph):
    a, b, y, bc, in_order = binary_plan(node, graph)
    x1, x2 = (a, b) if in_order else (b, a)
    _, osh = div_multiplier(x1, x2, y)
    if osh >= 23:
        raise ValueError(f"output multiplier 2^{osh} too large for the int8 DIV kernel's shifts")
    return a, b, y, bc, in_order


@checked
def _check(node, graph):
    _plan(node, graph)
    return None


@register(DIV, check=_check, dtypes=("int8",), inputs=(2, 2), quantized_io=True,
          summary="internal: native int8 division by a byte-pair table (passes/quant.py native_int8)")
def lower_int8_div(node, graph):
    a, b, y, bc, in_order = _plan(node, graph)
    x1, x2 = (a, b) if in_order else (b, a)
    t = div_table(x1, x2, y, fused_act(node))
    if not in_order:
        t = t.T
    lut = graph.add_const(f"{y.name}#div_table", np.ascontiguousarray(t).reshape(-1).view(np.int32))
    d = dict(bc, NOUT=y.size, B_MOD=b.size, OP=18)
    binds = [("out_", words(graph, y.id)), ("a", words(graph, a.id)), ("b", words(graph, b.id)), ("lut", lut)]
    return [Kernel("int8_eltwise", binds, -(-y.size // 4), d, node.label())]


native_form(("DIV", DIV), check=_check)

declare_int8(DIV, templates=("int8_eltwise",), flops=lambda n, g: g.t(n.outputs[0]).size)
