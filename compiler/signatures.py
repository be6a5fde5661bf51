"""Multi-signature bundles: every SignatureDef of a model (an LLM's `prefill_N` and `decode`) compiled
into one bundle with one weights blob and one arena.

Each signature is prepared on its own (its subgraph as the main graph, its inputs and outputs named by
the signature's names).  A tensor the signature threads through -- an input and an output of the same
name, the output written by DYNAMIC_UPDATE_SLICE of that input (litert-torch's `kv_cache_{k,v}_{i}`)
-- becomes model state: the input a variable tensor (zeros at load and reset_state), the output a view
of it, so the update is written in place and neither side leaves the device.  After the memory plan of
every signature, all state moves to one region at the end of the shared arena, one slot per name, so
every signature reads and writes the same bytes (prefill fills the cache decode reads); every
signature's state_init covers every slot, so reset_state of any of them resets all.  The weights blob
holds each distinct constant once (keyed by its bytes), so the signatures share their weights.

A `decode` signature of litert-torch's shape also gets a derived signature, `decode_greedy`
(compiler/ops/greedy_feed.py): the same graph feeding its own argmax back as the next token and
position (state), so greedy decoding runs step after step on the device with no host input; its
stats say `derived_from`.

The bundle (runtime/bundle.py): the first signature's program at the top (gpuc.load(b).run() runs it),
and each other signature as a nested payload with the same arena size and no weights of its own.
"""
from __future__ import annotations

import numpy as np
import xxhash

from gpuc import progress
from gpuc.compiler import sym_scope, status
from gpuc.compiler.frontend.importer import load_tflite
from gpuc.compiler.ir import Graph
from gpuc.compiler.memory_plan import align, plan_memory
from gpuc.compiler.ops import fact, greedy_feed
from gpuc.compiler.ops.gather_copy import resolve_arena
from gpuc.compiler.passes.precision import store_fp16
from gpuc.errors import UnsupportedError
from gpuc.runtime import bundle as B
from gpuc.version import __version__

def signature_count(data: bytes) -> int:
    return len(load_tflite(data).signatures)


def thread_state(graph: Graph, sig: dict) -> list[str]:
    """Rename the signature's inputs and outputs to its names and turn the threaded ones into state
    (see the module docstring).  Returns the state names."""
    for side in ("inputs", "outputs"):
        for name, tid in sig[side].items():
            graph.t(tid).name = name
    users = graph.consumers()
    producers = graph.producers()
    state = []
    for name in sorted(set(sig["inputs"]) & set(sig["outputs"])):
        tin, tout = sig["inputs"][name], sig["outputs"][name]
        a, b = graph.t(tin), graph.t(tout)
        p = producers.get(tout)
        if (tuple(a.shape) != tuple(b.shape) or a.dtype != b.dtype or p is None or not fact(p.op, "updates_in_place")
                or p.inputs[0] != tin or len(users.get(tin, [])) != 1 or tin not in graph.inputs
                or tout not in graph.outputs):
            continue                 # not an in-place update of the input: it stays an input and an output
        a.is_variable = b.is_variable = True
        graph.aliases[tout] = tin
        graph.inputs = [t for t in graph.inputs if t != tin]
        graph.outputs = [t for t in graph.outputs if t != tout]
        state.append(name)
    return state


def cache_positions(graph: Graph, state: list[str]) -> int | None:
    """The positions a threaded cache holds (litert-torch's KV cache in either layout, [1, KV, KH, D] or
    transposed [1, KH, KV, D] / [1, KH, D, KV]): per state tensor the one axis along which its in-place
    update writes a slice narrower than the tensor; the least of those sizes, or None where a state's
    update differs on no axis or on several."""
    names, found = set(state), []
    for n in graph.nodes:
        if not fact(n.op, "updates_in_place") or len(n.inputs) < 2 or graph.t(n.inputs[0]).name not in names:
            continue
        full, part = graph.t(n.inputs[0]).shape, graph.t(n.inputs[1]).shape
        axes = [a for a, (f, u) in enumerate(zip(full, part)) if f != u]
        if len(full) != len(part) or len(axes) != 1 or not isinstance(full[axes[0]], int):
            return None
        found.append(int(full[axes[0]]))
    return min(found) if found else None


