"""Resource variables and CALL_ONCE: lowered to persistent variable tensors before the pass pipeline.

TFLite's resource variables (VAR_HANDLE / READ_VARIABLE / ASSIGN_VARIABLE) name their storage by
(container, shared_name); LiteRT keeps one buffer per name for the interpreter's lifetime, shared by
every subgraph.  `resolve_variables` (called by prepare.prepare_graph, not an optional pass) turns each name
into ONE variable tensor of the main graph (`is_variable`, so it lives in the arena for the whole
program and persists across runs):

* VAR_HANDLE disappears; READ_VARIABLE(h) -> out becomes READ_VARIABLE(V) -> out (a copy);
  ASSIGN_VARIABLE(h, x) becomes ASSIGN_VARIABLE(x) -> V (a copy).  READ and ASSIGN of one variable
  have no data edge, so their order is the node order: no pass reorders nodes, dead-node elimination
  keeps every writer of a variable, and the runtime puts a full barrier between dispatches.
* CALL_ONCE(init subgraph) runs before the first invoke.  An init subgraph has no inputs: it is a
  pure function of constants (and of variables it assigned itself), so it is evaluated here, at
  compile time (constant folding, else the runtime's numpy CPU kernels), and what it assigns becomes
  the variables' initial values: set at load and again by LoadedModel.reset_state().
"""
from __future__ import annotations

import numpy as np

from gpuc.compiler.ir import Graph, Model, Node
from gpuc.compiler.passes.fold import const_value
from gpuc.errors import UnsupportedError
from gpuc.runtime import cpu_ops

VAR_OPS = ("VAR_HANDLE", "READ_VARIABLE", "ASSIGN_VARIABLE", "CALL_ONCE")


def _key(node: Node) -> tuple:
    return (str(node.attrs.get("container") or ""), str(node.attrs.get("shared_name") or ""))


def _name(key) -> str:
    return f"{key[0]}/{key[1]}" if key[0] else key[1]


def _eval_node(g: Graph, n: Node) -> list[np.ndarray]:
    """Output values of a non-variable node whose inputs are all known (constants)."""
    try:
        v = const_value(g, n)
    except (ValueError, IndexError, TypeError):
        v = None
    if v is not None:
        return [v]
    ins = [g.t(i).data if i >= 0 else None for i in n.inputs]
    specs = [cpu_ops.Spec(g.t(o).shape, g.t(o).dtype) for o in n.outputs]
    in_specs = [None if i < 0 else cpu_ops.Spec(g.t(i).shape, g.t(i).dtype, g.t(i).data) for i in n.inputs]
    why = cpu_ops.unsupported_reason(n.op, n.attrs, in_specs, specs)
    if why:
        raise UnsupportedError(f"CALL_ONCE init subgraph {g.name!r}: {n.label()} cannot be evaluated "
                               f"at compile time: {why}")
    return cpu_ops.run(n.op, n.attrs, ins, specs)


