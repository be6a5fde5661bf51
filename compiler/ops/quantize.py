"""QUANTIZE / DEQUANTIZE at run time (shaders/quantize.comp, shaders/unary_math.comp).

After passes/quant.py simulate_quantization, quantized activations are float32 tensors carrying a
fake-quant grid, so inside the model:

* DEQUANTIZE (int8/uint8 activation -> float) is a float copy;
* QUANTIZE (float -> int8/uint8, or requantize int8 -> int8) is a float copy whose output is rounded
  to the output's grid (the FQ epilogue lower_graph adds for fake-quantized outputs).

At the model's boundary, int8/uint8 tensors stay real bytes (4 per 32-bit word):
* DEQUANTIZE int8/uint8 graph input -> float32: v = q * scale - zp * scale (LiteRT's builtin kernel);
* QUANTIZE float32 -> int8/uint8 graph output: q = clamp(round_half_even(v * (1 / scale)) + zp, qmin, qmax)
  (LiteRT's builtin kernel; the fake-quant epilogues inside a float program round half away instead).
Per-tensor quantization only.
"""
from __future__ import annotations

import numpy as np

from gpuc.compiler.codegen.kernel import Kernel
from gpuc.compiler.ops import NEUTRAL, SHAPE_ONLY, Why, declare, int8_common, register, rules, template
from gpuc.compiler.ops.math import KIND, words
from gpuc.compiler.ops.util import checked, size

QRANGE = {"int8": (-128, 127), "uint8": (0, 255)}


def _per_tensor(t):
    return t.quant is not None and t.quant.scale.size == 1 and float(t.quant.scale[0]) > 0


@checked
def _check(node, graph):
    x, y = graph.t(node.inputs[0]), graph.t(node.outputs[0])
    if x.size != y.size:
        return f"input has {x.size} elements, output {y.size}"
    if x.dtype == "float32" and y.dtype == "float32":
        return None
    if node.op == "DEQUANTIZE" and x.dtype in QRANGE and y.dtype == "float32":
        return None if _per_tensor(x) else f"input {x.name!r} needs per-tensor quantization parameters"
    if node.op == "QUANTIZE" and x.dtype == "float32" and y.dtype in QRANGE:
        return None if _per_tensor(y) else f"output {y.name!r} needs per-tensor quantization parameters"
    return f"{x.dtype} -> {y.dtype} not supported"


@register("QUANTIZE", "DEQUANTIZE", check=_check, dtypes=("float32", "int8", "uint8"), inputs=(1, 1), quantized_io=True,
          summary="per-tensor int8/uint8 <-> float32 (quantized models run as float with simulated quantization)")
def lower_quantize(node, graph):
    x, y = graph.t(node.inputs[0]), graph.t(node.outputs[0])
    if x.dtype == "float32" and y.dtype == "float32":
        # a copy; lower_graph rounds it to y's grid when y is fake-quantized
        return [Kernel("unary_math", [("out_", y.id), ("x", x.id)], size(y.shape), {}, node.label())]
    q = x if node.op == "DEQUANTIZE" else y
    lo, hi = QRANGE[q.dtype]
    defines = dict(TO_BYTES=int(node.op == "QUANTIZE"), KIND=KIND[q.dtype], N=y.size,
                   Q_SCALE=float(q.quant.scale[0]), Q_INV=float(np.float32(1.0) / np.float32(q.quant.scale[0])), Q_ZP=int(q.quant.zero_point[0]) if q.quant.zero_point.size else 0,
                   Q_MIN=lo, Q_MAX=hi)
    binds = [("out_", words(graph, y.id)), ("x", words(graph, x.id))]
    n = -(-y.size // 4) if node.op == "QUANTIZE" else y.size
    return [Kernel("quantize", binds, n, defines, node.label())]


def _native_boundary(node, graph):
    """Native int8 programs (passes/quant.py native_int8) keep QUANTIZE float -> int8 and DEQUANTIZE
    int8 -> float as they are: the int8 side is real bytes there too."""
    reason = _check(node, graph)
    if reason is not None:
        return reason
    x, y = graph.t(node.inputs[0]), graph.t(node.outputs[0])
    if (x.dtype, y.dtype) in (("float32", "int8"), ("int8", "float32")):
        return None
    return f"{x.dtype} -> {y.dtype} has no int8 kernel"


int8_common.BOUNDARY["QUANTIZE"] = int8_common.BOUNDARY["DEQUANTIZE"] = _native_boundary

VARIANTS = {
    "quantize": (dict(N=22, Q_SCALE=0.05, Q_INV=20.0, Q_ZP=-3, Q_MIN=-128, Q_MAX=127), {"TO_BYTES": [0, 1], "KIND": [3, 4]},
                 ["out_", "x"], {"out_": "uint32", "x": "uint32"}),
}


# --- facts (compiler/ops/__init__.py FACT_FIELDS) ---------------------------------------------------
declare("QUANTIZE", "DEQUANTIZE", shape=rules.same_shape, exact=SHAPE_ONLY, sym_shape="same", batch="unary",
        pieces=Why("computes values"), fp16=NEUTRAL, in_place=False, templates=("quantize", "unary_math"),
        flops=rules.per_output, cpu=Why("no CPU kernel: quantized programs run as float with simulated quantization"))
template("quantize", item_major=True, flat=True)
