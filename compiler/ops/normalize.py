"""LOG_SOFTMAX and L2_NORMALIZATION over the last axis (shaders/row_norm.comp), as LiteRT's float
kernels compute them: log_softmax = (x - max) - log(sum(exp(x - max))); l2 = x / max(|x|_2, 1e-6)
(LiteRT's epsilon: an all-zero row gives zeros).  LiteRT's L2_NORMALIZATION ignores no activation:
it rejects any but NONE, so gpuc reports the others unsupported."""
from __future__ import annotations

from gpuc.compiler.codegen.kernel import Kernel
from gpuc.compiler.ops import BOUNDED, SHAPE_ONLY, Why, declare, register, rules, template
from gpuc.compiler.ops.reduce import SUBGROUP_VARIANT
from gpuc.compiler.ops.util import checked, fused_act
from gpuc.compiler.sym_scope import hinted

L2_EPSILON = 1e-6
OPS = {"LOG_SOFTMAX": 0, "L2_NORMALIZATION": 1}

VARIANTS = {
    "row_norm": (dict(D=10, EPS=L2_EPSILON), {"OP": [0, 1], "ROW_PER_GROUP": [0, 1], "SUBGROUP": [0, 1]}, ["out_", "x"]),
}


@checked
def _check(node, graph):
    x, y = graph.t(node.inputs[0]), graph.t(node.outputs[0])
    if not x.shape or x.shape[-1] < 1:
        return "input must have a non-empty last axis"
    if tuple(x.shape) != tuple(y.shape):
        return f"output shape {list(y.shape)} differs from the input's {list(x.shape)}"
    if node.op == "L2_NORMALIZATION" and fused_act(node) != 0:
        return "fused activation not supported (LiteRT accepts only NONE)"
    return None


@register("L2_NORMALIZATION", check=_check, inputs=(1, 1), summary="last axis; LiteRT's epsilon 1e-6 (zero rows -> 0)")
@register("LOG_SOFTMAX", check=_check, inputs=(1, 1), summary="last axis")
def lower_row_norm(node, graph):
    x, y = graph.t(node.inputs[0]), graph.t(node.outputs[0])
    d = x.shape[-1]
    rows = x.size // d
    if rows == 0:
        return []
    with hinted():                                   # (speed only: a dynamic row length decides at its bound)
        wide = d >= 64                               # long rows: one workgroup per row
        local = 128 if d >= 512 else 64
    defines = dict(D=d, OP=OPS[node.op], EPS=L2_EPSILON, ROW_PER_GROUP=int(wide))
    k = Kernel("row_norm", [("out_", y.id), ("x", x.id)], rows * local if wide else rows, defines,
               node.label(), local_x=local if wide else 64)
    if wide:                                         # + subgroup-arithmetic reductions (ops/reduce.py)
        k.variants.append(SUBGROUP_VARIANT)
    return [k]


# --- facts (compiler/ops/__init__.py FACT_FIELDS) ---------------------------------------------------
declare("L2_NORMALIZATION", "LOG_SOFTMAX", shape=rules.same_shape, exact=SHAPE_ONLY, sym_shape="same",
        batch="softmax", pieces=Why("computes values"), fp16=BOUNDED, in_place=False, templates=("row_norm",),
        flops=rules.per_output, cpu=Why("no CPU kernel: the GPU runs every float one"))
template("row_norm", item_major=True, flat=False)
