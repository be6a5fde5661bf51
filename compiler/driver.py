"""One program's compile (compiler/entry.py compile_bytes runs it): tflite bytes -> prepare (IR, passes,
placement, lowering) -> bundle bytes.

The back half is `build_bundle`: variable state, memory plan (memory_plan.py), weight packing, the
tensor table and program emission (GLSL -> SPIR-V per distinct kernel, dispatches, host steps, jumps).
"""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field

import numpy as np
import xxhash

from gpuc import progress
from gpuc.compiler import schedule, status, sym_scope, symbolic
from gpuc.compiler.guards import check_guards
from gpuc.compiler.codegen import glsl, manifest
from gpuc.compiler.ir import HOST, JUMP, LABEL, Graph
from gpuc.compiler.memory_plan import align, plan_memory
from gpuc.compiler.ops.gather_copy import resolve_arena
from gpuc.compiler.passes.batching import stateful_refusal
from gpuc.compiler.passes.variables import initial_value
from gpuc.compiler.prepare import prepare
from gpuc.errors import GpucError, UnsupportedError
from gpuc.runtime import bundle as B
from gpuc.version import __version__

def fingerprint(data: bytes, options: dict) -> str:
    h = xxhash.xxh3_128()
    h.update(data)
    h.update(json.dumps(options, sort_keys=True).encode())
    h.update(__version__.encode())
    return h.hexdigest()


def variable_state(graph: Graph, tensors: list) -> list[tuple[int, int]]:
    """Variable tensors (LSTM state, resource variables) among `tensors` are runtime state: arena
    tensors that live for the whole program (never share bytes), set from a weights copy of their
    initial value at load and reset.  Returns the (variable, initial-value constant) pairs."""
    pairs = []
    for t in [t for t in tensors if graph.t(t).is_variable and graph.storage(t) == t]:
        v = graph.t(t)
        init = initial_value(v)
        v.data = None
        pairs.append((t, graph.add_const(f"{v.name}/initial", init)))
    return pairs


def pack_weights(graph: Graph, consts: list) -> tuple[np.ndarray, dict]:
    """The weights blob: every constant at an ALIGN-ed offset.  Returns (bytes, {tensor: offset})."""
    woff, blobs = {}, []
    cursor = 0
    for t in consts:
        woff[t] = cursor
        blobs.append((cursor, np.ascontiguousarray(graph.t(t).data).view(np.uint8).reshape(-1)))
        cursor = align(cursor + graph.t(t).nbytes)
    weights = np.zeros(cursor, np.uint8)
    for off, blob in blobs:
        weights[off:off + blob.size] = blob
    return weights, woff


def tensor_table(graph: Graph, tensors: list, woff: dict, arena: dict) -> list:
    out = []
    for t in tensors:
        g = graph.t(t)
        q = None if g.quant is None else {"scale": g.quant.scale.tolist(), "zero_point": g.quant.zero_point.tolist(),
                                          "axis": int(g.quant.axis)}
        mem, off = (B.WEIGHTS, woff[t]) if g.is_const else (B.ARENA, arena[graph.storage(t)])
        out.append(B.TensorInfo(g.name, tuple(symbolic.hint(list(g.shape))), g.dtype, mem, off, g.nbytes, q))
    return out


@dataclass
class Program:
    shaders: list = field(default_factory=list)
    dispatches: list = field(default_factory=list)
    variants: list = field(default_factory=list)
    steps: list = field(default_factory=list)       # empty: GPU only (one command buffer, no program)
    grids: list = field(default_factory=list)       # --dynamic: each dispatch's workgroup count (symbolic.tree)
    variant_grids: list = field(default_factory=list)


def _push(k) -> bytes:
    """A dynamic kernel's push constants: one int per dim variable (the runtime writes the run's sizes)."""
    return bytes(4 * len(sym_scope.hints())) if glsl.is_dynamic(k) else b""


