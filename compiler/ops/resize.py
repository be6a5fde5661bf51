"""RESIZE_BILINEAR and RESIZE_NEAREST_NEIGHBOR (NHWC, constant size), through shaders/resize.comp.

Coordinate math follows TFLite's float kernels exactly (reference_ops::ResizeBilinear /
GetNearestNeighbor): the scale is a float32 division done here, at compile time, so the shader sees
the very same float the CPU kernel computes; the shader's coordinate arithmetic is `precise`
(no fused multiply-add), so floor/round land on the same source pixels.

  scale = in / out, or (in - 1) / (out - 1) with align_corners and out > 1
  bilinear: v = half_pixel ? (o + 0.5) * scale - 0.5 : o * scale;
            lo = max(floor(v), 0), hi = min(ceil(v), in - 1), weights 1 - (v - lo) and v - lo
  nearest:  v = (o + (half_pixel ? 0.5 : 0)) * scale;
            i = min(align_corners ? round_half_away(v) : floor(v), in - 1), then max(i, 0) with half_pixel

LiteRT rejects RESIZE_BILINEAR with both align_corners and half_pixel_centers (we report it
unsupported too); RESIZE_NEAREST_NEIGHBOR accepts every combination.
"""
from __future__ import annotations

import numpy as np

from gpuc.compiler.codegen.kernel import Kernel
from gpuc.compiler.ops import NEUTRAL, SHAPE_ONLY, Why, declare, register, rules, template
from gpuc.compiler.ops.util import checked, const_input, size

_GEO = dict(N=1, H=3, W=4, C=2, OH=5, OW=7, SCALE_Y=0.6, SCALE_X=0.571428597)
VARIANTS = {
    "resize": (_GEO, {"NEAREST": [0, 1], "HALF_PIXEL": [0, 1], "ALIGN_CORNERS": [0, 1]}, ["out_", "x"]),
}


def _scale(n_in: int, n_out: int, align_corners: bool) -> float:
    if align_corners and n_out > 1:
        return float(np.float32(n_in - 1) / np.float32(n_out - 1))
    return float(np.float32(n_in) / np.float32(n_out))


def _geometry(node, graph):
    x, y = graph.t(node.inputs[0]), graph.t(node.outputs[0])
    if len(node.inputs) < 2 or node.inputs[1] < 0:
        raise ValueError("missing size input")
    sz = const_input(node, graph, 1, "size")
    if sz.dtype != np.int32 or sz.size != 2:
        raise ValueError(f"size must be an int32 [2] constant (got {sz.dtype} {list(sz.shape)})")
    if len(x.shape) != 4 or len(y.shape) != 4:
        raise ValueError(f"input and output must be 4-D NHWC (got {list(x.shape)} -> {list(y.shape)})")
    oh, ow = (int(v) for v in sz.reshape(-1))
    n, h, w, c = x.shape
    if oh < 1 or ow < 1:
        raise ValueError(f"size {[oh, ow]} must be positive")
    if list(y.shape) != [n, oh, ow, c]:
        raise ValueError(f"output {list(y.shape)} does not match input {list(x.shape)} resized to {[oh, ow]}")
    ac = bool(node.attrs.get("align_corners", False))
    hp = bool(node.attrs.get("half_pixel_centers", False))
    if ac and hp and node.op == "RESIZE_BILINEAR":
        raise ValueError("align_corners and half_pixel_centers together are not allowed (LiteRT rejects it)")
    return dict(N=n, H=h, W=w, C=c, OH=oh, OW=ow, SCALE_Y=_scale(h, oh, ac), SCALE_X=_scale(w, ow, ac),
                NEAREST=int(node.op == "RESIZE_NEAREST_NEIGHBOR"), HALF_PIXEL=int(hp), ALIGN_CORNERS=int(ac))


@checked
def _check(node, graph):
    _geometry(node, graph)
    return None


@register("RESIZE_BILINEAR", "RESIZE_NEAREST_NEIGHBOR", check=_check, inputs=(2, 2),
          summary="NHWC, constant size, align_corners / half_pixel_centers")
def lower_resize(node, graph):
    defines = _geometry(node, graph)
    y = graph.t(node.outputs[0])
    return [Kernel("resize", [("out_", y.id), ("x", node.inputs[0])], size(y.shape), defines, node.label())]


# --- facts (compiler/ops/__init__.py FACT_FIELDS) ---------------------------------------------------
declare("RESIZE_BILINEAR", "RESIZE_NEAREST_NEIGHBOR", shape=Why("no shape rule yet: its size input is the model's"),
        exact=SHAPE_ONLY, sym_shape=Why("no dynamic-size rule yet"), batch="merge", pieces=Why("computes values"),
        fp16=NEUTRAL, in_place=False, templates=("resize",), flops=rules.per_output,
        cpu=Why("no CPU kernel: the GPU runs every float resize"))
template("resize", item_major=True, flat=True)