class _Part:
    """One signature between its memory plan and the bundle."""

    def __init__(self, name: str, prepared, opts: dict, state_names: list, derived_from: str | None = None,
                 positions: int | None = None):
        from gpuc.compiler.driver import scheduled, variable_state
        self.name, self.p, self.graph, self.derived_from = name, prepared, prepared.graph, derived_from
        g = self.graph
        kernels, self.status_words = status.finish(g, prepared.program)
        used = list(dict.fromkeys([tid for k in kernels for _, tid in k.bindings] + g.inputs + g.outputs))
        self.used = list(dict.fromkeys(used + [g.storage(t) for t in used]))
        self.pairs = variable_state(g, self.used)
        self.used += [c for _, c in self.pairs]
        self.state = [t for t, _ in self.pairs] + ([self.status_words] if self.status_words is not None else [])
        self.mem = plan_memory(g, kernels, self.used, self.state)
        if "schedule_dispatches" not in opts.get("disable_passes", ()):
            kernels, self.mem = scheduled(g, kernels, self.used, self.state, self.mem)
        self.kernels = kernels
        self.state_names = state_names
        self.positions = positions     # cache_positions of its graph (the bundle's stats: kv_positions)

    def key(self, t: int) -> tuple:
        """The state slot of state tensor t: shared by name (threaded state, variables), except the status words."""
        v = self.graph.t(t)
        if t == self.status_words:
            return ("status", self.name)
        return ("state", v.name, tuple(v.shape), v.dtype)

    def relocate(self, slots: dict, foreign: dict) -> None:
        """Move every state tensor to its slot (byte offsets in the arena); add the slots of the other
        signatures' state as tensors of this one, with their initial values (reset_state resets all)."""
        g = self.graph
        mine = set()
        for t in self.state:
            self.mem.offsets[t] = slots[self.key(t)]
            mine.add(self.key(t))
        for key, (name, shape, dtype, init) in foreign.items():
            if key in mine or key[0] == "status":
                continue
            t = g.add_tensor(name, shape, dtype)
            c = g.add_const(f"{name}/initial", init)
            self.mem.offsets[t] = slots[key]
            self.used += [t, c]
            self.pairs.append((t, c))

    def finish(self, arena_bytes: int) -> None:
        self.mem.arena_bytes = arena_bytes
        self.kernels, added = resolve_arena(self.graph, self.kernels, self.mem.offsets, arena_bytes)
        self.used += added


def _pack_shared(parts: list) -> tuple[np.ndarray, list]:
    """One weights blob for every signature, each distinct constant (dtype, shape, bytes) once."""
    at, blobs, cursor, woffs = {}, [], 0, []
    for part in parts:
        woff = {}
        for t in part.used:
            v = part.graph.t(t)
            if not v.is_const:
                continue
            raw = np.ascontiguousarray(v.data).view(np.uint8).reshape(-1)
            key = (v.dtype, tuple(v.shape), xxhash.xxh3_128_hexdigest(raw.tobytes()))
            if key not in at:
                at[key] = cursor
                blobs.append((cursor, raw))
                cursor = align(cursor + raw.size)
            woff[t] = at[key]
        woffs.append(woff)
    weights = np.zeros(cursor, np.uint8)
    for off, raw in blobs:
        weights[off:off + raw.size] = raw
    return weights, woffs


