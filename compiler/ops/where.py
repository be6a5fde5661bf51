"""WHERE with one input on the GPU (shaders/where_coords.comp), LiteRT's semantics (tensorflow/lite/
kernels/where.cc): the int64 [count, rank] coordinates of the nonzero elements of a bool / float32 /
int32 / uint32 / int8 / uint8 / int64 tensor, in row-major order (float: NaN counts as nonzero, -0
does not).  The count is known only per run: the bundle computes the output at its largest size
[N, rank] with the rows past the count set to -1 and records the "rows" length rule
(compiler/ops/output_lengths.py); run() returns the trimmed array, as LiteRT resizes it.  So the
output must be a model output no other op reads.  One workgroup runs a prefix count: fine for the
sizes this op meets in models.  (WHERE with three inputs is TF's select: LiteRT's kernel takes one.)
"""
from __future__ import annotations

from gpuc.compiler.codegen.kernel import Kernel
from gpuc.compiler.ops import NEUTRAL, SHAPE_ONLY, Why, declare, register, rules, template
from gpuc.compiler.ops.math import words
from gpuc.compiler.ops.output_lengths import declare_length
from gpuc.compiler.ops.util import checked, size

OP = "WHERE"
WG = 256
KIND = {"float32": 0, "int32": 1, "uint32": 1, "bool": 2, "int8": 2, "uint8": 2, "int64": 3}
VARIANTS = {
    "where_coords": (dict(N=10, R=2, WG=WG, STR=[5, 1]), {"KIND": [0, 1, 2, 3]}, ["out_", "x"],
                     {"out_": "uint32"}, lambda d: dict(local_x=WG)),
}


def _plan(node, graph):
    x, y = graph.t(node.inputs[0]), graph.t(node.outputs[0])
    if x.dtype not in KIND:
        raise ValueError(f"condition {x.name!r} is {x.dtype} (LiteRT takes {', '.join(KIND)})")
    if not x.shape:
        raise ValueError(f"condition {x.name!r} is a scalar: gpuc takes rank >= 1 (its [count, 0] output has "
                         "no row to mark)")
    return x, y, [size(x.shape), len(x.shape)]


def output_shapes(node, graph) -> list:
    return [_plan(node, graph)[2]]


def _check(node, graph):
    x, y, shape = _plan(node, graph)
    if y.dtype != "int64" or list(y.shape) != shape:
        return f"output {y.name!r} is {y.dtype} {list(y.shape)}, LiteRT makes it int64 (at most) {shape}"
    return declare_length(node, graph, [0], y.id, rule="rows", check_only=True)


@register(OP, check=checked(_check), dtypes=tuple(KIND), inputs=(1, 1), shapes=output_shapes,
          summary="coordinates of nonzero elements (one-workgroup prefix count); rows trimmed per run")
def lower_where(node, graph):
    x, y, (n, r) = _plan(node, graph)
    declare_length(node, graph, [0], y.id, rule="rows")
    if n == 0:
        return []
    strides = [size(x.shape[k + 1:]) for k in range(r)]
    return [Kernel("where_coords", [("out_", words(graph, y.id)), ("x", words(graph, x.id))], WG,
                   dict(N=n, R=r, WG=WG, KIND=KIND[x.dtype], STR=strides), node.label(), local_x=WG)]


def _shape(node, vals, graph, need=None):
    x, y, shape = _plan(node, graph)
    return [rules.placeholder(shape, "int64")]


# --- facts (compiler/ops/__init__.py FACT_FIELDS) ---------------------------------------------------
declare(OP, shape=_shape, exact=SHAPE_ONLY, sym_shape=Why("no dynamic-size rule: its row count is a value"),
        batch=Why("no batch rule: the coordinates of a batch count across items"),
        pieces=Why("computes values"), fp16=NEUTRAL, in_place=False, templates=("where_coords",),
        flops=lambda node, graph: graph.t(node.inputs[0]).size * 4,
        cpu=Why("no CPU kernel: the GPU runs every dtype LiteRT takes"))
template("where_coords", item_major=False, flat=False)