def _groups(k, grids: list) -> tuple:
    """k's grid; a dynamic kernel's at the bound, its workgroup count as an expression in `grids`."""
    if not symbolic.is_sym(k.invocations):
        grids.append(max(1, -(-k.invocations // k.local_x)))
        return k.groups()
    g = symbolic.smax(1, symbolic.ceil_div(k.invocations, k.local_x))
    grids.append(symbolic.tree(g))
    return dataclasses.replace(k, invocations=symbolic.hint(k.invocations)).groups()


def emit_program(program: list, index: dict, dtypes: dict, items: int = 1, unbatched=frozenset()) -> Program:
    """Shaders (GLSL -> SPIR-V, one per distinct source), dispatches, kernel variants and program
    steps for the lowered `program`; index: tensor -> bundle tensor index; items: the batch-native
    item count (> 1: each dispatch whose output holds the items, not in `unbatched`, records its
    item-major grid unit)."""
    out = Program()
    shader_index, label_at, jumps, pending = {}, {}, [], []
    steps = out.steps

    def shader_of(k, variant=""):
        src = glsl.render(k, dtypes)
        if src not in shader_index:
            shader_index[src] = len(out.shaders)
            name = k.template + (f"+{variant}" if variant else "")
            out.shaders.append(B.Shader(name, b"", len(k.bindings)))
            pending.append((out.shaders[-1], k, src))        # compiled below, once all are known (N of M)
        return shader_index[src]

    for k in program:
        if k.kind == LABEL:
            label_at[id(k)] = len(steps)
            steps.append(B.Step(B.GPU, first=len(out.dispatches), count=0))   # a jump target starts a segment
            continue
        if k.kind == JUMP:
            jumps.append((len(steps), k.target))
            steps.append(B.Step(B.JUMP if k.cond is None else B.JUMP_IF_FALSE,
                                inputs=[] if k.cond is None else [index[k.cond]], label=k.label))
            continue
        if k.kind == HOST:
            steps.append(B.Step(B.HOST, op=k.op, attrs=k.attrs, inputs=[index[t] if t >= 0 else -1 for t in k.inputs],
                                outputs=[index[t] for t in k.outputs], label=k.label))
            continue
        if steps and steps[-1].kind == B.GPU:
            steps[-1].count += 1
        else:
            steps.append(B.Step(B.GPU, first=len(out.dispatches), count=1))
        per_item = items > 1 and k.bindings[0][1] not in unbatched     # its output holds the items
        out.dispatches.append(B.Dispatch(shader_of(k), [index[t] for _, t in k.bindings], _groups(k, out.grids),
                                         _push(k), k.label, k.flops, k.item_unit() if per_item else 0))
        for v in k.variants:                 # hardware paths of this dispatch, chosen at load (runtime/variants.py)
            if all(dtypes[t] == "float16" for n, t in k.bindings if n in v.f16_bindings):
                vk = v.make(k)
                if vk is None:               # the final kernel (its fused epilogue) has no such form
                    continue
                out.variants.append(B.Variant(len(out.dispatches) - 1, shader_of(vk, v.name),
                                              _groups(vk, out.variant_grids), v.requires,
                                              v.name, vk.item_unit() if per_item else 0, v.measured))
    for j, target in jumps:
        steps[j].target = label_at[id(target)]
    with progress.counter("compiling shaders", len(pending)) as bar:
        for shader, k, src in pending:
            try:
                shader.spirv = glsl.source_spirv(src, k, dtypes, f"{shader.name} for {k.label}")
            except GpucError as e:
                if not glsl.is_dynamic(k):
                    raise
                raise UnsupportedError(f"--dynamic: {k.label}: its kernel ({k.template}) cannot take a size known "
                                       f"only at run time (a compile-time use such as #if or an array size): "
                                       f"{str(e)[:300]}") from None
            shader.push_bytes = 4 * len(sym_scope.hints()) if glsl.is_dynamic(k) else 0
            bar.advance()
    if all(s.kind == B.GPU for s in steps):
        out.steps = []
    return out


def program_stats(steps: list) -> dict:
    return {"host_round_trips": sum(1 for j, s in enumerate(steps) if s.kind == B.JUMP_IF_FALSE or (  # loops once
                s.kind == B.HOST and (j == 0 or steps[j - 1].kind != B.HOST))),
            "cpu_nodes": sum(s.kind == B.HOST for s in steps),
            "cpu_ops": [s.label for s in steps if s.kind == B.HOST]}


def scheduled(graph: Graph, kernels: list, used: list, state: list, mem):
    """(program, memory plan) with the fewest barriers among program order and the level orders
    (compiler/schedule.py), within schedule.ARENA_SLACK / ARENA_SLACK_BYTES of program order's arena."""
    ordered = schedule.by_levels(graph, kernels)
    limit = max(mem.arena_bytes * schedule.ARENA_SLACK, mem.arena_bytes + schedule.ARENA_SLACK_BYTES)
    best = (schedule.barriers(graph, kernels, mem.offsets), mem.arena_bytes, 0, kernels, mem)
    for rank, group_end in enumerate((None, schedule.group_ends(graph, ordered)), 1):
        m = plan_memory(graph, ordered, used, state, group_end)
        if m.arena_bytes <= limit:
            best = min(best, (schedule.barriers(graph, ordered, m.offsets), m.arena_bytes, rank, ordered, m),
                       key=lambda c: c[:3])
    return best[3], best[4]


def build_bundle(graph: Graph, kernels: list, name: str, options: dict, fp: str, stats: dict) -> bytes:
    """The bundle of a lowered program: memory plan, weights, program, stats (added to `stats`)."""
    kernels, status_words = status.finish(graph, kernels)     # run-time checks: their words zeroed first
    used = list(dict.fromkeys([tid for k in kernels for _, tid in k.bindings] + graph.inputs + graph.outputs))
    used = list(dict.fromkeys(used + [graph.storage(t) for t in used]))
    state_pairs = variable_state(graph, used)
    used += [c for _, c in state_pairs]
    state = [t for t, _ in state_pairs] + ([status_words] if status_words is not None else [])
    progress.stage("planning memory")
    mem = plan_memory(graph, kernels, used, state)
    if "schedule_dispatches" not in options.get("disable_passes", ()):
        kernels, mem = scheduled(graph, kernels, used, state, mem)
    kernels, added = resolve_arena(graph, kernels, mem.offsets, mem.arena_bytes)   # kernels reading the arena whole
    used += added
    progress.stage("packing weights")
    weights, woff = pack_weights(graph, [t for t in used if graph.t(t).is_const])
    index = {t: i for i, t in enumerate(used)}
    prog = emit_program(kernels, index, {t: graph.t(t).dtype for t in used}, graph.items, graph.unbatched)
    stats.update(program_stats(prog.steps))
    stats.update(dispatches=len(prog.dispatches), shaders=len(prog.shaders), arena_bytes=mem.arena_bytes,
                 arena_lower_bound_bytes=mem.lower_bound_bytes, naive_bytes=mem.naive_bytes,
                 weights_bytes=int(weights.nbytes), views=len(graph.aliases),
                 in_place=mem.in_place)
    if graph.dynamic_dims:                    # runtime/dynamic.py: sizes per run, grids and I/O shapes from them
        ctx = sym_scope.current()
        check_guards(ctx)
        io = {index[t]: [symbolic.tree(d) for d in graph.t(t).shape] for t in graph.inputs + graph.outputs}
        options = dict(options, dynamic_dims={
            "dims": [[graph.inputs.index(next(t for t in graph.inputs if graph.t(t).name == n)), a, m, label]
                     for (n, a), m, label in zip(graph.dynamic_dims, ctx.hints, ctx.names)],
            "grids": prog.grids, "variant_grids": prog.variant_grids,
            "shapes": {str(k): v for k, v in io.items()}})
        stats["dynamic_dims"] = [f"{label} 1..{m}" for label, m in zip(ctx.names, ctx.hints)]
        if ctx.skipped:
            stats["dynamic_skipped_passes"] = list(ctx.skipped)
    if graph.items > 1:                       # runtime/batch.py: one arena, every dispatch covers the items
        options = dict(options, batch_native=True, max_batch=graph.items)     # (--dynamic: the batch bound)
    tensors = tensor_table(graph, used, woff, mem.offsets)
    manifest.write(prog, tensors, sym_scope.current().hints if graph.dynamic_dims else (),
                   (prog.grids, prog.variant_grids) if graph.dynamic_dims else None)
    stats["io"] = B.io_record(tensors, [index[t] for t in graph.inputs], [index[t] for t in graph.outputs], options)
    stats["largest_binding_bytes"] = manifest.largest_binding(prog, tensors, options["max_binding_bytes"])
    b = B.Bundle(name, tensors, [index[t] for t in graph.inputs],
                 [index[t] for t in graph.outputs], prog.shaders, prog.dispatches, mem.arena_bytes, weights, options,
                 stats, __version__, fp, state_init=[(index[t], index[c]) for t, c in state_pairs], steps=prog.steps,
                 variants=prog.variants, checks=status.bundle_checks(graph, index),
                 output_sizes=[B.OutputSize(graph.outputs.index(t), a, index[n], *r)     # (ops/output_lengths.py)
                               for t, (a, n, *r) in getattr(graph, "output_lengths", {}).items()])
    progress.stage("writing the bundle")
    return B.write_bundle(b)


def prepare_batched(data: bytes, opts: dict):
    """prepare(), where a --max-batch program that the batch-native rewrite left with CPU steps, or that
    failed to lower after it, is prepared again replicated (the batch-1 program per item, which the
    runtime runs whenever that one is fully on the GPU); the stats say why.  --dynamic has no such
    fallback: its errors name the op."""
    if opts.get("max_batch", 1) <= 1:
        return prepare(data, opts)
    if "batch_native" in opts["disable_passes"]:
        return _batchable(prepare(data, opts), opts)
    try:
        p = prepare(data, opts, warn=False)
        cpu = [n.label() for n in p.graph.nodes if id(n) in p.front.cpu]     # (its placement: front.cpu)
        why = f"CPU step(s) on the batched graph: {', '.join(cpu[:3])}" if p.graph.items > 1 and cpu else None
    except (GpucError, ValueError, IndexError, KeyError) as e:      # (a lowering's own check, on batched shapes)
        kind = "" if isinstance(e, GpucError) else f"{type(e).__name__}: "
        why = f"the batched graph failed to lower: {kind}{e}"
    if why is None:
        return _batchable(p, opts)
    p = prepare(data, dict(opts, disable_passes=sorted(set(opts["disable_passes"]) | {"batch_native"})))
    p.graph.batch_refusal = why
    return _batchable(p, opts)


def _batchable(p, opts: dict):
    """p, unless an op refuses --max-batch outright (passes/batching.py stateful_refusal)."""
    why = stateful_refusal(p.graph)
    if why:
        raise UnsupportedError(f"--max-batch {opts['max_batch']}: {why}")
    return p
