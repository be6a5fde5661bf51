"""Reductions (MEAN SUM REDUCE_MAX REDUCE_MIN REDUCE_PROD) and SOFTMAX."""
from __future__ import annotations

import numpy as np

from gpuc.compiler.codegen.kernel import Kernel
from gpuc.compiler.ops import register
from gpuc.compiler.ops.util import checked, const_input, norm_axis, size, strides

REDUCE = {"MEAN": 0, "SUM": 1, "REDUCE_MAX": 2, "REDUCE_MIN": 3, "REDUCE_PROD": 4}


def _axes(node, graph):
    x = graph.t(node.inputs[0])
    axes = const_input(node, graph, 1, "reduction axes")
    if axes is None:
        raise ValueError("missing reduction axes input")
    return sorted({norm_axis(int(a), len(x.shape)) for a in np.asarray(axes).reshape(-1)})


@checked
def _check_reduce(node, graph):
    x, y = graph.t(node.inputs[0]), graph.t(node.outputs[0])
    axes = _axes(node, graph)
    kept = [d for i, d in enumerate(x.shape) if i not in axes]
    if size(kept) != y.size:
        return f"output {list(y.shape)} does not match reducing {list(x.shape)} over {axes}"
    if x.size == 0:
        return "empty input"
    return None


@register(*REDUCE, check=_check_reduce, inputs=(2, 2), summary="any axes, keep_dims")
def lower_reduce(node, graph):
    x, y = graph.t(node.inputs[0]), graph.t(node.outputs[0])
    axes = _axes(node, graph)
    st = strides(x.shape)
    keep = [i for i in range(len(x.shape)) if i not in axes]
    defines = dict(OP=REDUCE[node.op],
                   NK=len(keep), K_SHAPE=[x.shape[i] for i in keep] or [1], K_STRIDES=[st[i] for i in keep] or [0],
                   NR=len(axes), R_SHAPE=[x.shape[i] for i in axes] or [1], R_STRIDES=[st[i] for i in axes] or [0],
                   RCOUNT=size([x.shape[i] for i in axes]))
    return [Kernel("reduce", [("out_", y.id), ("x", x.id)], y.size, defines, node.label())]


@checked
def _check_softmax(node, graph):
    x = graph.t(node.inputs[0])
    if not x.shape or x.shape[-1] < 1:
        return "input must have a non-empty last axis"
    return None


@register("SOFTMAX", check=_check_softmax, inputs=(1, 1), summary="last axis, beta")
def lower_softmax(node, graph):
    x, y = graph.t(node.inputs[0]), graph.t(node.outputs[0])
    d = x.shape[-1]
    rows = x.size // d
    wide = d >= 64                                   # long rows: one workgroup per row
    local = 128 if d >= 512 else 64
    defines = dict(D=d, BETA=float(node.attrs.get("beta", 1.0)), ROW_PER_GROUP=int(wide))
    return [Kernel("softmax", [("out_", y.id), ("x", x.id)], rows * local if wide else rows, defines,
                   node.label(), local_x=local if wide else 64)]
