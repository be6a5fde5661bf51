"""Native int8 SQUARED_DIFFERENCE and PRELU (INT8_SQUARED_DIFFERENCE, INT8_PRELU), as LiteRT's builtin integer
kernels compute them (shaders/int8_eltwise.comp OP 15 / 16; gemmlowp rounding throughout, RQ_GEMMLOWP):

* SQUARED_DIFFERENCE (squared_difference.cc): ADD's scheme with a left shift of 7: each input minus its zero
  point, times 2^7, rescaled to 2 * max(input scales) (input scale / that, in double), the difference squared,
  rescaled by (2 * max scale)^2 / (2^14 * output scale) (double), plus the output zero point, clamped.  LiteRT
  aborts the process where that output multiplier is not below 1 (QuantizeMultiplierSmallerThanOneExp's
  check): REFUSALS refuses such a model here.  Shapes: equal, or numpy broadcasting (as ADD's).
* PRELU (activations.cc PreluPrepare, reference_ops::BroadcastPrelu4DSlow / Prelu): v = input - its zero point;
  v >= 0: v times input scale / output scale; else v * (alpha - alpha's zero point) times input scale x alpha
  scale / output scale (both multipliers computed in float, float / float as LiteRT's Prepare does), plus the
  output zero point, clamped; alpha (an activation or a per-tensor quantized int8 constant, read as its bytes)
  broadcast to the input's shape.
passes/quant.py native_int8 makes these ops when the whole model runs in int8."""
from __future__ import annotations

import numpy as np

from gpuc.compiler.codegen.kernel import Kernel
from gpuc.compiler.ops import register
from gpuc.compiler.ops.int8_facts import declare_int8
from gpuc.compiler.ops.int8_common import REFUSALS, f32, native_form, per_tensor, quantize_multiplier, scale_zp
from gpuc.compiler.ops.int8_eltwise import binary_plan
from gpuc.compiler.ops.math import words
from gpuc.compiler.ops.util import checked

from gpuc.compiler.ops.int8_common import PRELU, SQUARED_DIFFERENCE  # noqa: E402 (the int8 op names)


def sq_diff_params(a, b, y) -> dict:
    """squared_difference.cc's int8 parameters (in double, as its Prepare computes them) for inputs a, b and
    output y; ValueError where LiteRT's kernel aborts (an output multiplier of 1 or more)."""
    (s1, z1), (s2, z2), (so, zo) = scale_zp(a), scale_zp(b), scale_zp(y)
    twice = 2.0 * max(s1, s2)
    out = twice * twice / ((1 << 14) * so)
    mo, eo = quantize_multiplier(out)
    if not out < 1.0 or eo > 0:
        raise ValueError(f"output scale {so:.9g} is too small for LiteRT's int8 SQUARED_DIFFERENCE (its output "
                         f"multiplier {out:.6g} is not below 1: LiteRT's kernel aborts)")
    m1, e1 = quantize_multiplier(s1 / twice)
    m2, e2 = quantize_multiplier(s2 / twice)
    return dict(OFF_A=-z1, M_A=m1, S_A=e1, OFF_B=-z2, M_B=m2, S_B=e2, MO=mo, SO=eo, OUT_ZP=zo)


def _sq_diff_refused(node, graph):
    """REFUSALS: an int8 SQUARED_DIFFERENCE whose grids make LiteRT's kernel abort: None, or the reason."""
    ts = [graph.t(i) if i >= 0 else None for i in list(node.inputs[:2]) + list(node.outputs[:1])]
    if len(ts) != 3 or any(t is None or t.dtype != "int8" or not per_tensor(t) for t in ts):
        return None
    try:
        sq_diff_params(*ts)
    except ValueError as e:
        return str(e)
    return None


REFUSALS["SQUARED_DIFFERENCE"] = _sq_diff_refused


def _plan(node, graph):
    a, b, y, bc, in_order = binary_plan(node, graph)
    if node.op in (PRELU, "PRELU"):
        if not in_order or tuple(a.shape) != tuple(y.shape):
            raise ValueError("PRELU's output must have its input's shape (alpha broadcast to it)")
    else:
        sq_diff_params(a, b, y)
    return a, b, y, bc


@checked
def _check(node, graph):
    _plan(node, graph)
    return None


@register(SQUARED_DIFFERENCE, PRELU, check=_check, dtypes=("int8",), inputs=(2, 2), quantized_io=True,
          summary="internal: native int8 squared difference / prelu (passes/quant.py native_int8)")
def lower_int8_binary(node, graph):
    a, b, y, bc = _plan(node, graph)
    d = dict(bc, NOUT=y.size, B_MOD=b.size)
    if node.op == SQUARED_DIFFERENCE:
        d.update(sq_diff_params(a, b, y), OP=15)
    else:
        f = np.float32
        (si, zi), (sa, za), (so, zo) = scale_zp(a), scale_zp(b), scale_zp(y)
        m1, e1 = quantize_multiplier(f32(f(si) / f(so)))                        # PreluPrepare: float / float
        m2, e2 = quantize_multiplier(f32(f(f(si) * f(sa)) / f(so)))
        d.update(OP=16, OFF_A=-zi, OFF_B=-za, MO=m1, SO=e1, M_A=m2, S_A=e2, OUT_ZP=zo)
    binds = [("out_", words(graph, y.id)), ("a", words(graph, a.id)), ("b", words(graph, b.id))]
    return [Kernel("int8_eltwise", binds, -(-y.size // 4), d, node.label())]


native_form(("SQUARED_DIFFERENCE", SQUARED_DIFFERENCE), ("PRELU", PRELU), check=_check)

declare_int8(SQUARED_DIFFERENCE, PRELU, templates=("int8_eltwise",), flops=lambda n, g: 4 * g.t(n.outputs[0]).size)
