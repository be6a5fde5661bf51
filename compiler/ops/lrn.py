"""LOCAL_RESPONSE_NORMALIZATION (shaders/lrn.comp): across the channels of a 4-D float32 input,
x * (bias + alpha * the sum of the squares within `radius` channels) ^ -beta, as LiteRT's kernel."""
from __future__ import annotations

from gpuc.compiler.codegen.kernel import Kernel
from gpuc.compiler.ops import SHAPE_ONLY, UNSAFE, Why, declare, register, rules, template
from gpuc.compiler.ops.util import checked

VARIANTS = {"lrn": (dict(C=7, R=2, BIAS=1.0, ALPHA=0.5, BETA=0.75), {}, ["out_", "x"])}


def _plan(node, graph):
    x, y = graph.t(node.inputs[0]), graph.t(node.outputs[0])
    if len(x.shape) != 4:
        raise ValueError(f"input {list(x.shape)} must be 4-D (LiteRT's kernel takes 4-D only)")
    if tuple(y.shape) != tuple(x.shape):
        raise ValueError(f"output {list(y.shape)} differs from the input {list(x.shape)}")
    a = node.attrs
    r = int(a.get("radius", 0))
    if r < 0:
        raise ValueError(f"radius {r} must be >= 0")
    return dict(C=int(x.shape[-1]), R=r, BIAS=float(a.get("bias", 0.0)), ALPHA=float(a.get("alpha", 0.0)),
                BETA=float(a.get("beta", 0.0)))


@register("LOCAL_RESPONSE_NORMALIZATION", check=checked(lambda n, g: _plan(n, g) and None), inputs=(1, 1),
          summary="across channels, 4-D float32, any radius / bias / alpha / beta")
def lower_lrn(node, graph):
    d = _plan(node, graph)
    n = graph.t(node.outputs[0]).size
    return [Kernel("lrn", [("out_", node.outputs[0]), ("x", node.inputs[0])], n, d, node.label())] if n else []


def _flops(node, graph):
    return graph.t(node.outputs[0]).size * (3 * (2 * int(node.attrs.get("radius", 0)) + 1) + 4)


declare("LOCAL_RESPONSE_NORMALIZATION", shape=rules.same_shape, exact=SHAPE_ONLY, sym_shape="same", batch="merge",
        pieces=Why("computes values"), fp16=UNSAFE, in_place=False, templates=("lrn",),
        flops=_flops, cpu=Why("no CPU kernel: the GPU runs every float LRN"))
template("lrn", item_major=True, flat=True)
