"""The graph verifier: the invariants every pass must keep, checked between passes (run_passes
verify=True: the `verify_passes` compile option, on in the tests; a debugging aid, off by default).

- references: every tensor id a node, an epilogue, the graph's inputs / outputs or aliases name
  exists; a node lists no absent (-1) output;
- producers: each tensor is written by one node at most, and every tensor read (by a node, an
  epilogue or as a graph output) is a constant, a graph input, a variable, written by an earlier
  node, or a view (Graph.aliases) of one of those; a view is written by no node, except by a node that
  also reads the view's base, a variable (an in-place update of model state: a KV cache); no node appears twice;
- types: every tensor's dtype is a numpy dtype name; a constant's data has its tensor's dtype and
  shape; shapes are tuples of sizes >= 0;
- op level (nodes whose op declares facts, except those the model itself gets wrong: model_problems):
  the number of inputs / outputs is within the OpDef's, an absent input is at a declared optional
  position;
- shapes: where the op declares a static shape rule (its `shape` fact), the graph has no dynamic
  dims and every integer input is a constant (a runtime one may be a size the rule needs), the
  outputs have the shapes the rule gives their inputs (nodes with a folded PAD skipped: their output
  follows the padded input);
- declared fields: Tensor, Node, Epilogue and Graph objects carry only their dataclass fields (ir.py:
  everything a pass records is a declared field) and a node's attrs are keyed by strings.

A failure raises GraphInvariantError naming the pass after which it was found, the node and the field.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from gpuc.compiler.ir import Epilogue, Graph, Node, Tensor


class GraphInvariantError(Exception):
    """A pass left the graph inconsistent: a compiler bug, not bad input."""



def _state_update(node, k: int, tid: int, graph) -> bool:
    """Output k of `node` is a view of a tensor the node also reads: an in-place update of model state
    (DYNAMIC_UPDATE_SLICE, `updates_in_place`, as compiler/signatures.py threads a KV cache, or a
    kernel a fusion made write that cache, e.g. ROPE + the cache write, ops/kv_write.py)."""
    base = graph.aliases.get(tid)
    return base in node.inputs and graph.t(base).is_variable

def _fields(cls) -> set:
    return {f.name for f in dataclasses.fields(cls)}


_DECLARED = {Tensor: _fields(Tensor), Node: _fields(Node), Epilogue: _fields(Epilogue), Graph: _fields(Graph)}


def problems(graph: Graph, known=frozenset(), sound: set | None = None) -> list[str]:
    """Every broken invariant of `graph` (module docstring), as messages naming the node and the field;
    `known`: ids of nodes whose arity or shapes were the model's own problem (model_problems); `sound`:
    a set that remembers the tensors and nodes whose checks passed, unchanged since (a run's later
    calls skip them)."""
    out: list[str] = []
    n_t = len(graph.tensors)
    ok = lambda tid: isinstance(tid, (int, np.integer)) and 0 <= tid < n_t        # noqa: E731
    out += _declared(graph)
    for k, t in enumerate(graph.tensors):
        key = None if sound is None else ("tensor", id(t), k, t.dtype, t.shape, id(t.data))
        if (key is None or key not in sound) and ("tensor", k) not in known:
            found = _tensor(t, k)
            out += found
            if key is not None and not found:
                sound.add(key)
    for name in ("inputs", "outputs"):
        out += [f"graph.{name}: tensor {tid} does not exist" for tid in getattr(graph, name) if not ok(tid)]
    for v, base in graph.aliases.items():
        if not ok(v) or not ok(base):
            out.append(f"graph.aliases: {v} -> {base}: a tensor that does not exist")
    if out:
        return out
    made: dict[int, Node] = {}
    seen: set = set()
    ready = set(graph.inputs) | {t.id for t in graph.tensors if t.is_const or t.is_variable}
    avail = lambda tid: graph.storage(tid) in ready or tid in ready       # noqa: E731
    for node in graph.nodes:
        where = node.label() if isinstance(node, Node) else repr(node)
        if not isinstance(node, Node):
            out.append(f"{where}: not a Node")
            continue
        if id(node) in seen:
            out.append(f"{where}: listed twice in graph.nodes")
            continue
        seen.add(id(node))
        out += _node_fields(node, where)
        for k, tid in enumerate(node.inputs):
            if tid == -1:
                continue
            if not ok(tid):
                out.append(f"{where}: inputs[{k}] = {tid}: no such tensor")
            elif not avail(tid):
                out.append(f"{where}: inputs[{k}] {graph.t(tid).name!r} has no producer before it "
                           f"(not a constant, graph input or variable)")
        for field, tid in [("epilogue.residual", node.epilogue.residual)] + \
                [(f"epilogue.chain_inputs[{k}]", t) for k, (t, _) in enumerate(node.epilogue.chain_inputs)]:
            if tid is not None and (not ok(tid) or not avail(tid)):
                out.append(f"{where}: {field} = {tid}: no such tensor, or none made before the node")
        for k, tid in enumerate(node.outputs):
            if not ok(tid):
                out.append(f"{where}: outputs[{k}] = {tid}: no such tensor")
                continue
            if tid in made:
                out.append(f"{where}: outputs[{k}] {graph.t(tid).name!r} is also written by {made[tid].label()}")
            if tid in graph.aliases and not _state_update(node, k, tid, graph):
                out.append(f"{where}: outputs[{k}] {graph.t(tid).name!r} is a view (graph.aliases) of "
                           f"{graph.t(graph.aliases[tid]).name!r}; a view is written by no node")
            if graph.t(tid).is_const:
                out.append(f"{where}: outputs[{k}] {graph.t(tid).name!r} is a constant")
            made[tid] = node
            ready.add(tid)
    for tid in graph.outputs:
        if not avail(tid):
            out.append(f"graph.outputs: {graph.t(tid).name!r} is made by no node")
    if not out:
        for node in graph.nodes:
            if id(node) in known:
                continue
            key = None if sound is None else _signature(graph, node)
            if key is not None and key in sound:
                continue
            found = _op_level(graph, node)
            out += found
            if key is not None and not found:
                sound.add(key)
    return out


def _signature(graph: Graph, node: Node) -> tuple:
    """What the op-level checks of `node` read: its op, tensors, their shapes and its plain attributes."""
    ts = [t for t in list(node.inputs) + list(node.outputs)]
    return (id(node), node.op, tuple(ts), tuple(graph.t(t).shape if 0 <= t < len(graph.tensors) else None for t in ts),
            node.epilogue.pad, tuple(sorted((k, v) for k, v in node.attrs.items()
                                            if isinstance(v, (int, float, str, bool, type(None))))))


def _op_level(graph: Graph, node: Node) -> list[str]:
    return _arity(node) or ([] if graph.dynamic_dims else _shapes(graph, node))


def model_problems(graph: Graph) -> set:
    """Ids of the nodes whose arity or shapes disagree with their op's declaration before any pass
    ran, and ("tensor", k) of the tensors whose fields are bad then (e.g. a negative size a bad
    option gives): the model's own (the op's check reports it, or LiteRT resizes), not a pass's doing."""
    return {id(n) for n in graph.nodes if isinstance(n, Node) and _op_level(graph, n)} | \
        {("tensor", k) for k, t in enumerate(graph.tensors) if _tensor(t, k)}


