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
                view = graph.reshape_node(first.inputs[0], node.outputs[0], y.shape)
                node.op, node.inputs, node.attrs = view.op, view.inputs, view.attrs
            else:
                node.inputs = [first.inputs[0], graph.add_const(f"{y.name}/perm", np.asarray(perm, np.int32))]
            graph.remove_unread([first])
            changed = True
            break


def _swaps_last_two(perm) -> bool:
    r = len(perm)
    return r >= 2 and list(perm) == list(range(r - 2)) + [r - 1, r - 2]


def _regroups_leading(graph: Graph, node: Node) -> bool:
    """A RESHAPE that keeps the last two dims (it only regroups the batch dims)."""
    if node.op != "RESHAPE" or not node.inputs or node.inputs[0] < 0:
        return False
    a, b = graph.t(node.inputs[0]).shape, graph.t(node.outputs[0]).shape
    return len(a) >= 2 and len(b) >= 2 and tuple(a[-2:]) == tuple(b[-2:])


def _swapped(shape) -> tuple:
    return tuple(shape[:-2]) + (shape[-1], shape[-2])


def _view(graph: Graph, src: int, shape, name: str) -> tuple[int, Node]:
    v = graph.add_tensor(name, shape, graph.t(src).dtype)
    return v, graph.reshape_node(src, v, shape)


def _operand(graph: Graph, mm: Node, k: int, flag: str, prod: dict) -> bool:
    """Operand k of mm made by a last-two-axes TRANSPOSE (through a RESHAPE of the batch dims): read its
    input (regrouped the same way) with `flag` flipped."""
    r = prod.get(mm.inputs[k])
    t = prod.get(r.inputs[0]) if r is not None and _regroups_leading(graph, r) else r
    p = _perm(graph, t) if t is not None else None
    if p is None or not _swaps_last_two(p) or graph.t(t.inputs[0]).dtype != graph.t(mm.inputs[k]).dtype:
        return False
    src = t.inputs[0]
    if t is not r:                                  # the RESHAPE's regrouping, of the untransposed input
        src, node = _view(graph, src, _swapped(graph.t(mm.inputs[k]).shape), f"{graph.t(mm.inputs[k]).name}/untransposed")
        graph.nodes.insert(next(i for i, n in enumerate(graph.nodes) if n is mm), node)
    old = [r] if t is r else [r, t]                 # (the reader before what it reads)
    mm.inputs[k] = src
    mm.attrs[flag] = not bool(mm.attrs.get(flag, False))
    graph.remove_unread(old)
    return True


def _result(graph: Graph, mm: Node, users: dict) -> bool:
    """mm's result, read only by a last-two-axes TRANSPOSE (through a RESHAPE of the batch dims): the
    swapped product, (A B)^T = B^T A^T, writes it (regrouped by a view)."""
    y = mm.outputs[0]
    readers = users.get(y, [])
    if len(readers) != 1 or y in graph.outputs:
        return False
    r = readers[0]
    t = r
    if _regroups_leading(graph, r):
        if r.outputs[0] in graph.outputs or len(users.get(r.outputs[0], [])) != 1:
            return False
        t = users[r.outputs[0]][0]
    p = _perm(graph, t)
    if p is None or not _swaps_last_two(p) or t.inputs[0] != r.outputs[0] and t is not r:
        return False
    ax, ay = bool(mm.attrs.get("adj_x", False)), bool(mm.attrs.get("adj_y", False))
    mm.inputs = [mm.inputs[1], mm.inputs[0]]
    mm.attrs["adj_x"], mm.attrs["adj_y"] = not ay, not ax
    z = t.outputs[0]
    if t is r:
        mm.outputs = [z]
        graph.nodes.remove(t)
        return True
    w = graph.add_tensor(f"{graph.t(y).name}/transposed", _swapped(graph.t(y).shape), graph.t(y).dtype)
    mm.outputs = [w]
    at = next(i for i, n in enumerate(graph.nodes) if n is t)
    graph.nodes[at] = graph.reshape_node(w, z, graph.t(z).shape)
    graph.nodes.remove(r)
    return True


