"""Bounded dynamic dims off the batch axis (`--dynamic NAME:AXIS<=MAX`, issue 16 build 2).

`setup` gives each dynamic (input, axis) a dim variable of compiler/symbolic.py with its bound as the
hint, checks the graph at other concrete sizes (shapes.blocker: a RESHAPE with a constant target is named
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
from gpuc.compiler.ir import Graph, Node
from gpuc.compiler.ops import BY_SHAPE_RULE, FROM_SHAPES, fact
from gpuc.compiler.shapes import blocker, evaluate, parse_dynamic
from gpuc.compiler.sym_shapes import refuse, rule, symbolic_rule
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
        why = blocker(graph, tid, axis, mx)     # (an op whose constant operand fixes the size)
        if why:
            raise UnsupportedError(f"--dynamic {label}<={mx}: the size of axis {axis} of {graph.t(tid).name!r} "
                                   f"cannot change: {why}")
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
    how = fact(op, "sym_value")     # (compiler/ops/__init__.py OPTIONAL_FACTS)
    if how == BY_SHAPE_RULE:
        try:
            out = evaluate(node, vals, graph, need_values=[True] * len(vals))
        except (ValueError, IndexError, TypeError, KeyError) as e:
            refuse(node, graph, f"its shape arithmetic failed ({e})")
        if out is not None:
            return np.asarray(out[0], dtype=object)
    elif callable(how):
        out = how(node, vals, graph)
        if out is not None:
            return out
    refuse(node, graph, "it computes with a dynamic size as data (only SHAPE arithmetic feeding a RESHAPE's "
                         "target is supported)")