def _declared(graph: Graph) -> list[str]:
    out = []
    for obj, where in [(graph, "graph")] + [(t, f"tensor {k}") for k, t in enumerate(graph.tensors)]:
        extra = set(vars(obj)) - _DECLARED[type(obj)] if type(obj) in _DECLARED else None
        if extra is None:
            out.append(f"{where}: a {type(obj).__name__}, not a {Tensor.__name__}")
        elif extra:
            out.append(f"{where}: undeclared field(s) {sorted(extra)}")
    return out


def _tensor(t, k: int) -> list[str]:
    if not isinstance(t, Tensor):
        return []                                   # (_declared names it)
    where = f"tensor {k} {t.name!r}"
    if t.id != k:
        return [f"{where}: field id is {t.id} (its position is {k})"]
    try:
        dt = np.dtype(t.dtype)
    except TypeError:
        if t.dtype in ("resource", "variant", "string"):
            return []
        return [f"{where}: field dtype {t.dtype!r} is not a dtype name"]
    out = []
    if not isinstance(t.shape, tuple):
        out.append(f"{where}: field shape is a {type(t.shape).__name__}, not a tuple")
    elif any(isinstance(d, (int, np.integer)) and d < 0 for d in t.shape):
        out.append(f"{where}: field shape {list(t.shape)} has a negative size")
    if t.data is not None:
        a = np.asarray(t.data)
        if a.dtype != dt and a.dtype != object:
            out.append(f"{where}: field data is {a.dtype}, the tensor says {t.dtype}")
        if isinstance(t.shape, tuple) and all(isinstance(d, (int, np.integer)) for d in t.shape) \
                and tuple(a.shape) != tuple(t.shape):
            out.append(f"{where}: field data has shape {list(a.shape)}, the tensor says {list(t.shape)}")
    return out


