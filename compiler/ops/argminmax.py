"""ARG_MAX / ARG_MIN (shaders/arg_reduce.comp): any axis (constant, negative allowed), float32, int32,
uint8, int8 or bool input (1-byte kinds read from a word view), int32 or int64 output (int64 written as (low, high) int32 pairs through an int32 view).
Ties resolve to the first index and NaNs are skipped, as in LiteRT (whose answer for a NaN in the
first position depends on its vector path; gpuc skips that one too).  Long axes (>= 256) with few outputs
reduce with one workgroup per output; axes longer than SPLIT_CHUNK (an LLM's vocabulary: 151,936 logits
in one row) split each line over workgroups of SPLIT_CHUNK elements, each writing its (value, index)
pair, and a second small pass combines them (ties: the first index, as the parts are in index order)."""
from __future__ import annotations

from gpuc.compiler.codegen.kernel import Kernel
from gpuc.compiler.ops import BOUNDED, Why, declare, register, rules, template
from gpuc.compiler.ops.math import words
from gpuc.compiler.ops.util import checked, scalar_axis, size

SPLIT_CHUNK = 4096              # elements a workgroup scans when a long line is split (16 per invocation)
SPLIT_MAX_GROUPS = 1 << 16     # split only while outputs x parts stays a modest grid
IN_KIND = {"float32": 0, "int32": 1, "uint8": 2, "bool": 2, "int8": 3}     # the template's IS_INT

VARIANTS = {
    "arg_reduce": (dict(AXIS=5, INNER=3, CHUNK=4, PARTS=2), {"IS_MIN": [0, 1], "IS_INT": [0, 1, 2, 3],
                                                             "OUT64": [0, 1], "ROW_PER_GROUP": [0, 1, 2, 3]},
                   ["out_", "x"], {"out_": "int32"}),
}


def _plan(node, graph):
    x, y = graph.t(node.inputs[0]), graph.t(node.outputs[0])
    if x.dtype not in IN_KIND:
        raise ValueError(f"input {x.name!r} has dtype {x.dtype} (supported: {', '.join(IN_KIND)})")
    if y.dtype not in ("int32", "int64"):
        raise ValueError(f"output {y.name!r} has dtype {y.dtype} (supported: int32, int64)")
    axis = scalar_axis(node, graph, 1, x)
    want = list(x.shape[:axis]) + list(x.shape[axis + 1:])
    if list(y.shape) != want:
        raise ValueError(f"output {y.name!r} has shape {list(y.shape)}, expected {want}")
    if x.shape[axis] < 1:
        raise ValueError("reduced axis is empty")
    return x, y, axis


@register("ARG_MAX", "ARG_MIN", check=checked(lambda n, g: _plan(n, g) and None), inputs=(2, 2),
          dtypes=("float32", "int32", "int64", "uint8", "int8", "bool"),
          summary="any axis; float32/int32/uint8/int8/bool input, int32/int64 output; ties -> first index")
def lower_arg(node, graph):
    x, y, axis = _plan(node, graph)
    if y.size == 0:
        return []
    out = y.id
    if y.dtype == "int64":
        out = graph.add_tensor(f"{y.name}/int32_pairs", [2 * y.size], "int32")
        graph.aliases[out] = y.id
    n = x.shape[axis]
    wide = n >= 256 and y.size <= 65536               # long axis, few outputs: a workgroup per output
    local = 256 if n >= 4096 else 128 if n >= 1024 else 64
    defines = dict(AXIS=n, INNER=max(size(x.shape[axis + 1:]), 1), IS_MIN=int(node.op == "ARG_MIN"),
                   IS_INT=IN_KIND[x.dtype], OUT64=int(y.dtype == "int64"), ROW_PER_GROUP=int(wide), CHUNK=n, PARTS=1)
    binds = [("out_", out), ("x", words(graph, x.id))]
    parts = -(-n // SPLIT_CHUNK)
    if wide and parts > 1 and y.size * parts <= SPLIT_MAX_GROUPS:   # split the line over workgroups, then combine
        pairs = graph.add_tensor(f"{y.name}/arg_parts", [2 * y.size * parts], "int32")
        split = dict(defines, ROW_PER_GROUP=2, CHUNK=SPLIT_CHUNK, PARTS=parts)
        return [Kernel("arg_reduce", [("out_", pairs), binds[1]], y.size * parts * local, split,
                       f"{node.label()} (split in {parts})", local_x=local),
                Kernel("arg_reduce", [("out_", out), ("x", pairs)], y.size * 64, dict(split, ROW_PER_GROUP=3),
                       f"{node.label()} (combine)", local_x=64)]
    return [Kernel("arg_reduce", binds, y.size * local if wide else y.size, defines, node.label(),
                   local_x=local if wide else 64)]


# --- facts (compiler/ops/__init__.py FACT_FIELDS) ---------------------------------------------------
declare("ARG_MAX", "ARG_MIN", shape=Why("no host rule yet (the model's output shape is kept)"),
        exact=Why("no host rule"), sym_shape=Why("no dynamic-size rule yet"), batch=("axis_input", 1, "axis"),
        pieces=Why("computes values"), fp16=BOUNDED, in_place=False, templates=("arg_reduce",), flops=rules.per_output)
declare("ARG_MAX", cpu="ARG_MAX")
declare("ARG_MIN", cpu="ARG_MIN")
template("arg_reduce", item_major=False, flat=False)