def _run_init(model: Model, gi: int, values: dict, done: set, depth: int = 0) -> None:
    """Interpret init subgraph gi with numpy; values: variable key -> (array, quant)."""
    if gi in done:
        return
    if depth > 16:
        raise UnsupportedError("CALL_ONCE: init subgraphs nest more than 16 deep")
    done.add(gi)
    g = model.subgraphs[gi]
    if g.inputs:
        raise UnsupportedError(f"CALL_ONCE init subgraph {g.name!r} has inputs ({len(g.inputs)})")
    handles = {}
    for n in g.nodes:
        if n.op == "VAR_HANDLE":
            handles[n.outputs[0]] = _key(n)
        elif n.op == "CALL_ONCE":
            _run_init(model, _subgraph_index(model, n), values, done, depth + 1)
        elif n.op == "ASSIGN_VARIABLE":
            key = _handle(handles, n, g)
            x = g.t(n.inputs[1])
            if x.data is None:
                raise UnsupportedError(f"CALL_ONCE init subgraph {g.name!r}: {n.label()} assigns a value "
                                       f"that is not known at compile time")
            try:
                arr = np.array(x.data, np.dtype(x.dtype))
            except TypeError:
                raise UnsupportedError(f"CALL_ONCE init subgraph {g.name!r}: {n.label()} assigns tensor {x.name!r} "
                                       f"of dtype {x.dtype}, which no variable can hold") from None
            if arr.size != int(np.prod(x.shape, dtype=np.int64)):
                raise UnsupportedError(f"CALL_ONCE init subgraph {g.name!r}: {n.label()} assigns tensor {x.name!r} "
                                       f"of shape {list(x.shape)} with {arr.size} values")
            values[key] = (arr.reshape(x.shape), x.quant)
        elif n.op == "READ_VARIABLE":
            key = _handle(handles, n, g)
            if key not in values:
                raise UnsupportedError(f"CALL_ONCE init subgraph {g.name!r}: {n.label()} reads variable "
                                       f"{_name(key)!r} before it is assigned")
            g.t(n.outputs[0]).data = values[key][0]
        else:
            if any(i >= 0 and g.t(i).data is None for i in n.inputs):
                raise UnsupportedError(f"CALL_ONCE init subgraph {g.name!r}: {n.label()} has an input "
                                       f"that is not known at compile time")
            for o, v in zip(n.outputs, _eval_node(g, n)):
                g.t(o).data = np.asarray(v).reshape(g.t(o).shape).astype(g.t(o).dtype, copy=False)


def _subgraph_index(model: Model, n: Node) -> int:
    gi = int(n.attrs.get("init_subgraph_index", -1))
    if not 0 < gi < len(model.subgraphs):
        raise UnsupportedError(f"{n.label()}: init_subgraph_index {gi} is not a subgraph of this model "
                               f"({len(model.subgraphs)} subgraphs)")
    return gi


def _handle(handles: dict, n: Node, g: Graph) -> tuple:
    h = n.inputs[0] if n.inputs else -1
    if h not in handles:
        raise UnsupportedError(f"{n.label()} in subgraph {g.name!r}: resource input is not produced by a "
                               f"VAR_HANDLE of this subgraph")
    return handles[h]


def _same_quant(a, b) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return np.array_equal(a.scale, b.scale) and np.array_equal(a.zero_point, b.zero_point)


