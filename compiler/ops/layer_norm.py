"""LAYER_NORM: an internal op made by passes/layer_norm.py from a LayerNorm chain (MEAN, SUB /
SQUARED_DIFFERENCE, MEAN, ADD eps, RSQRT, MUL, ADD).  Inputs: x, gamma [D] or -1, beta [D] or -1;
attrs eps, norm_size D (the product of the normalized trailing axes).  One dispatch
(shaders/layer_norm.comp): one invocation per row of < 64 elements, else one workgroup per row."""
from __future__ import annotations

from gpuc.compiler.codegen.kernel import Kernel
from gpuc.compiler.ops import NEUTRAL, Why, declare, register, rules, template
from gpuc.compiler.ops.reduce import SUBGROUP_VARIANT
from gpuc.compiler.ops.util import checked
from gpuc.compiler.sym_scope import hinted

VARIANTS = {
    "layer_norm": (dict(D=10, EPS=1e-5, ROWS=7, SEG=32), {"HAS_GAMMA": [0, 1], "HAS_BETA": [0, 1],
                                                         "ROW_PER_GROUP": [0, 1, 2], "SUBGROUP": [0, 1],
                                                         "SEG_PER": [0, 1]},
                   ["out_", "x", "gamma", "beta"], {}, lambda d: dict(local_x=128 if d["ROW_PER_GROUP"] == 2 else 64)),
}


# rows of 64..SEG_ROWS_BELOW-1 elements, SEG_MIN_ROWS of them or more: SEG invocations each, 4 rows per
# workgroup.  H100, b32 (100352..6272 rows of 96..768): a windowed-attention transformer's 29 LayerNorms
# 638 -> 439 us, a 7x7-depthwise CNN's 23 594 -> 376 us; at batch 1 (3136 rows and fewer) a 64-wide workgroup
# per row stayed faster (the transformer's 118 us against 139)
SEG, SEG_LOCAL, SEG_ROWS_BELOW, SEG_MIN_ROWS = 32, 128, 2048, 4096
SEG_MAX_PER = 32            # rows of up to SEG * SEG_MAX_PER elements are read once, into registers


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
    with hinted():                    # (speed only: a dynamic row count decides at its bound)
        many = rows >= SEG_MIN_ROWS
    if d < SEG_ROWS_BELOW and many:   # SEG invocations per row, SEG_LOCAL / SEG rows per workgroup
        per = SEG_LOCAL // SEG
        each = -(-d // SEG)                                          # elements of a row per invocation
        cached = each if each <= SEG_MAX_PER else 0                   # ... held in registers
        k = Kernel("layer_norm", binds, -(-rows // per) * SEG_LOCAL,
                   dict(defines, ROW_PER_GROUP=2, ROWS=rows, SEG=SEG, SEG_PER=cached),
                   node.label(), local_x=SEG_LOCAL, flops=8 * x.size)
    else:                             # a workgroup per row
        local = 256 if d >= 2048 else 128 if d >= 512 else 64
        k = Kernel("layer_norm", binds, rows * local, dict(defines, ROW_PER_GROUP=1), node.label(), local_x=local,
                   flops=8 * x.size)
    k.variants.append(SUBGROUP_VARIANT)
    return [k]


# --- facts (compiler/ops/__init__.py FACT_FIELDS) ---------------------------------------------------
declare("LAYER_NORM", shape=Why("an internal op fuse_layer_norm makes after shapes are propagated"),
        exact=Why("an internal op"), sym_shape="same", batch=Why("made after batching (fuse_layer_norm)"),
        pieces=Why("computes values"), fp16=NEUTRAL, in_place=False, templates=("layer_norm",),
        flops=rules.per_output, cpu=Why("internal op: no CPU kernel (the unfused ops have theirs)"))
template("layer_norm", item_major=True, flat=False)
