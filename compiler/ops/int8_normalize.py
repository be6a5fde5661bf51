"""Native int8 LOG_SOFTMAX and L2_NORMALIZATION (INT8_LOG_SOFTMAX, INT8_L2_NORMALIZATION), as LiteRT's builtin
kernels compute them (shaders/int8_eltwise.comp OP 17 / 19; passes/quant.py native_int8 makes them when the whole
model runs in int8):

* LOG_SOFTMAX (activations.cc LogSoftmaxPrepare / LogSoftmaxEval, kGenericOptimized: optimized_ops::LogSoftmax
  over a float table, not the fixed-point reference kernel): per row of the last axis, the largest byte m; the
  float32 sum, in order, of table[255 - m + x] (PopulateSoftmaxLookupTable: expf(-input scale x v), SOFTMAX's
  table); L = logf(sum) as glibc's logf computes it (its 16-entry table and polynomial in double: emulated in
  float-float with a final rounding check, shaders/int8_eltwise.comp ls_logf; equal to glibc's logf on 22
  million random sums in [1, 10^9] and on every sum 1 + j 2^-23, j < 2000); pre = (input scale x m + L) / (1/16);
  out = rint(input scale / (1/16) x x - pre) + 127, clamped; every step in float32, no fused multiply-add
  (checked against LiteRT 2.3 by experiment: its build contracts none of them).  The output grid must be 1/16,
  127 (LiteRT refuses any other: REFUSALS).
* L2_NORMALIZATION (l2norm.cc, reference_integer_ops::L2Normalization; the input scale unused): per row the int32
  sum of (x - input zero point)^2, its inverse square root by GetInvSqrtQuantizedMultiplierExp (gemmlowp fixed
  point: five Newton-Raphson steps in Q3.28), each x - zero point requantized by it with 7 more bits (gemmlowp
  rounding), clamped.  The output grid must be 1/128, 0 (LiteRT refuses any other: REFUSALS)."""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from gpuc.compiler.codegen.kernel import Kernel
from gpuc.compiler.ops import register
from gpuc.compiler.ops.int8_facts import declare_int8
from gpuc.compiler.ops.int8_common import REFUSALS, int8_activation, native_form, per_tensor, scale_zp
from gpuc.compiler.ops.int8_eltwise import softmax_table, with_row_stats
from gpuc.compiler.ops.int8_libm import LOGF_INVC, LOGF_LN2, LOGF_LOGC, LOGF_POLY
from gpuc.compiler.ops.math import words
from gpuc.compiler.ops.util import checked, fused_act

from gpuc.compiler.ops.int8_common import L2_NORMALIZATION, LOG_SOFTMAX  # noqa: E402 (the int8 op names)

OUT_GRID = (16.0 / 256, 127)            # LiteRT's fixed int8 LOG_SOFTMAX output grid
L2_GRID = (1.0 / 128, 0)                # and L2_NORMALIZATION's
_GRIDS = {"LOG_SOFTMAX": (OUT_GRID, "16/256"), "L2_NORMALIZATION": (L2_GRID, "1/128"),
          LOG_SOFTMAX: (OUT_GRID, "16/256"), L2_NORMALIZATION: (L2_GRID, "1/128")}


def split3(c: float) -> list[float]:
    """A double as three float32 values whose exact sum it is."""
    hi = float(np.float32(c))
    mid = float(np.float32(c - hi))
    lo = float(np.float32(c - hi - mid))
    assert Fraction(hi) + Fraction(mid) + Fraction(lo) == Fraction(c)
    return [hi, mid, lo]


def logf_table(kmax: int) -> np.ndarray:
    """ls_logf's constants: 1/c of the 16 subintervals as three floats each (48), the polynomial's coefficients
    as pairs (6), then y0 = logc + k ln 2 (the double glibc rounds it to) as three floats for k = 0 .. kmax - 1
    and each subinterval (48 kmax)."""
    inv = [v for c in LOGF_INVC for v in split3(c)]
    poly = [v for c in LOGF_POLY for v in split3(c)[:2]]
    y0 = [v for k in range(kmax) for i in range(16)
          for v in split3(float(Fraction(k) * Fraction(LOGF_LN2) + Fraction(LOGF_LOGC[i])))]
    return np.array(inv + poly + y0, np.float32)