def _node_fields(node: Node, where: str) -> list[str]:
    out = []
    extra = set(vars(node)) - _DECLARED[Node]
    if extra:
        out.append(f"{where}: undeclared field(s) {sorted(extra)}")
    if not isinstance(node.epilogue, Epilogue):
        out.append(f"{where}: field epilogue is a {type(node.epilogue).__name__}")
    elif set(vars(node.epilogue)) - _DECLARED[Epilogue]:
        extra = sorted(set(vars(node.epilogue)) - _DECLARED[Epilogue])
        out.append(f"{where}: epilogue has undeclared field(s) {extra}")
    if not isinstance(node.attrs, dict) or any(not isinstance(k, str) for k in node.attrs):
        out.append(f"{where}: field attrs must be a dict keyed by strings")
    if any(t == -1 for t in node.outputs):
        out.append(f"{where}: an output is absent (-1)")
    return out


def _arity(node: Node) -> list[str]:
    from gpuc.compiler.ops import FACTS
    d, where = FACTS.get(node.op), node.label()
    if d is None:
        return []
    ni, no = len(node.inputs), len(node.outputs)
    if not d.inputs[0] <= ni <= d.inputs[1]:
        return [f"{where}: field inputs has {ni} (the op declares {d.inputs[0]}..{d.inputs[1]})"]
    if not d.outputs[0] <= no <= d.outputs[1]:
        return [f"{where}: field outputs has {no} (the op declares {d.outputs[0]}..{d.outputs[1]})"]
    absent = [k for k, t in enumerate(node.inputs) if t == -1 and k not in d.optional]
    if absent and d.gpu:
        return [f"{where}: inputs[{absent[0]}] is absent (-1) but the op does not declare it optional"]
    return []


MAX_SHAPE_CHECK = 1 << 16       # elements of constant inputs the shape check evaluates a rule on


def _shapes(graph: Graph, node: Node) -> list[str]:
    """The op's static shape rule on its inputs gives its outputs' shapes (where cheap and declared)."""
    from gpuc.compiler.ops import fact
    from gpuc.compiler.shapes import placeholder
    rule = fact(node.op, "shape")
    if not callable(rule) or node.epilogue.pad is not None or any(o < 0 for o in node.outputs):
        return []
    ts = [None if i < 0 else graph.t(i) for i in node.inputs]
    if any(t is not None and (not all(isinstance(d, (int, np.integer)) for d in t.shape)
                              or t.is_const and t.size > MAX_SHAPE_CHECK
                              or not t.is_const and not t.dtype.startswith("float")) for t in ts):
        return []                # (a runtime integer input may be a size or an index the rule would need)
    vals = [None if t is None else t.data if t.is_const else placeholder(t.shape, t.dtype) for t in ts]
    try:
        outs = rule(node, vals, graph, [t is not None and t.is_const for t in ts])
    except Exception:           # noqa: BLE001 (a rule that cannot run on these inputs: nothing to compare)
        return []
    if outs is None:
        return []
    for k, (o, v) in enumerate(zip(node.outputs, outs)):
        if tuple(np.shape(v)) != tuple(graph.t(o).shape):
            return [f"{node.label()}: outputs[{k}] {graph.t(o).name!r} has shape {list(graph.t(o).shape)}, "
                    f"its shape rule gives {list(np.shape(v))}"]
    return []


def verify(graph: Graph, after: str, known=frozenset(), sound: set | None = None) -> None:
    """Raise GraphInvariantError if `graph` breaks an invariant; `after` names the pass that ran last;
    `known`: model_problems of the graph as imported; `sound`: see problems."""
    found = problems(graph, known, sound)
    if found:
        more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
        raise GraphInvariantError(f"graph {graph.name!r} after pass {after}: {found[0]}{more}")
