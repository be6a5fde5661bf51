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
The chain is a pattern of compiler/pattern.py (one per optional part: guard, beta).
"""
from __future__ import annotations

import numpy as np

from gpuc.compiler.ir import Graph, Node
from gpuc.compiler.ops.util import norm_axis
from gpuc.compiler.pattern import Op, Val, Views, plain_f32, replace_nodes, rewrite, scalar

GUARD_MAX = -1e30
VIEWS = ("RESHAPE", "SQUEEZE", "EXPAND_DIMS")


def _axis(graph: Graph, node: Node, rank: int):
    """The node's one constant axis (input 1), normalized; None if not that."""
    axes = graph.t(node.inputs[1])
    if not axes.is_const or np.size(axes.data) != 1:
        return None
    try:
        return norm_axis(int(np.asarray(axes.data).reshape(-1)[0]), rank)
    except ValueError:
        return None


def _guard(m, tid) -> bool:
    c = scalar(m.g, tid)
    return c is not None and c <= GUARD_MAX


def _beta(m, tid) -> bool:
    b = scalar(m.g, tid)
    return b is not None and b > 0 and bool(np.isfinite(b))


def _fits(m, match) -> bool:
    """The chain's shapes, axes, dtypes and activations line up (module docstring)."""
    g, div = m.g, match["div"]
    xt, y = g.t(match["x"]), g.t(div.outputs[0])
    if not plain_f32(xt) or not xt.shape:
        return False
    a = _axis(g, match["rmax"], len(xt.shape))
    if a is None or _axis(g, match["sum"], len(xt.shape)) != a:
        return False
    keep = tuple(1 if i == a else d for i, d in enumerate(xt.shape))
    sub = match["sub"]
    if tuple(g.t(sub.inputs[1]).shape) != keep or tuple(g.t(div.inputs[1]).shape) != keep:
        return False
    if tuple(y.shape) != tuple(xt.shape) or not plain_f32(y) or not plain_f32(g.t(match["exp"].outputs[0])):
        return False
    return all(not int(n.attrs.get("fused_activation_function", 0) or 0) for n in (sub, match.get("mul"), div)
               if n is not None)


def _patterns() -> list:
    rmax = Op("REDUCE_MAX", Val("x"), Val(), name="rmax", uses=1)
    out = []
    for guarded in (False, True):
        m = Op("MAXIMUM", Views(rmax, VIEWS), Val(where=_guard), commute=True, uses=1) if guarded else rmax
        sub = Op("SUB", Val("x"), Views(m, VIEWS), name="sub", uses=1)
        for scaled in (False, True):
            arg = Op("MUL", sub, Val("beta", where=_beta), name="mul", commute=True, uses=1) if scaled else sub
            exp = Op("EXP", arg, name="exp", uses=2)
            out.append(Op("DIV", exp, Views(Op("SUM", exp, Val(), name="sum", uses=1), VIEWS), name="div",
                          check=_fits))
    return out


PATTERNS = _patterns()


def _fuse(graph: Graph, match) -> None:
    x, y, div = match["x"], match["div"].outputs[0], match["div"]
    rank = len(graph.t(x).shape)
    a = _axis(graph, match["rmax"], rank)
    beta = scalar(graph, match["beta"]) if "beta" in match.caps else 1.0
    attrs = {"beta": beta} if a == rank - 1 else {"beta": beta, "axis": a}
    replace_nodes(graph, div, Node("SOFTMAX", [x], [y], attrs, index=div.index), match.nodes)


def fuse_softmax_chain(graph: Graph) -> None:
    rewrite(graph, [(p, _fuse) for p in PATTERNS])