def _grid_refused(node, graph):
    """REFUSALS: LiteRT's int8 LOG_SOFTMAX takes only the output grid 16/256, 127, L2_NORMALIZATION only 1/128, 0:
    None, or the reason."""
    if len(node.inputs) < 1 or node.inputs[0] < 0 or len(node.outputs) != 1 or node.outputs[0] < 0:
        return None
    x, y = graph.t(node.inputs[0]), graph.t(node.outputs[0])
    grid, text = _GRIDS[node.op]
    if x.dtype != "int8" or y.dtype != "int8" or not per_tensor(y) or scale_zp(y) == grid:
        return None
    s, zp = scale_zp(y)
    return (f"int8 output {y.name!r} has scale {s:.9g} and zero point {zp}; LiteRT's int8 {node.op} requires "
            f"scale {text} and zero point {grid[1]}")


REFUSALS["LOG_SOFTMAX"] = REFUSALS["L2_NORMALIZATION"] = _grid_refused


def _plan(node, graph):
    x, y = graph.t(node.inputs[0]), graph.t(node.outputs[0])
    if not int8_activation(graph, x.id) or not int8_activation(graph, y.id):
        raise ValueError("input and output must be per-tensor quantized int8 activations")
    if not x.shape or int(x.shape[-1]) < 1 or tuple(x.shape) != tuple(y.shape):
        raise ValueError("the op needs a non-empty last axis and an output of its input's shape")
    grid, text = _GRIDS[node.op]
    if scale_zp(y) != grid:
        raise ValueError(f"int8 {node.op} output must have scale {text} and zero point {grid[1]} (LiteRT requires it)")
    if node.op in (L2_NORMALIZATION, "L2_NORMALIZATION") and fused_act(node) != 0:
        raise ValueError("fused activation not supported (LiteRT accepts only NONE)")
    return x, y


@checked
def _check(node, graph):
    _plan(node, graph)
    return None


def _f32_bits(v: float) -> int:
    return int(np.array(v, np.float32).view(np.int32))


@register(LOG_SOFTMAX, L2_NORMALIZATION, check=_check, dtypes=("int8",), inputs=(1, 1), quantized_io=True,
          summary="internal: native int8 log softmax / l2 normalization (passes/quant.py native_int8)")
def lower_int8_normalize(node, graph):
    x, y = _plan(node, graph)
    depth = int(x.shape[-1])
    if node.op == L2_NORMALIZATION:
        d = dict(NOUT=y.size, OP=19, L=depth, IN_ZP=scale_zp(x)[1])
        k = Kernel("int8_eltwise", [("out_", words(graph, y.id)), ("a", words(graph, x.id))], -(-y.size // 4), d,
                   node.label())
        return with_row_stats(k, graph, y.size // depth)
    si, _ = scale_zp(x)
    kmax = int(math.log2(depth)) + 3                    # (the sum is at most depth: k <= log2(depth) + 1)
    table = np.concatenate([softmax_table(si, 1.0), logf_table(kmax)])
    lut = graph.add_const(f"{y.name}#log_softmax_table", table)
    sc = np.float32(np.float32(si) / np.float32(OUT_GRID[0]))                           # float / float, as LiteRT
    d = dict(NOUT=y.size, OP=17, L=depth, KMAX=kmax, SI_BITS=_f32_bits(si), SC_BITS=_f32_bits(sc))
    binds = [("out_", words(graph, y.id)), ("a", words(graph, x.id)), ("lut", lut)]
    return with_row_stats(Kernel("int8_eltwise", binds, -(-y.size // 4), d, node.label()), graph, y.size // depth)


native_form(("LOG_SOFTMAX", LOG_SOFTMAX), ("L2_NORMALIZATION", L2_NORMALIZATION), check=_check)

declare_int8(LOG_SOFTMAX, L2_NORMALIZATION, templates=("int8_eltwise",), flops=lambda n,
             g: 8 * g.t(n.outputs[0]).size)
