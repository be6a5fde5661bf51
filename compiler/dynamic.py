"""Bounded dynamic dims off the batch axis (`--dynamic NAME:AXIS<=MAX`, issue 16 build 2).

`setup` gives each dynamic (input, axis) a dim variable of compiler/symbolic.py with its bound as the
hint, checks the graph at other concrete sizes (shapes._blocker: a RESHAPE with a constant target is named
there), and recomputes every shape of the main graph
symbolically (`propagate_symbolic`): shapes that depend on a dynamic size hold Sym expressions.  An op
reached by a dynamic shape that has no symbolic rule here, or whose rule cannot hold for every size
(a broadcast of the dynamic dim against a fixed one, a SQUEEZE that could drop it, ...), is refused
with a message naming the op and the dynamic tensor.  The passes and lowerings then compute with the
expressions (compiler/prepare.py), and the bundle carries them for the runtime (runtime/dynamic.py).
"""
from __future__ import annotations

import numpy as np

from gpuc.compiler import sym_scope
from gpuc.compiler import symbolic as S
from gpuc.compiler.guards import same_everywhere
from gpuc.compiler.ir import Graph, Node
from gpuc.compiler.ops import FROM_SHAPES, fact
from gpuc.compiler.shapes import _blocker, parse_dynamic
from gpuc.errors import GpucError, UnsupportedError

MAX_DIMS = 16          # push-constant words (64 bytes)


def split(graph: Graph, specs) -> tuple[list, list]:
    """(batch-axis specs, other-axis specs) of a --dynamic list."""
    by_name = {graph.t(i).name: i for i in graph.inputs}
    batch, other = [], []
    for text in specs or ():
        name, axis, mx = parse_dynamic(text)
        if name in by_name:
            rank = len(graph.t(by_name[name]).shape)
            if -rank <= axis < rank and axis % rank != 0:
                other.append(text)
                continue
        batch.append(text)
    return batch, other


def setup(graph: Graph, specs) -> tuple[list, list, list]:
    """Make the graph's shapes symbolic for the dynamic dims `specs` (none on the batch axis).
    Returns (names, hints, [(input tensor, axis)]) for the dim variables d0, d1, ... in order."""
    by_name = {graph.t(i).name: i for i in graph.inputs}
    dims = []
    for text in specs:
        name, axis, mx = parse_dynamic(text)
        if name not in by_name:
            raise GpucError(f"--dynamic names {name!r}, not an input of the model (inputs: "
                            f"{', '.join(map(repr, by_name))})")
        tid = by_name[name]
        rank = len(graph.t(tid).shape)
        dims.append((tid, axis % rank, mx, f"{name}:{axis % rank}"))
    if len(dims) > MAX_DIMS:
        raise UnsupportedError(f"--dynamic: at most {MAX_DIMS} dynamic dims")
    for tid, axis, mx, label in dims:
        blocker = _blocker(graph, tid, axis, mx)     # (an op whose constant operand fixes the size)
        if blocker:
            raise UnsupportedError(f"--dynamic {label}<={mx}: the size of axis {axis} of {graph.t(tid).name!r} "
                                   f"cannot change: {blocker}")
    return [d[3] for d in dims], [d[2] for d in dims], [(d[0], d[1]) for d in dims]


def propagate_symbolic(graph: Graph, dims) -> None:
    """Input (tensor, axis) k gets dim variable k; every shape downstream is recomputed symbolically."""
    for k, (tid, axis) in enumerate(dims):
        shape = list(graph.t(tid).shape)
        shape[axis] = S.var(k)
        graph.t(tid).shape = tuple(shape)
    dynamic = {tid for tid, _ in dims}
    values: dict = {}               # tensor -> its value (an object array of ints and Syms): shape arithmetic
    folded = []                     # the nodes that computed them
    for node in graph.nodes:
        ins = [i for i in node.inputs if i >= 0]
        if not any(i in dynamic or i in values for i in ins):
            continue
        with sym_scope.site(node.label()):
            reads = getattr(symbolic_rule(node.op), "value_inputs", ())
            if fact(node.op, "exact") == FROM_SHAPES or any(
                    i in values for k, i in enumerate(node.inputs) if i >= 0 and k not in reads):
                v = _value(node, graph, values)
                values[node.outputs[0]] = v
                folded.append(node)
                continue
            outs = rule(node, graph, values)
        for o, shape in zip(node.outputs, outs):
            if o < 0:
                continue
            t = graph.t(o)
            shape = tuple(shape)
            if len(shape) != len(t.shape):
                raise UnsupportedError(f"--dynamic: {node.label()}: its output {t.name!r} comes out "
                                       f"{list(shape)}, the model says {list(t.shape)}")
            t.shape = shape
            if any(S.is_sym(d) for d in shape):
                dynamic.add(o)
    _fold_values(graph, values, folded)


