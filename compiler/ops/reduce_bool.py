"""REDUCE_ALL / REDUCE_ANY of bool tensors on the GPU (shaders/reduce_bool.comp): any axes (constant),
keep_dims; an empty reduction gives LiteRT's identity (all: true, any: false)."""
from __future__ import annotations

import numpy as np

from gpuc.compiler.codegen.kernel import Kernel
from gpuc.compiler.ops import NEUTRAL, SHAPE_ONLY, Why, declare, register, rules, template
from gpuc.compiler.ops.math import words
from gpuc.compiler.ops.util import checked, const_input, norm_axis, size, strides

VARIANTS = {
    "reduce_bool": (dict(NK=1, K_SHAPE=[4], K_STRIDES=[1], NR=2, R_SHAPE=[2, 3], R_STRIDES=[12, 4], RCOUNT=6, N=4),
                    {"ANY": [0, 1]}, ["out_", "x"], {"out_": "uint32", "x": "uint32"}),
}


def _plan(node, graph):
    x, y = graph.t(node.inputs[0]), graph.t(node.outputs[0])
    if x.dtype != "bool" or y.dtype != "bool":
        raise ValueError(f"input {x.dtype} and output {y.dtype} must be bool")
    if x.size == 0:
        raise ValueError("empty input")
    axes = const_input(node, graph, 1, "reduction axes")
    if axes is None:
        raise ValueError("missing reduction axes input")
    axes = sorted({norm_axis(int(a), len(x.shape)) for a in np.asarray(axes).reshape(-1)})
    kept = [d for i, d in enumerate(x.shape) if i not in axes]
    if size(kept) != y.size:
        raise ValueError(f"output {list(y.shape)} does not match reducing {list(x.shape)} over {axes}")
    return x, y, axes


@register("REDUCE_ALL", "REDUCE_ANY", check=checked(lambda n, g: _plan(n, g) and None), dtypes=("bool",),
          inputs=(2, 2), summary="bool; any constant axes, keep_dims")
def lower_reduce_bool(node, graph):
    x, y, axes = _plan(node, graph)
    if y.size == 0:
        return []
    st = strides(x.shape)
    keep = [i for i in range(len(x.shape)) if i not in axes]
    d = dict(NK=max(len(keep), 1), K_SHAPE=[x.shape[i] for i in keep] or [1], K_STRIDES=[st[i] for i in keep] or [0],
             NR=max(len(axes), 1), R_SHAPE=[x.shape[i] for i in axes] or [1], R_STRIDES=[st[i] for i in axes] or [0],
             RCOUNT=size([x.shape[i] for i in axes]), ANY=int(node.op == "REDUCE_ANY"), N=y.size)
    return [Kernel("reduce_bool", [("out_", words(graph, y.id)), ("x", words(graph, x.id))], -(-y.size // 4), d,
                   node.label())]


# --- facts (compiler/ops/__init__.py FACT_FIELDS) ---------------------------------------------------
declare("REDUCE_ANY", shape=rules.reduce(np.any), cpu="REDUCE_ANY")
declare("REDUCE_ALL", shape=rules.reduce(np.all), cpu="REDUCE_ALL")
declare("REDUCE_ANY", "REDUCE_ALL", exact=SHAPE_ONLY, sym_shape=Why("no dynamic-size rule yet"),
        batch=("axis_input", 1, "axes", 0, True), pieces=Why("computes values"), fp16=NEUTRAL, in_place=False,
        templates=("reduce_bool",), flops=lambda node, graph: graph.t(node.inputs[0]).size)
template("reduce_bool", item_major=False, flat=False)
