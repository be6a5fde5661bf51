"""Device-side greedy decoding: the `decode_greedy` signature derived from an LLM's `decode`
(compiler/signatures.py adds it; runtime/decode_loop.py runs it).

`decode` takes `tokens` [1,1] int32 and `input_pos` [1] int32 (the KV cache threaded as state) and
gives the logits [..., vocab].  The derived graph feeds itself: both inputs become resource variables
(state, in the bundle's shared state region, named STATE_TOKENS and STATE_POS), read at the start of
the step; at its end ARG_MAX over the logits' last axis (ties: the first index, as np.argmax and
LiteRT) is assigned to the token and input_pos + 1 to the position.  The graph's one output is the
next token (4 bytes), so a step moves nothing else to the host and steps can queue back to back.
The nodes are written in TFLite's form (VAR_HANDLE / READ_VARIABLE / ASSIGN_VARIABLE) and go
through passes/variables.py like a model's own variables: the assignments come last in node order,
after every read of the old values (the runtime's barriers order them).

A decode that also takes `mask` (litert-torch's mask_as_input: [1, 1, 1, KV] float32, added to the
attention scores) gets it computed on the device from the position read at the start of the step, as
generate() feeds it on the host: 0 on the keys up to the position, -inf past it.

A decode signature of another shape gets no derived signature (attach returns False).
"""
from __future__ import annotations

import numpy as np

from gpuc.compiler.ir import Model, Node
from gpuc.runtime.decode_loop import DERIVED, NEXT_TOKEN, SOURCE, STATE_POS, STATE_TOKENS  # noqa: F401
from gpuc.runtime.generate import MASK, POSITIONS, TOKENS


def _fits(graph, sig: dict) -> int | None:
    """The logits tensor when `sig` (its state already threaded) has the expected decode shape, else None."""
    ins = sig["inputs"]
    if set(graph.inputs) - {ins.get(MASK)} != {ins.get(TOKENS), ins.get(POSITIONS)} or len(graph.outputs) != 1:
        return None
    if ins.get(MASK) in graph.inputs:
        mask = graph.t(ins[MASK])
        if mask.dtype != "float32" or not mask.shape or not all(isinstance(d, (int, np.integer)) for d in mask.shape) \
                or int(np.prod(mask.shape[:-1])) != 1:
            return None                     # (one query row over the cache's keys)
    tok, pos, logits = graph.t(ins[TOKENS]), graph.t(ins[POSITIONS]), graph.t(graph.outputs[0])
    if (tuple(tok.shape), tok.dtype, tuple(pos.shape), pos.dtype) != ((1, 1), "int32", (1,), "int32"):
        return None
    if logits.dtype != "float32" or len(logits.shape) < 1 or int(np.prod(logits.shape[:-1])) != 1 \
            or not isinstance(logits.shape[-1], (int, np.integer)) or logits.shape[-1] < 1:
        return None
    return logits.id


def _variable(model: Model, graph, name: str, value: int) -> int:
    """A VAR_HANDLE of resource variable `name` (zeros at load and reset) whose READ_VARIABLE gives
    tensor `value`, which stops being a graph input.  Returns the handle tensor."""
    v = graph.t(value)
    h = graph.add_tensor(f"{name}/handle", [], "resource")
    graph.nodes.insert(0, Node("VAR_HANDLE", [], [h], {"container": "", "shared_name": name}))
    graph.nodes.insert(1, Node("READ_VARIABLE", [h], [value]))
    model.variables.init[("", name)] = (np.zeros(v.shape, v.dtype), None)
    graph.inputs = [t for t in graph.inputs if t != value]
    return h


def attach(model: Model, sig: dict) -> bool:
    """Rewrite the model's main graph (the decode signature's, state threaded) into the greedy loop
    graph; False (graph untouched) when the signature has another shape."""
    graph = model.main
    logits = _fits(graph, sig)
    if logits is None:
        return False
    tok, pos = sig["inputs"][TOKENS], sig["inputs"][POSITIONS]
    h_tok = _variable(model, graph, STATE_TOKENS.removeprefix("var:"), tok)
    h_pos = _variable(model, graph, STATE_POS.removeprefix("var:"), pos)
    if sig["inputs"].get(MASK) in graph.inputs:
        _causal_mask(graph, sig["inputs"][MASK], pos)
    shape = graph.t(logits).shape
    nxt = graph.add_tensor(NEXT_TOKEN, [1, 1], "int32")
    axis = graph.add_const(f"{NEXT_TOKEN}/axis", np.array([len(shape) - 1], np.int32))
    one = graph.add_const("input_pos/one", np.array([1], np.int32))
    pos1 = graph.add_tensor("input_pos/next", [1], "int32")
    if tuple(shape[:-1]) == (1, 1):
        graph.nodes.append(Node("ARG_MAX", [logits, axis], [nxt], {"output_type": "int32"}))
    else:                                   # logits [V] or [1, V]: the argmax reshaped to the token's [1, 1]
        flat = graph.add_tensor(f"{NEXT_TOKEN}/row", list(shape[:-1]), "int32")
        new_shape = graph.add_const(f"{NEXT_TOKEN}/shape", np.array([1, 1], np.int32))
        graph.nodes += [Node("ARG_MAX", [logits, axis], [flat], {"output_type": "int32"}),
                        Node("RESHAPE", [flat, new_shape], [nxt], {"new_shape": [1, 1]})]
    graph.nodes += [
        Node("ADD", [pos, one], [pos1], {"fused_activation_function": 0}),
        Node("ASSIGN_VARIABLE", [h_tok, nxt], []),
        Node("ASSIGN_VARIABLE", [h_pos, pos1], []),
    ]
    graph.outputs = [nxt]
    return True


def _causal_mask(graph, mask: int, pos: int) -> None:
    """Tensor `mask` (a graph input until now) computed after the variables' reads: 0 where the key
    index <= the position, -inf elsewhere (runtime/generate.py's host mask)."""
    shape = [int(d) for d in graph.t(mask).shape]
    keys = graph.add_const("mask/keys", np.arange(shape[-1], dtype=np.int32).reshape(shape))
    zero = graph.add_const("mask/zero", np.zeros([1], np.float32))
    neg = graph.add_const("mask/neg", np.full([1], -np.inf, np.float32))
    live = graph.add_tensor("mask/live", shape, "bool")
    graph.nodes[4:4] = [Node("LESS_EQUAL", [keys, pos], [live]), Node("SELECT_V2", [live, zero, neg], [mask])]
    graph.inputs = [t for t in graph.inputs if t != mask]
