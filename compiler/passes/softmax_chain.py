"""fuse_softmax_chain: a softmax a converter wrote out op by op becomes one SOFTMAX node over its axis.

The chain, found by structure (any axis, keep_dims or not, views between the steps):
    m = REDUCE_MAX(x, [a])  [-> MAXIMUM(m, c): a guard with c <= -1e30]  [-> RESHAPE to keep_dims]
    e = EXP(SUB(x, m) [* beta])          (beta: a positive scalar constant, MUL either way round)
    y = DIV(e, SUM(e, [a]) [-> RESHAPE to keep_dims])
Every intermediate is read only inside the chain (e by SUM and DIV) and is no graph output; x, e and y
are float32 and not quantized.  The guard changes only rows whose every value is below c (so at most
-1e30): softmax does not depend on the value subtracted, and those rows underflow either way.
Over the last axis the result is TFLite's own SOFTMAX (so fuse_attention can take it); over another
axis it records attrs["axis"] (ops/reduce.py lower_softmax strides the rows).
"""
from __future__ import annotations

import numpy as np

from gpuc.compiler.ir import Graph, Node
from gpuc.compiler.ops.util import norm_axis

GUARD_MAX = -1e30


class _NoMatch(Exception):
    pass


def _scalar(graph: Graph, tid: int):
    t = graph.t(tid) if tid >= 0 else None
    if t is None or not t.is_const or np.size(t.data) != 1 or np.asarray(t.data).dtype.kind != "f":
        return None
    return float(np.asarray(t.data).reshape(-1)[0])


def _f32(t) -> bool:
    return t.dtype == "float32" and t.quant is None and t.fake_quant is None


class _Walk:
    def __init__(self, graph: Graph, protected: set):
        self.g = graph
        self.users, self.prod = graph.consumers(), graph.producers()
        self.protected = protected

    def only(self, tid: int, n: int = 1) -> list:
        """The n readers of tid (exactly), which must not be a graph output."""
        us = self.users.get(tid, [])
        if len(us) != n or tid in self.g.outputs or tid in self.protected:
            raise _NoMatch
        return us

    def skip_views(self, tid: int) -> tuple[int, list]:
        """Follow single-reader RESHAPE views forward from tid: (last tensor, the view nodes)."""
        views = []
        while True:
            (u,) = self.only(tid)
            if u.op not in ("RESHAPE", "SQUEEZE", "EXPAND_DIMS") or u.inputs[0] != tid:
                return tid, views
            views.append(u)
            tid = u.outputs[0]

    def axis(self, node: Node, rank: int) -> int:
        axes = self.g.t(node.inputs[1]) if len(node.inputs) > 1 and node.inputs[1] >= 0 else None
        if axes is None or not axes.is_const or np.size(axes.data) != 1:
            raise _NoMatch
        try:
            return norm_axis(int(np.asarray(axes.data).reshape(-1)[0]), rank)
        except ValueError:
            raise _NoMatch from None


def _match(graph: Graph, rmax: Node, protected: set):
    w = _Walk(graph, protected)
    g = graph
    x = rmax.inputs[0]
    xt = g.t(x)
    if not _f32(xt) or not xt.shape:
        raise _NoMatch
    a = w.axis(rmax, len(xt.shape))
    keep_shape = tuple(1 if i == a else d for i, d in enumerate(xt.shape))
    nodes = [rmax]
    m, views = w.skip_views(rmax.outputs[0])
    nodes += views
    (u,) = w.only(m)
    if u.op == "MAXIMUM":                                     # the -inf guard
        c = _scalar(g, u.inputs[1] if u.inputs[0] == m else u.inputs[0])
        if c is None or c > GUARD_MAX:
            raise _NoMatch
        nodes.append(u)
        m, views = w.skip_views(u.outputs[0])
        nodes += views
        (u,) = w.only(m)
    if u.op != "SUB" or u.inputs != [x, m] or tuple(g.t(m).shape) != keep_shape:
        raise _NoMatch
    nodes.append(u)
    (v,) = w.only(u.outputs[0])
    beta = 1.0
    if v.op == "MUL":
        other = v.inputs[1] if v.inputs[0] == u.outputs[0] else v.inputs[0]
        beta = _scalar(g, other)
        if beta is None or not beta > 0 or not np.isfinite(beta):
            raise _NoMatch
        nodes.append(v)
        (v,) = w.only(v.outputs[0])
    if v.op != "EXP":
        raise _NoMatch
    nodes.append(v)
    e = v.outputs[0]
    readers = w.only(e, 2)
    sums = [r for r in readers if r.op == "SUM" and r.inputs[0] == e]
    divs = [r for r in readers if r.op == "DIV" and r.inputs[0] == e]
    if len(sums) != 1 or len(divs) != 1 or w.axis(sums[0], len(xt.shape)) != a:
        raise _NoMatch
    nodes.append(sums[0])
    s, views = w.skip_views(sums[0].outputs[0])
    nodes += views
    (d,) = w.only(s)
    if d is not divs[0] or d.inputs != [e, s] or tuple(g.t(s).shape) != keep_shape:
        raise _NoMatch
    nodes.append(d)
    y = d.outputs[0]
    if tuple(g.t(y).shape) != tuple(xt.shape) or not _f32(g.t(y)) or not _f32(g.t(e)):
        raise _NoMatch
    for n in nodes:
        if n.op in ("SUB", "MUL", "DIV") and int(n.attrs.get("fused_activation_function", 0) or 0):
            raise _NoMatch
    return x, y, a, beta, nodes


def fuse_softmax_chain(graph: Graph) -> None:
    protected = {t.id for t in graph.tensors if t.is_variable}
    for rmax in [n for n in graph.nodes if n.op == "REDUCE_MAX"]:
        if all(n is not rmax for n in graph.nodes):
            continue
        try:
            x, y, a, beta, nodes = _match(graph, rmax, protected)
        except _NoMatch:
            continue
        rank = len(graph.t(x).shape)
        attrs = {"beta": beta} if a == rank - 1 else {"beta": beta, "axis": a}
        fused = Node("SOFTMAX", [x], [y], attrs, index=nodes[-1].index)
        at = next(i for i, n in enumerate(graph.nodes) if n is nodes[-1])
        graph.nodes[at] = fused
        gone = {id(n) for n in nodes[:-1]}
        graph.nodes = [n for n in graph.nodes if id(n) not in gone]