def _fold_values(graph: Graph, values: dict, folded: list) -> None:
    """The shape arithmetic on dynamic sizes leaves the graph: its nodes go, and each RESHAPE target it
    computed becomes a constant (-1 for the one dynamic entry; the RESHAPE's output shape holds the
    expressions).  Any other reader of such a value was refused by _rule."""
    users = graph.consumers()
    for tid, v in values.items():
        readers = [n for n in users.get(tid, []) if all(n is not f for f in folded)]
        if tid in graph.outputs:
            raise UnsupportedError(f"--dynamic: output {graph.t(tid).name!r} is computed from a dynamic size")
        if readers:
            flat = list(np.asarray(v, dtype=object).reshape(-1))
            dyn = [k for k, d in enumerate(flat) if S.is_sym(d)]
            data = [-1 if len(dyn) == 1 and k == dyn[0] else S.hint(d) for k, d in enumerate(flat)]
            t = graph.t(tid)
            t.data = np.asarray(data, t.dtype).reshape(np.shape(v))
            t.shape = tuple(np.shape(v))
            for n in readers:
                if n.attrs.get("new_shape") is not None:
                    n.attrs["new_shape"] = list(data)
    graph.nodes = [n for n in graph.nodes if all(n is not f for f in folded)]


def _value(node: Node, graph: Graph, values: dict):
    """The value of an integer tensor computed from dynamic sizes (SHAPE, and arithmetic, slicing,
    gathering, packing and concatenation on it), as an object array of ints and Syms."""
    from gpuc.compiler.shapes import evaluate
    op = node.op
    if fact(op, "exact") == FROM_SHAPES:
        return np.asarray(list(graph.t(node.inputs[0]).shape), dtype=object)
    vals = []
    for i in node.inputs:
        if i < 0:
            vals.append(None)
        elif i in values:
            vals.append(np.asarray(values[i], dtype=object))
        elif graph.t(i).is_const and np.asarray(graph.t(i).data).dtype.kind in "iu":
            vals.append(np.asarray(graph.t(i).data))
        else:
            refuse(node, graph, "it mixes a size computed at run time with a runtime tensor")
    binary = {"ADD": lambda a, b: a + b, "SUB": lambda a, b: a - b, "MUL": lambda a, b: a * b,
              "FLOOR_DIV": lambda a, b: a // b, "FLOOR_MOD": lambda a, b: a % b,
              "MAXIMUM": S.smax, "MINIMUM": S.smin}
    if op in binary and len(vals) == 2 and not node.attrs.get("fused_activation_function"):
        return np.frompyfunc(binary[op], 2, 1)(vals[0], vals[1])
    if op == "CAST" and graph.t(node.outputs[0]).dtype.startswith("int"):
        return vals[0]
    if op in ("STRIDED_SLICE", "SLICE", "GATHER", "PACK", "CONCATENATION", "RESHAPE", "SQUEEZE", "EXPAND_DIMS"):
        try:
            out = evaluate(node, vals, graph, need_values=[True] * len(vals))
        except (ValueError, IndexError, TypeError, KeyError) as e:
            refuse(node, graph, f"its shape arithmetic failed ({e})")
        if out is not None:
            return np.asarray(out[0], dtype=object)
    refuse(node, graph, "it computes with a dynamic size as data (only SHAPE arithmetic feeding a RESHAPE's "
                         "target is supported)")


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
    from gpuc.compiler.ops import fact
    rule = fact(op, "sym_shape")
    return FAMILIES.get(rule) if isinstance(rule, str) else rule


def rule(node: Node, graph: Graph, values: dict | None = None) -> list:
    """The node's output shapes from its (symbolic) input shapes: the op's sym_shape fact."""
    r = symbolic_rule(node.op)
    if r is None:
        refuse(node, graph, "gpuc has no dynamic-size rule for this op yet")
    return r(node, graph, values)
