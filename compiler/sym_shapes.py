"""The symbolic shape rules of --dynamic (compiler/dynamic.py): the families an op's `sym_shape` fact
may name and the helpers op modules write their own rules with (compiler/ops/).  A rule refuses, with
an UnsupportedError naming the op and its dynamic input, where it cannot hold for every size.

This module sits below shapes.py and dynamic.py (both ask it for an op's rule) and imports neither.
"""
from __future__ import annotations

import numpy as np

from gpuc.compiler import sym_scope
from gpuc.compiler import symbolic as S
from gpuc.compiler.guards import same_everywhere
from gpuc.compiler.ir import Graph, Node
from gpuc.compiler.ops import fact
from gpuc.errors import UnsupportedError


def dynamic_tensor(node: Node, graph: Graph) -> str:
    for i in node.inputs:
        if i >= 0 and any(S.is_sym(d) for d in graph.t(i).shape):
            return sym_scope.pretty(f"{graph.t(i).name!r} {list(graph.t(i).shape)}")
    return "?"


def refuse(node, graph, why):
    raise UnsupportedError(f"--dynamic: {node.label()} cannot take the dynamic dim of its input "
                           f"{dynamic_tensor(node, graph)}: {why}")


def const_ints(graph, tid, node, what):
    t = graph.t(tid)
    if not t.is_const:
        refuse(node, graph, f"its {what} is not a constant")
    return [int(v) for v in np.asarray(t.data).reshape(-1)]


def is_dyn(d) -> bool:
    return S.is_sym(d)


def broadcast(node, graph, shapes):
    rank = max(len(s) for s in shapes)
    out = []
    for k in range(rank):
        ds = [s[len(s) - rank + k] for s in shapes if len(s) - rank + k >= 0]
        dyn = [d for d in ds if is_dyn(d)]
        fixed = [d for d in ds if not is_dyn(d) and d != 1]
        if dyn:
            if fixed:
                refuse(node, graph, f"it broadcasts the dynamic size against a fixed size {fixed[0]}")
            first = dyn[0]
            for d in dyn[1:]:           # (the same size reached two ways, e.g. SAME and padded VALID halvings)
                if not same_everywhere(first, d):
                    refuse(node, graph, f"two dynamic sizes {first} and {d} meet in one dimension and differ at "
                                         "some sizes within the bounds (the model runs only at some sizes)")
            out.append(first)
        else:
            out.append(max(ds))
    return out


def in_shapes(node: Node, graph: Graph) -> list:
    """The node's input shapes as lists (None for an absent input)."""
    return [list(graph.t(i).shape) if i >= 0 else None for i in node.inputs]


def spatial(node, graph, size, k, stride, dil):
    """A window's output size along one axis (the node's SAME / VALID padding)."""
    pad = int(node.attrs.get("padding", 0) or 0)          # 0 SAME, 1 VALID
    if pad == 0:
        return S.ceil_div(size, stride)
    eff = (k - 1) * dil + 1
    if is_dyn(size) and size < eff:     # (a guard, False at the bound: sizes below the window are refused)
        refuse(node, graph, f"VALID padding needs at least {eff} elements")
    return (size - eff) // stride + 1


def _same(node, graph, values=None):
    return [in_shapes(node, graph)[0]]


def _broadcast_rule(node, graph, values=None):
    return [broadcast(node, graph, [s for s in in_shapes(node, graph) if s is not None])]


def _reduce(node, graph, values=None):
    x = in_shapes(node, graph)[0]
    axes = {d + len(x) if d < 0 else d for d in const_ints(graph, node.inputs[1], node, "axes")}
    keep = bool(node.attrs.get("keep_dims", False))
    return [[1 if d in axes else n for d, n in enumerate(x) if keep or d not in axes]]


# the sym_shape families an op may name (compiler/ops/__init__.py); an op-specific rule is a callable
# (node, graph, values) -> [shapes] in its module, with `value_inputs`: the inputs whose values computed
# from dynamic sizes it reads (a RESHAPE's target), default none
FAMILIES = {"same": _same, "broadcast": _broadcast_rule, "reduce": _reduce}


def symbolic_rule(op: str):
    rule = fact(op, "sym_shape")
    return FAMILIES.get(rule) if isinstance(rule, str) else rule


def rule(node: Node, graph: Graph, values: dict | None = None) -> list:
    """The node's output shapes from its (symbolic) input shapes: the op's sym_shape fact."""
    r = symbolic_rule(node.op)
    if r is None:
        refuse(node, graph, "gpuc has no dynamic-size rule for this op yet")
    return r(node, graph, values)
