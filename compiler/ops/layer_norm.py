"""LAYER_NORM: an internal op made by passes/layer_norm.py from a LayerNorm chain (MEAN, SUB /
SQUARED_DIFFERENCE, MEAN, ADD eps, RSQRT, MUL, ADD).  Inputs: x, gamma [D] or -1, beta [D] or -1;
attrs eps, norm_size D (the product of the normalized trailing axes).  One dispatch
(shaders/layer_norm.comp): one invocation per row of < 64 elements, else one workgroup per row."""
from __future__ import annotations

from gpuc.compiler.codegen.kernel import Kernel
from gpuc.compiler.ops import register
from gpuc.compiler.ops.reduce import SUBGROUP_VARIANT
from gpuc.compiler.ops.util import checked

VARIANTS = {
    "layer_norm": (dict(D=10, EPS=1e-5, ROWS=7, SEG=32), {"HAS_GAMMA": [0, 1], "HAS_BETA": [0, 1],
                                                         "ROW_PER_GROUP": [0, 1, 2], "SUBGROUP": [0, 1]},
                   ["out_", "x", "gamma", "beta"], {}, lambda d: dict(local_x=128 if d["ROW_PER_GROUP"] == 2 else 64)),
}


# rows of 64..SEG_ROWS_BELOW-1 elements: SEG invocations each (a workgroup per row of 64 or 128 left most
# of them idle on rows of a few hundred elements)
SEG, SEG_LOCAL, SEG_ROWS_BELOW = 32, 128, 2048


@checked
def _check(node, graph):
    x, y = graph.t(node.inputs[0]), graph.t(node.outputs[0])
    d = int(node.attrs["norm_size"])
    if d < 1 or x.size % d or x.size != y.size:
        return f"cannot normalize {list(x.shape)} -> {list(y.shape)} over rows of {d}"
    for i in node.inputs[1:]:
        if i >= 0 and (not graph.t(i).is_const or graph.t(i).size != d):
            return f"gamma / beta must be constants of {d} elements"
    return None


@register("LAYER_NORM", check=_check, inputs=(3, 3), optional=(1, 2),
          summary="internal: a fused LayerNorm over the trailing axes (passes/layer_norm.py)")
def lower_layer_norm(node, graph):
    x, y = graph.t(node.inputs[0]), graph.t(node.outputs[0])
    d = int(node.attrs["norm_size"])
    rows = x.size // d
    if rows == 0:
        return []
    g, b = node.inputs[1], node.inputs[2]
    binds = [("out_", y.id), ("x", x.id)] + ([("gamma", g)] if g >= 0 else []) + ([("beta", b)] if b >= 0 else [])
    defines = dict(D=d, EPS=float(node.attrs["eps"]), HAS_GAMMA=int(g >= 0), HAS_BETA=int(b >= 0))
    if d < 64:                        # one invocation per row
        return [Kernel("layer_norm", binds, rows, dict(defines, ROW_PER_GROUP=0), node.label(), flops=8 * x.size)]
    if d < SEG_ROWS_BELOW:            # SEG invocations per row, SEG_LOCAL / SEG rows per workgroup
        per = SEG_LOCAL // SEG
        k = Kernel("layer_norm", binds, -(-rows // per) * SEG_LOCAL, dict(defines, ROW_PER_GROUP=2, ROWS=rows, SEG=SEG),
                   node.label(), local_x=SEG_LOCAL, flops=8 * x.size)
    else:                             # a workgroup per row
        k = Kernel("layer_norm", binds, rows * 256, dict(defines, ROW_PER_GROUP=1), node.label(), local_x=256,
                   flops=8 * x.size)
    k.variants.append(SUBGROUP_VARIANT)
    return [k]
