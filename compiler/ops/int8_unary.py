"""Native int8 ABS, NEG, ELU and LOG (INT8_ABS, INT8_NEG, INT8_ELU, INT8_LOG), as LiteRT's builtin int8 kernels
compute them, each a 256-entry table of the input byte made here at compile time (shaders/int8_eltwise.comp OP 7;
passes/quant.py native_int8 makes these ops when the whole model runs in int8):

* ABS (elementwise.cc AbsEvalQuantized): v = |x - input zero point|; on equal input and output scales (compared as
  float32) v + the output zero point, else v requantized by input scale / output scale (a float division, as
  SetAbsOutputMultiplier's) with gemmlowp rounding, + the output zero point; clamped.
* NEG (neg.cc, reference_ops::Negate): the raw byte negated in int8 (-(-128) wraps to -128), whatever the grids
  (LiteRT reads neither).
* ELU (activations.cc EluPrepare) and LOG (elementwise.cc LogLUTPrepare): LUTPopulate's table (every step in
  float32: dequantize, transform, times 1 / output scale, rounded half away from zero, plus the zero point,
  clamped, saturating past int32 as LiteRT's build does) of value < 0 ? expm1f(value) : value, and of
  value <= 0 ? (-128 - output zero point) x output scale : logf(value), with glibc's expm1f and logf
  (compiler/ops/int8_libm.py)."""
from __future__ import annotations

import numpy as np

from gpuc.compiler.codegen.kernel import Kernel
from gpuc.compiler.ops import register
from gpuc.compiler.ops.int8_facts import declare_int8
from gpuc.compiler.ops import int8_libm
from gpuc.compiler.ops.int8_common import (QMAX, QMIN, int8_activation, lut_populate, multiply_by_quantized_multiplier,
                                           native_form, quantize_multiplier, scale_zp)
from gpuc.compiler.ops.math import words
from gpuc.compiler.ops.util import checked

from gpuc.compiler.ops.int8_common import ABS, ELU, LOG, NEG  # noqa: E402 (the int8 op names)
_SRC = {ABS: "ABS", NEG: "NEG", ELU: "ELU", LOG: "LOG"}
_F = np.float32


def unary_table(op: str, x_grid: tuple, y_grid: tuple) -> np.ndarray:
    """The int8 table of ABS / NEG / ELU / LOG (TFLite op names) for the input and output grids."""
    v = np.arange(QMIN, QMAX + 1)
    if op == "NEG":
        return ((-v + 128) % 256 - 128).astype(np.int32)
    (si, zi), (so, zo) = x_grid, y_grid
    if op == "ABS":
        a = np.abs(v - zi)
        if _F(si) != _F(so):
            m, s = quantize_multiplier(float(_F(si) / _F(so)))
            a = multiply_by_quantized_multiplier(a, m, s)
        return np.clip(a + zo, QMIN, QMAX).astype(np.int32)
    if op == "ELU":
        return lut_populate(x_grid, y_grid, lambda x: int8_libm.expm1f(float(x)) if x < 0 else x)
    out_min = _F(QMIN - zo) * _F(so)
    return lut_populate(x_grid, y_grid, lambda x: out_min if x <= 0 else int8_libm.logf(float(x)))


def _plan(node, graph):
    x, y = graph.t(node.inputs[0]), graph.t(node.outputs[0])
    if not int8_activation(graph, x.id) or not int8_activation(graph, y.id):
        raise ValueError("input and output must be per-tensor quantized int8 activations")
    if tuple(x.shape) != tuple(y.shape):
        raise ValueError(f"output shape {list(y.shape)} differs from the input's {list(x.shape)}")
    return x, y


@checked
def _check(node, graph):
    _plan(node, graph)
    return None


@register(ABS, NEG, ELU, LOG, check=_check, dtypes=("int8",), inputs=(1, 1), quantized_io=True,
          summary="internal: native int8 abs / neg / elu / log as tables (passes/quant.py native_int8)")
def lower_int8_unary(node, graph):
    x, y = _plan(node, graph)
    table = unary_table(_SRC[node.op], scale_zp(x), scale_zp(y))
    lut = graph.add_const(f"{y.name}#table", table)
    d = dict(NOUT=y.size, OP=7)
    binds = [("out_", words(graph, y.id)), ("a", words(graph, x.id)), ("lut", lut)]
    return [Kernel("int8_eltwise", binds, -(-y.size // 4), d, node.label())]


native_form(("ABS", ABS), ("NEG", NEG), ("ELU", ELU), ("LOG", LOG), check=_check)

declare_int8(ABS, NEG, ELU, LOG, templates=("int8_eltwise",), flops=lambda n, g: g.t(n.outputs[0]).size)
