"""compose_transposes: a TRANSPOSE of a TRANSPOSE reads the first one's input with the composed
permutation, and where that permutation is the identity it is a view (a RESHAPE, made free by
reshape_as_view).  Converters from NCHW frameworks write NHWC -> NCHW -> NHWC pairs around layout-
agnostic ops (EfficientFormerV2: conv, transpose to NCHW, transpose back, depthwise conv); the first
TRANSPOSE disappears once nothing else reads it.
"""
from __future__ import annotations

import numpy as np

from gpuc.compiler.ir import Graph, Node


def _perm(graph: Graph, node: Node):
    if node.op != "TRANSPOSE" or len(node.inputs) != 2 or len(node.outputs) != 1 or min(node.inputs) < 0:
        return None
    p = graph.t(node.inputs[1])
    if not p.is_const:
        return None
    perm = [int(v) for v in np.asarray(p.data).reshape(-1)]
    rank = len(graph.t(node.inputs[0]).shape)
    if sorted(v % max(rank, 1) for v in perm) != list(range(rank)):
        return None                       # malformed: the TRANSPOSE's own check reports it
    return [v % max(rank, 1) for v in perm]


def compose_transposes(graph: Graph) -> None:
    changed = True
    while changed:
        changed = False
        prod = graph.producers()
        for node in list(graph.nodes):
            p2 = _perm(graph, node)
            first = prod.get(node.inputs[0]) if p2 is not None else None
            p1 = _perm(graph, first) if first is not None else None
            if p1 is None or len(p1) != len(p2):
                continue
            x, y = graph.t(first.inputs[0]), graph.t(node.outputs[0])
            if x.dtype != y.dtype or x.quant is not None or y.quant is not None or x.fake_quant or y.fake_quant:
                continue
            perm = [p1[v] for v in p2]
            if perm == list(range(len(perm))):
                shape = graph.add_const(f"{y.name}/shape", np.asarray(y.shape, np.int32))
                node.op, node.inputs, node.attrs = "RESHAPE", [first.inputs[0], shape], {"new_shape": list(y.shape)}
            else:
                node.inputs = [first.inputs[0], graph.add_const(f"{y.name}/perm", np.asarray(perm, np.int32))]
            if not any(first.outputs[0] in n.inputs for n in graph.nodes) and first.outputs[0] not in graph.outputs:
                graph.nodes.remove(first)
            changed = True
            break