def transpose_into_matmul(graph: Graph) -> None:
    """A BATCH_MATMUL operand made by a TRANSPOSE of its last two axes reads the TRANSPOSE's input with
    adj_x / adj_y flipped; a TRANSPOSE of the last two axes of a BATCH_MATMUL's result (its only reader)
    becomes the product of the operands swapped, (A B)^T = B^T A^T.  Either may sit behind a RESHAPE that
    only regroups the batch dims (litert-torch's 3-D products).  The same products and sums; the copies
    go (NCHW converters transpose keys and attention outputs: EfficientFormerV2)."""
    changed = True
    while changed:
        changed = False
        prod, users = graph.producers(), graph.consumers()
        for mm in [n for n in graph.nodes if n.op == "BATCH_MATMUL" and len(n.inputs) == 2 and min(n.inputs) >= 0]:
            if int(mm.attrs.get("fused_activation_function", 0) or 0) or mm.attrs.get("fused") \
                    or any(graph.t(t).quant is not None for t in mm.inputs + mm.outputs):
                continue
            if _operand(graph, mm, 0, "adj_x", prod) or _operand(graph, mm, 1, "adj_y", prod) or _result(graph, mm, users):
                changed = True
                break


ELEMENTWISE_BINARY = ("ADD", "SUB", "MUL", "DIV", "MAXIMUM", "MINIMUM", "SQUARED_DIFFERENCE")


def sink_transposes(graph: Graph) -> None:
    """TRANSPOSE(P) of an elementwise binary op whose operand is TRANSPOSE(Q) with P after Q the identity:
    the op reads that operand's source directly and the other operand through TRANSPOSE(P), and writes
    the outer TRANSPOSE's result.  Three copies-or-ops become two (NCHW converters' residual ADDs:
    ADD(x_nchw, TRANSPOSE(conv_nhwc)) -> TRANSPOSE back to NHWC).  Operands and result of one shape
    (no broadcast), float, not quantized; the inner TRANSPOSE and the op read by nothing else."""
    changed = True
    while changed:
        changed = False
        prod, users = graph.producers(), graph.consumers()
        for op in [n for n in graph.nodes if n.op in ELEMENTWISE_BINARY and len(n.inputs) == 2 and len(n.outputs) == 1]:
            y = op.outputs[0]
            outs = users.get(y, [])
            if len(outs) != 1 or y in graph.outputs or min(op.inputs) < 0 or op.inputs[0] == op.inputs[1]:
                continue
            outer = outs[0]
            p = _perm(graph, outer)
            shapes = {tuple(graph.t(t).shape) for t in op.inputs + op.outputs}
            if p is None or outer.inputs[0] != y or len(shapes) != 1 \
                    or any(graph.t(t).dtype != "float32" or graph.t(t).quant is not None or graph.t(t).fake_quant
                           for t in op.inputs + op.outputs + outer.outputs):
                continue
            for k in (0, 1):
                inner = prod.get(op.inputs[k])
                q = _perm(graph, inner) if inner is not None else None
                if q is None or [q[v] for v in p] != list(range(len(p))) or len(users.get(op.inputs[k], [])) != 1 \
                        or op.inputs[k] in graph.outputs:
                    continue
                other = op.inputs[1 - k]
                z = outer.outputs[0]
                t_other = graph.add_tensor(f"{graph.t(other).name}/transposed", graph.t(z).shape, graph.t(other).dtype)
                perm_c = graph.add_const(f"{graph.t(z).name}/perm", np.asarray(p, np.int32))
                new_t = Node("TRANSPOSE", [other, perm_c], [t_other], {}, index=outer.index)
                ins = [None, None]
                ins[k], ins[1 - k] = inner.inputs[0], t_other
                op.inputs, op.outputs = ins, [z]
                graph.nodes.remove(inner)
                graph.nodes[next(i for i, n in enumerate(graph.nodes) if n is outer)] = new_t
                graph.nodes.remove(op)
                graph.nodes.insert(next(i for i, n in enumerate(graph.nodes) if n is new_t) + 1, op)
                changed = True
                break
            if changed:
                break
