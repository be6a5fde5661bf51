"""compose_transposes: a TRANSPOSE of a TRANSPOSE reads the first one's input with the composed
permutation, and where that permutation is the identity it is a view (a RESHAPE, made free by
reshape_as_view).  Converters from NCHW frameworks write NHWC -> NCHW -> NHWC pairs around layout-
agnostic ops (EfficientFormerV2: conv, transpose to NCHW, transpose back, depthwise conv); the first
TRANSPOSE disappears once nothing else reads it.
"""
from __future__ import annotations

import numpy as np

from gpuc.compiler.ir import Graph, Node
from gpuc.compiler.pattern import Op, Val, rewrite


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


def _perm_ok(m, node: Node) -> bool:
    return _perm(m.g, node) is not None


def _compose_fits(m, match) -> bool:
    first, second = match["first"], match["second"]
    x, y = m.g.t(first.inputs[0]), m.g.t(second.outputs[0])
    return len(_perm(m.g, first)) == len(_perm(m.g, second)) and x.dtype == y.dtype and x.quant is None \
        and y.quant is None and not x.fake_quant and not y.fake_quant


COMPOSE = Op("TRANSPOSE", Op("TRANSPOSE", Val(), Val(), name="first", where=_perm_ok), Val(), name="second",
             where=_perm_ok, check=_compose_fits)


def _compose(graph: Graph, match) -> None:
    first, node = match["first"], match["second"]
    p1, p2 = _perm(graph, first), _perm(graph, node)
    y = graph.t(node.outputs[0])
    perm = [p1[v] for v in p2]
    if perm == list(range(len(perm))):
        view = graph.reshape_node(first.inputs[0], node.outputs[0], y.shape)
        node.op, node.inputs, node.attrs = view.op, view.inputs, view.attrs
    else:
        node.inputs = [first.inputs[0], graph.add_const(f"{y.name}/perm", np.asarray(perm, np.int32))]
    graph.remove_unread([first])


def compose_transposes(graph: Graph) -> None:
    rewrite(graph, [(COMPOSE, _compose)], restart=True)


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


MATMUL = Op("BATCH_MATMUL", Val(), Val(), name="mm",
            where=lambda m, n: not int(n.attrs.get("fused_activation_function", 0) or 0) and not n.attrs.get("fused")
            and all(m.g.t(t).quant is None for t in n.inputs + n.outputs))


def transpose_into_matmul(graph: Graph) -> None:
    """A BATCH_MATMUL operand made by a TRANSPOSE of its last two axes reads the TRANSPOSE's input with
    adj_x / adj_y flipped; a TRANSPOSE of the last two axes of a BATCH_MATMUL's result (its only reader)
    becomes the product of the operands swapped, (A B)^T = B^T A^T.  Either may sit behind a RESHAPE that
    only regroups the batch dims (litert-torch's 3-D products).  The same products and sums; the copies
    go (NCHW converters transpose keys and attention outputs: EfficientFormerV2)."""
    rewrite(graph, [(MATMUL, lambda g, m: _operand(g, m["mm"], 0, "adj_x", m.matcher.prod)),
                    (MATMUL, lambda g, m: _operand(g, m["mm"], 1, "adj_y", m.matcher.prod)),
                    (MATMUL, lambda g, m: _result(g, m["mm"], m.matcher.users))], restart=True)


ELEMENTWISE_BINARY = ("ADD", "SUB", "MUL", "DIV", "MAXIMUM", "MINIMUM", "SQUARED_DIFFERENCE")


def sink_transposes(graph: Graph) -> None:
    """TRANSPOSE(P) of an elementwise binary op whose operand is TRANSPOSE(Q) with P after Q the identity:
    the op reads that operand's source directly and the other operand through TRANSPOSE(P), and writes
    the outer TRANSPOSE's result.  Three copies-or-ops become two (NCHW converters' residual ADDs:
    ADD(x_nchw, TRANSPOSE(conv_nhwc)) -> TRANSPOSE back to NHWC).  Operands and result of one shape
    (no broadcast), float, not quantized; the inner TRANSPOSE and the op read by nothing else."""
    rewrite(graph, [(SINK, _sink)], restart=True, variables=False)


def _sink_fits(m, match) -> bool:
    g, op, outer, inner = m.g, match["op"], match["outer"], match["inner"]
    p, q = _perm(g, outer), _perm(g, inner)
    return len({tuple(g.t(t).shape) for t in op.inputs + op.outputs}) == 1 and q is not None \
        and [q[v] for v in p] == list(range(len(p))) \
        and all(g.t(t).dtype == "float32" and g.t(t).quant is None and not g.t(t).fake_quant
                for t in op.inputs + op.outputs + outer.outputs)


SINK = Op("TRANSPOSE", Op(ELEMENTWISE_BINARY, Op("TRANSPOSE", name="inner", uses=1), Val("other"),
                          name="op", uses=1, commute=True, check=_sink_fits,
                          where=lambda m, n: len(n.outputs) == 1 and n.inputs[0] != n.inputs[1]),
          Val(), name="outer", where=_perm_ok)


def _sink(graph: Graph, match) -> None:
    op, outer, inner, other = match["op"], match["outer"], match["inner"], match["other"]
    k = op.inputs.index(inner.outputs[0])
    z = outer.outputs[0]
    t_other = graph.add_tensor(f"{graph.t(other).name}/transposed", graph.t(z).shape, graph.t(other).dtype)
    perm_c = graph.add_const(f"{graph.t(z).name}/perm", np.asarray(_perm(graph, outer), np.int32))
    new_t = Node("TRANSPOSE", [other, perm_c], [t_other], {}, index=outer.index)
    ins = [None, None]
    ins[k], ins[1 - k] = inner.inputs[0], t_other
    op.inputs, op.outputs = ins, [z]
    graph.nodes.remove(inner)
    graph.nodes[next(i for i, n in enumerate(graph.nodes) if n is outer)] = new_t
    graph.nodes.remove(op)
    graph.nodes.insert(next(i for i, n in enumerate(graph.nodes) if n is new_t) + 1, op)