def resolve_variables(model: Model, graph: Graph, init_done: set | None = None) -> None:
    """Rewrite `graph` (a subgraph of `model`) in place: variables become persistent tensors.
    For the main graph they are its own tensors; a WHILE / IF subgraph gets local variable tensors
    (`graph.var_keys`: tensor -> key) that control_flow.py binds to the main graph's at the call."""
    state = model.variables
    is_main = graph is model.main
    if not any(n.op in VAR_OPS for n in graph.nodes):
        return
    init_values: dict = state.init
    done = state.done if init_done is None else init_done
    handles, var_of, keep = {}, {}, []
    for n in graph.nodes:
        if n.op == "CALL_ONCE":
            if n.inputs or n.outputs:
                raise UnsupportedError(f"{n.label()} has inputs or outputs (CALL_ONCE takes none)")
            if var_of and is_main:
                raise UnsupportedError(f"{n.label()} comes after variable reads/assigns of the main graph")
            _run_init(model, _subgraph_index(model, n), init_values, done)
            continue
        if n.op == "VAR_HANDLE":
            if len(n.outputs) != 1:
                raise UnsupportedError(f"{n.label()} has {len(n.outputs)} outputs (expected 1)")
            handles[n.outputs[0]] = _key(n)
            continue
        if n.op in ("READ_VARIABLE", "ASSIGN_VARIABLE"):
            want = (1, 1) if n.op == "READ_VARIABLE" else (2, 0)
            if (len(n.inputs), len(n.outputs)) != want:
                raise UnsupportedError(f"{n.label()} has {len(n.inputs)} inputs and {len(n.outputs)} outputs "
                                       f"(expected {want[0]} and {want[1]})")
            key = _handle(handles, n, graph)
            val = graph.t(n.outputs[0] if n.op == "READ_VARIABLE" else n.inputs[1])
            v = var_of.get(key)
            if v is None:
                v = graph.add_tensor(f"var:{_name(key)}", val.shape, val.dtype, quant=val.quant)
                graph.t(v).is_variable = True
                var_of[key] = v
            vt = graph.t(v)
            if vt.shape != val.shape or vt.dtype != val.dtype or not _same_quant(vt.quant, val.quant):
                raise UnsupportedError(f"{n.label()}: variable {_name(key)!r} is used as {val.dtype}{list(val.shape)}"
                                       f" here but as {vt.dtype}{list(vt.shape)} (or with other quantization)"
                                       f" elsewhere; gpuc needs one static shape and type per variable")
            if n.op == "READ_VARIABLE":
                n.inputs = [v]
            else:
                n.inputs, n.outputs = [n.inputs[1]], [v]
        keep.append(n)
    if not is_main:
        graph.var_keys = {v: key for key, v in var_of.items()}
    else:
        state.main.update(var_of)
    for key, v in var_of.items():
        vt = graph.t(v)
        if not is_main:
            continue
        if key in init_values:
            arr, q = init_values[key]
            if arr.shape != vt.shape or arr.dtype.name != vt.dtype or not _same_quant(q, vt.quant):
                raise UnsupportedError(f"CALL_ONCE assigns variable {_name(key)!r} a {arr.dtype.name}{list(arr.shape)}"
                                       f" value, but the model uses it as {vt.dtype}{list(vt.shape)}")
            vt.initial = arr
        else:
            first = next(n for n in keep if v in n.inputs or v in n.outputs)
            loops_before = any(n.op in ("WHILE", "IF") for n in keep[:keep.index(first)])
            if first.op == "READ_VARIABLE" and not loops_before:
                raise UnsupportedError(f"{first.label()} reads variable {_name(key)!r}, which nothing "
                                       f"assigns before (no CALL_ONCE initializes it)")
            vt.initial = np.zeros(vt.shape, vt.dtype)
    used = {i for n in keep for i in n.inputs} | set(graph.outputs)
    bad = [t for t in handles if t in used]
    if bad:
        raise UnsupportedError(f"resource tensor {graph.t(bad[0]).name!r} is used by an op other than "
                               f"READ_VARIABLE / ASSIGN_VARIABLE (or is a graph output)")
    graph.nodes = keep


def initial_value(t) -> np.ndarray:
    """A variable tensor's initial value in its (possibly post-quantization-pass) dtype."""
    init = t.initial
    if init is None:
        return np.zeros(t.shape, t.dtype) if t.data is None else np.array(t.data, t.dtype).reshape(t.shape)
    if init.dtype.name != t.dtype and t.dtype == "float32" and t.quant is not None:   # simulated quantization
        zp = np.float32(t.quant.zero_point[0]) if t.quant.zero_point.size else np.float32(0)
        return ((init.astype(np.float32) - zp) * np.float32(t.quant.scale[0])).astype(np.float32)
    return init.astype(t.dtype).reshape(t.shape)


def bind_variable(model: Model, graph: Graph, key, like) -> int:
    """The main graph's variable tensor for `key` (created on first use by a subgraph), checked
    against `like` (the subgraph's local variable tensor)."""
    state = model.variables
    v = state.main.get(key)
    if v is None:
        v = graph.add_tensor(f"var:{_name(key)}", like.shape, like.dtype, quant=like.quant)
        vt = graph.t(v)
        vt.is_variable = True
        arr, _ = state.init.get(key, (np.zeros(like.shape, like.dtype), None))
        vt.initial = arr
        state.main[key] = v
    vt = graph.t(v)
    if vt.shape != like.shape or vt.dtype != like.dtype:
        raise UnsupportedError(f"variable {_name(key)!r} is {like.dtype}{list(like.shape)} in a subgraph but "
                               f"{vt.dtype}{list(vt.shape)} in the main graph; gpuc needs one static shape and type")
    return v
