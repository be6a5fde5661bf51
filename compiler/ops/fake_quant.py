"""FAKE_QUANT (shaders/fake_quant.comp): float32 values rounded to the grid of `num_bits` over the
range [min, max] nudged so that 0 is on the grid, as LiteRT's reference kernel (TensorFlow's
FakeQuantWithMinMaxArgs).  narrow_range is refused, as LiteRT's Prepare refuses it."""
from __future__ import annotations

import numpy as np

from gpuc.compiler.codegen.kernel import Kernel
from gpuc.compiler.ops import BOUNDED, SHAPE_ONLY, Why, declare, register, rules, template
from gpuc.compiler.ops.util import checked

VARIANTS = {"fake_quant": (dict(NMIN=-1.0, NMAX=1.0, SCALE=2.0 / 255, INV=127.5), {}, ["out_", "x"])}


def nudged(lo: float, hi: float, bits: int) -> tuple:
    """(nudged min, nudged max, scale, 1 / scale), in float32 steps as LiteRT's NudgeQuantizationRange."""
    f = np.float32
    qmin, qmax = f(0), f((1 << bits) - 1)
    lo, hi = f(lo), f(hi)
    with np.errstate(all="ignore"):
        scale = f((hi - lo) / (qmax - qmin))
        zp_from_min = f(qmin - f(lo / scale))
        if zp_from_min < qmin:
            zp = 0
        elif zp_from_min > qmax:
            zp = int(qmax)
        else:
            zp = int(np.sign(zp_from_min) * np.floor(np.abs(zp_from_min) + 0.5)) & 0xFFFF   # (uint16_t)
        nmin, nmax = f(f(qmin - f(zp)) * scale), f(f(qmax - f(zp)) * scale)
        inv = f(f(1.0) / scale)
    return nmin, nmax, scale, inv


def _plan(node, graph):
    a = node.attrs
    if a.get("narrow_range"):
        raise ValueError("narrow_range: LiteRT's kernel refuses it at run time")
    bits = int(a.get("num_bits", 0))
    if not 2 <= bits <= 16:
        raise ValueError(f"num_bits {bits} outside [2, 16]")
    lo, hi = float(a.get("min", 0.0)), float(a.get("max", 0.0))
    if not lo < hi:
        raise ValueError(f"min {lo} must be below max {hi}")
    x, y = graph.t(node.inputs[0]), graph.t(node.outputs[0])
    if tuple(y.shape) != tuple(x.shape):
        raise ValueError(f"output {list(y.shape)} differs from the input {list(x.shape)}")
    nmin, nmax, scale, inv = nudged(lo, hi, bits)
    return dict(NMIN=float(nmin), NMAX=float(nmax), SCALE=float(scale), INV=float(inv))


@register("FAKE_QUANT", check=checked(lambda n, g: _plan(n, g) and None), inputs=(1, 1),
          summary="float32, num_bits 2..16, LiteRT's nudged range (narrow_range refused as LiteRT does)")
def lower_fake_quant(node, graph):
    d = _plan(node, graph)
    n = graph.t(node.outputs[0]).size
    return [Kernel("fake_quant", [("out_", node.outputs[0]), ("x", node.inputs[0])], n, d, node.label())] if n else []


declare("FAKE_QUANT", shape=rules.same_shape, exact=SHAPE_ONLY, sym_shape="same", batch="unary",
        pieces=Why("computes values"), fp16=BOUNDED, in_place=True, templates=("fake_quant",),
        flops=rules.per_output, cpu=Why("no CPU kernel: the GPU runs every FAKE_QUANT LiteRT does"))
template("fake_quant", item_major=True, flat=True, in_place=None)
