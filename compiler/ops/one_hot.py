"""ONE_HOT (shaders/one_hot.comp): indices -> `on_value` where an index equals its position along the
new `axis` (of size `depth`), `off_value` elsewhere, as LiteRT's one_hot.cc (indices out of [0, depth)
give a row of `off_value`).  The GPU takes int32 indices and float32 / int32 values; the CPU
(runtime/cpu_ops.py) runs the other dtypes LiteRT takes (int64 indices; int64, bool, 8/16-bit values)."""
from __future__ import annotations

from gpuc.compiler.codegen.kernel import Kernel
from gpuc.compiler.ops import NEUTRAL, SHAPE_ONLY, Why, declare, register, rules, template
from gpuc.compiler.ops.util import checked, const_input, size

VARIANTS = {
    "one_hot": (dict(DEPTH=4, INNER=3), {}, ["out_", "idx", "on", "off"], {"idx": "int32"}),
    "one_hot:int32": (dict(DEPTH=4, INNER=3), {}, ["out_", "idx", "on", "off"],
                      {"idx": "int32", "out_": "int32", "on": "int32", "off": "int32"}),
}


def _plan(node, graph):
    """(depth, inner): the new axis' size and the index elements after it; ValueError where LiteRT
    fails or the GPU kernel does not take the node."""
    idx, y = graph.t(node.inputs[0]), graph.t(node.outputs[0])
    if idx.dtype != "int32":
        raise ValueError(f"indices {idx.name!r} are {idx.dtype} (the GPU kernel takes int32)")
    depth = const_input(node, graph, 1, "depth")
    if depth is None or depth.size != 1:
        raise ValueError("depth must be one constant value")
    depth = int(depth.reshape(-1)[0])
    if depth < 0:
        raise ValueError(f"depth {depth} is negative (LiteRT requires depth >= 0)")
    for k, what in ((2, "on_value"), (3, "off_value")):
        v = graph.t(node.inputs[k])
        if v.dtype != y.dtype or size(list(v.shape)) != 1:
            raise ValueError(f"{what} {v.name!r} must be one {y.dtype} value (got {v.dtype} {list(v.shape)})")
    rank = len(idx.shape) + 1
    axis = int(node.attrs.get("axis", -1))
    axis = rank - 1 if axis == -1 else axis
    if not 0 <= axis < rank:
        raise ValueError(f"axis {node.attrs.get('axis')} is outside [0, {rank}) (or -1) as LiteRT requires")
    out = list(idx.shape[:axis]) + [depth] + list(idx.shape[axis:])
    if list(y.shape) != out:
        raise ValueError(f"output shape {list(y.shape)} differs from LiteRT's {out}")
    return depth, size(list(idx.shape[axis:]))


@register("ONE_HOT", check=checked(lambda n, g: _plan(n, g) and None), dtypes=("float32", "int32"), inputs=(4, 4),
          summary="int32 indices, float32 / int32 values, any axis; constant depth")
def lower_one_hot(node, graph):
    depth, inner = _plan(node, graph)
    y = graph.t(node.outputs[0])
    if y.size == 0:
        return []
    binds = [("out_", y.id), ("idx", node.inputs[0]), ("on", node.inputs[2]), ("off", node.inputs[3])]
    return [Kernel("one_hot", binds, y.size, dict(DEPTH=depth, INNER=max(inner, 1)), node.label())]


# --- facts (compiler/ops/__init__.py FACT_FIELDS) ---------------------------------------------------
declare("ONE_HOT", templates=("one_hot",), shape=Why("no shape rule yet (the model's output shape is kept)"),
        exact=SHAPE_ONLY, sym_shape=Why("no dynamic-size rule yet"),
        batch=Why("no batch rule yet: axis 0 may be the one-hot axis; a --max-batch program replicates it per item"),
        pieces=Why("computes values"), fp16=NEUTRAL, in_place=False, flops=rules.per_output, cpu="ONE_HOT")
template("one_hot", item_major=False, flat=True)