def _bundle(part: _Part, woff: dict, weights, name: str, opts: dict, fp: str) -> B.Bundle:
    from gpuc.compiler.codegen import manifest
    from gpuc.compiler.driver import emit_program, program_stats, tensor_table
    g = part.graph
    index = {t: i for i, t in enumerate(part.used)}
    prog = emit_program(part.kernels, index, {t: g.t(t).dtype for t in part.used}, g.items, g.unbatched)
    stats = part.p.stats()
    stats.update(program_stats(prog.steps))
    stats.update(dispatches=len(prog.dispatches), shaders=len(prog.shaders), arena_bytes=part.mem.arena_bytes,
                 weights_bytes=int(weights.nbytes), state=list(part.state_names))
    if part.derived_from:
        stats["derived_from"] = part.derived_from
    if part.positions:
        stats["kv_positions"] = part.positions       # runtime/generate.py: the longest sequence
    tensors = tensor_table(g, part.used, woff, part.mem.offsets)
    manifest.write(prog, tensors)
    stats["io"] = B.io_record(tensors, [index[t] for t in g.inputs], [index[t] for t in g.outputs], opts)
    stats["largest_binding_bytes"] = manifest.largest_binding(prog, tensors, opts["max_binding_bytes"])
    return B.Bundle(name, tensors, [index[t] for t in g.inputs], [index[t] for t in g.outputs], prog.shaders,
                    prog.dispatches, part.mem.arena_bytes, weights, opts, stats, __version__, fp,
                    state_init=[(index[t], index[c]) for t, c in part.pairs], steps=prog.steps,
                    variants=prog.variants, checks=status.bundle_checks(g, index), signature=part.name)


def compile_signatures(data: bytes, name: str, opts: dict, fp: str) -> bytes:
    """(the multi-signature bundle of a model with several SignatureDefs, fp16 tensor count)."""
    from gpuc.compiler.prepare import prepare
    if int(opts.get("max_batch", 1)) > 1 or opts.get("dynamic") or opts.get("input_shapes"):
        raise UnsupportedError("a model with several signatures compiles without --max-batch, --dynamic or "
                               "input shapes (not supported together yet)")
    sigs = load_tflite(data).signatures
    keys = [s["key"] for s in sigs]
    if len(set(keys)) != len(keys) or not all(keys):
        raise UnsupportedError(f"the model's signature keys are empty or repeated: {keys}")
    parts, n16 = [], 0
    plan = [(i, sig["key"]) for i, sig in enumerate(sigs)]
    if greedy_feed.SOURCE in keys and greedy_feed.DERIVED not in keys:
        plan.append((keys.index(greedy_feed.SOURCE), greedy_feed.DERIVED))
    for i, key in plan:
        sig = sigs[i]
        model = load_tflite(data)                  # each signature prepares its own copy of the graphs
        model.main_index = sig["subgraph"]
        names = thread_state(model.main, model.signatures[i])
        positions = cache_positions(model.main, names)
        if key != sig["key"] and not greedy_feed.attach(model, model.signatures[i]):
            continue                               # a decode signature of another shape: no derived one
        progress.stage(f"signature {key!r}")
        try:
            p = prepare(model, opts)
            n16 += store_fp16(p.graph, p.program)        # --precision fp16: tensors stored as float16
            parts.append(_Part(key, p, opts, names, derived_from=sig["key"] if key != sig["key"] else None,
                               positions=positions))
        finally:
            sym_scope.end()
    # the state region: after the largest signature's own arena, one slot per state key
    base = align(max(pt.mem.arena_bytes for pt in parts))
    slots, foreign, cursor = {}, {}, base
    for pt in parts:
        inits = {t: c for t, c in pt.pairs}
        for t in pt.state:
            key, v = pt.key(t), pt.graph.t(t)
            if key not in slots:
                slots[key] = cursor
                cursor = align(cursor + max(v.nbytes, 4))
                if t in inits:
                    foreign[key] = (v.name, tuple(v.shape), v.dtype, initial_value_of(pt.graph, inits[t]))
    for pt in parts:
        pt.relocate(slots, foreign)
        pt.finish(cursor)
    progress.stage("packing weights")
    weights, woffs = _pack_shared(parts)
    bundles = [_bundle(pt, woff, weights, name, opts, fp) for pt, woff in zip(parts, woffs)]
    top = bundles[0]
    top.signatures = bundles[1:]
    top.stats["signatures"] = {b.signature: _summary(b) for b in bundles}
    progress.stage("writing the bundle")
    return B.write_bundle(top), n16


def initial_value_of(graph: Graph, const: int) -> np.ndarray:
    return np.array(graph.t(const).data)


def _summary(b: B.Bundle) -> dict:
    keys = ("dispatches", "cpu_nodes", "host_round_trips", "arena_bytes", "state", "io", "gpu_nodes", "ops",
            "derived_from")
    return {k: b.stats[k] for k in keys if k in b.stats}

