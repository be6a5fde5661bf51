"""compile_bytes: tflite bytes -> IR -> passes -> kernels -> GLSL -> SPIR-V -> bundle bytes."""
from __future__ import annotations

import json
import os

import numpy as np
import xxhash

from gpuc import __version__
from gpuc.compiler import ops, partition
from gpuc.compiler.codegen import glsl
from gpuc.compiler.codegen.kernel import Kernel
from gpuc.compiler.ir import Graph
from gpuc.compiler.passes import run_passes
from gpuc.compiler.passes.memory import align, lifetimes, lower_bound, plan_arena, share_in_place
from gpuc.compiler.passes.variables import initial_value, resolve_variables
from gpuc.errors import UnsupportedError
from gpuc.runtime import bundle as B

def fingerprint(data: bytes, options: dict) -> str:
    h = xxhash.xxh3_128()
    h.update(data)
    h.update(json.dumps(options, sort_keys=True).encode())
    h.update(__version__.encode())
    return h.hexdigest()


def check_supported(graph: Graph) -> list[tuple]:
    """[(node, reason)] for every node gpuc cannot run."""
    return [(n, r) for n in graph.nodes if (r := ops.unsupported_reason(n, graph))]


def _unsupported_message(bad) -> str:
    parts = [f"{n.op} (operator #{n.index}): {r}" for n, r in bad[:8]]
    more = f" (and {len(bad) - 8} more)" if len(bad) > 8 else ""
    return f"unsupported model: {len(bad)} operator(s) cannot run on the GPU: " + "; ".join(parts) + more


def output_copies(graph: Graph) -> list[Kernel]:
    """Graph outputs that are constants or graph inputs get their own arena copy."""
    from gpuc.compiler.ops.math import words
    from gpuc.compiler.ops.shape import copy_kernel
    kernels = []
    for pos, tid in enumerate(graph.outputs):
        t = graph.t(tid)
        if t.is_const or tid in graph.inputs:
            new = graph.add_tensor(t.name, t.shape, t.dtype, quant=t.quant)
            graph.outputs[pos] = new
            src, dst = words(graph, tid), words(graph, new)       # 1-byte dtypes move as whole words
            n = graph.t(src).size
            kernels.append(copy_kernel(src, dst, [n], [1], [1], label=f"output copy of {t.name}"))
    return kernels


def estimate_flops(node, graph) -> int:
    """Multiply-adds count 2; elementwise work counts 1 per output element."""
    out = graph.t(node.outputs[0])
    if node.op in ("CONV_2D", "DEPTHWISE_CONV_2D", "TRANSPOSE_CONV") and len(node.inputs) > 1:
        w = graph.t(node.inputs[1]).shape
        taps = w[1] * w[2] * (w[3] if node.op == "CONV_2D" else 1)
        if node.op == "TRANSPOSE_CONV":
            return 2 * graph.t(node.inputs[2]).size * w[0] * w[1] * w[2]
        return 2 * out.size * taps
    if node.op == "CONV_3D" and len(node.inputs) > 1:
        w = graph.t(node.inputs[1]).shape                  # [KD, KH, KW, CI, CO]
        return 2 * out.size * w[0] * w[1] * w[2] * w[3] if len(w) == 5 else out.size
    if node.op == "FULLY_CONNECTED" and len(node.inputs) > 1:
        return 2 * out.size * graph.t(node.inputs[1]).shape[-1]          # weights [N, K]
    if node.op == "BATCH_MATMUL" and len(node.inputs) > 1:
        x = graph.t(node.inputs[0]).shape                  # K is the LHS's contracted dimension
        return 2 * out.size * (x[-2] if node.attrs.get("adj_x") else x[-1]) if len(x) >= 2 else out.size
    return out.size


def lower_graph(graph: Graph, cpu: dict | None = None, ctx=None) -> list:
    """Kernels in program order; nodes in `cpu` (partition.place) become HostOps (CPU steps);
    WHILE / IF (ctx: control_flow.Context) inline their subgraphs between jumps."""
    return lower_nodes(graph, graph.nodes, cpu, ctx) + output_copies(graph)


def lower_nodes(graph: Graph, nodes, cpu, ctx) -> list:
    from gpuc.compiler.control_flow import CONTROL_OPS, lower_control
    from gpuc.compiler.partition import host_op
    broken = os.environ.get("GPUC_TEST_BREAK_OP")      # test hook: miscompile one op on purpose
    kernels = []
    for n in nodes:
        if cpu and id(n) in cpu:
            kernels.append(host_op(n, graph))
            continue
        if n.op in CONTROL_OPS:
            if ctx is None:
                raise UnsupportedError(f"{n.label()}: control flow needs the whole model")
            kernels += lower_control(n, graph, ctx)
            continue
        from gpuc.compiler.passes.quant import apply_fake_quant
        ks = apply_fake_quant(n, graph, ops.lower(n, graph))
        if ks:
            ks[0].flops = estimate_flops(n, graph)
        if broken and (n.op == broken or broken in n.attrs.get("fused", ())):   # (also inside a fused node)
            for k in ks:
                k.defines["GPUC_TEST_BROKEN"] = 1
        kernels += ks
    return kernels


def build_bundle(graph: Graph, kernels: list[Kernel], name: str, options: dict, fp: str, stats: dict) -> bytes:
    used = list(dict.fromkeys([tid for k in kernels for _, tid in k.bindings] + graph.inputs + graph.outputs))
    used = list(dict.fromkeys(used + [graph.storage(t) for t in used]))
    # variable tensors (LSTM state) are runtime state: arena tensors that live for the whole
    # program (never share bytes), set from a weights copy of their initial value at load/reset
    state_pairs = []
    for t in [t for t in used if graph.t(t).is_variable and graph.storage(t) == t]:
        v = graph.t(t)
        init = initial_value(v)
        v.data = None
        state_pairs.append((t, graph.add_const(f"{v.name}/initial", init)))
    used += [c for _, c in state_pairs]
    consts = [t for t in used if graph.t(t).is_const]
    roots = [t for t in used if not graph.t(t).is_const and graph.storage(t) == t]
    nbytes = {t: graph.t(t).nbytes for t in used}
    st = graph.storage
    kernels_on_roots = [Kernel(k.template, [(n, st(t)) for n, t in k.bindings], 0) for k in kernels]
    persistent = [t for t, _ in state_pairs]
    life = lifetimes(kernels_on_roots, set(roots), [st(t) for t in graph.inputs] + persistent,
                     [st(t) for t in graph.outputs] + persistent)
    shared = share_in_place(kernels_on_roots, life, nbytes, {t: graph.t(t).dtype for t in used},
                            [(st(o), st(i)) for o, i in graph.in_place],
                            {st(t) for t in graph.inputs + graph.outputs} | set(persistent))
    placement, arena = plan_arena(life, nbytes)
    placement.update({o: placement[x] for o, x in shared.items()})     # in place: the input's bytes
    woff, blobs = {}, []
    cursor = 0
    for t in consts:
        woff[t] = cursor
        blobs.append((cursor, np.ascontiguousarray(graph.t(t).data).view(np.uint8).reshape(-1)))
        cursor = align(cursor + nbytes[t])
    weights = np.zeros(cursor, np.uint8)
    for off, blob in blobs:
        weights[off:off + blob.size] = blob
    index = {t: i for i, t in enumerate(used)}
    tensors = []
    for t in used:
        g = graph.t(t)
        q = None if g.quant is None else {"scale": g.quant.scale.tolist(), "zero_point": g.quant.zero_point.tolist(),
                                          "axis": int(g.quant.axis)}
        mem, off = (B.WEIGHTS, woff[t]) if g.is_const else (B.ARENA, placement[st(t)].offset)
        tensors.append(B.TensorInfo(g.name, tuple(g.shape), g.dtype, mem, off, g.nbytes, q))
    shaders, shader_index, dispatches, steps, label_at, jumps = [], {}, [], [], {}, []
    dtypes = {t: graph.t(t).dtype for t in used}
    variants = []

    def shader_of(k, variant=""):
        src = glsl.render(k, dtypes)
        if src not in shader_index:
            shader_index[src] = len(shaders)
            name = k.template + (f"+{variant}" if variant else "")
            shaders.append(B.Shader(name, glsl.kernel_spirv(k, dtypes, f"{name} for {k.label}"), len(k.bindings)))
        return shader_index[src]

    for k in kernels:
        if k.template == "ctrl":                         # control_flow.Label / Jump / JumpIfFalse
            if hasattr(k, "target"):
                jumps.append((len(steps), k.target))
                cond = getattr(k, "cond", None)
                steps.append(B.Step(B.JUMP if cond is None else B.JUMP_IF_FALSE,
                                    inputs=[] if cond is None else [index[cond]], label=type(k).__name__))
            else:
                label_at[id(k)] = len(steps)
                steps.append(B.Step(B.GPU, first=len(dispatches), count=0))   # a jump target starts a segment
            continue
        if k.template == "host":
            steps.append(B.Step(B.HOST, op=k.op, attrs=k.attrs, inputs=[index[t] if t >= 0 else -1 for t in k.inputs],
                                outputs=[index[t] for t in k.outputs], label=k.label))
            continue
        if steps and steps[-1].kind == B.GPU:
            steps[-1].count += 1
        else:
            steps.append(B.Step(B.GPU, first=len(dispatches), count=1))
        dispatches.append(B.Dispatch(shader_of(k), [index[t] for _, t in k.bindings], k.groups(), b"", k.label,
                                     getattr(k, "flops", 0)))
        for v in k.variants:                 # hardware paths of this dispatch, chosen at load (runtime/variants.py)
            if all(dtypes[t] == "float16" for n, t in k.bindings if n in v.f16_bindings):
                vk = v.make(k)
                variants.append(B.Variant(len(dispatches) - 1, shader_of(vk, v.name), vk.groups(), v.requires, v.name))
    for j, target in jumps:
        steps[j].target = label_at[id(target)]
    if all(s.kind == B.GPU for s in steps):
        steps = []                       # GPU only: no program, one command buffer
    stats["host_round_trips"] = sum(1 for j, s in enumerate(steps) if s.kind == B.JUMP_IF_FALSE or (   # loops once
        s.kind == B.HOST and (j == 0 or steps[j - 1].kind != B.HOST)))
    stats["cpu_nodes"] = sum(s.kind == B.HOST for s in steps)
    stats["cpu_ops"] = [s.label for s in steps if s.kind == B.HOST]
    stats.update(dispatches=len(dispatches),
                 shaders=len(shaders), arena_bytes=arena,
                 arena_lower_bound_bytes=lower_bound(life, nbytes),
                 naive_bytes=sum(nbytes[t] for t in roots), weights_bytes=int(weights.nbytes),
                 layout_conversions=0, views=len(graph.aliases), in_place=len(shared))
    b = B.Bundle(name, tensors, [index[t] for t in graph.inputs], [index[t] for t in graph.outputs], shaders,
                 dispatches, arena, weights, options, stats, __version__, fp,
                 state_init=[(index[t], index[c]) for t, c in state_pairs], steps=steps, variants=variants)
    return B.write_bundle(b)


def compile_bytes(data: bytes, name: str, opts: dict) -> bytes:
    """Compile .tflite bytes with normalized options (see gpuc.compiler.normalize_options)."""
    from gpuc.compiler.frontend.importer import load_tflite
    if opts["precision"] not in ("fp32", "fp16"):
        raise UnsupportedError(f"precision {opts['precision']!r} not supported (fp32 or fp16)")
    fp = fingerprint(data, opts)
    model_ir = load_tflite(data)
    graph = model_ir.main
    resolve_variables(model_ir, graph)      # resource variables -> persistent tensors; CALL_ONCE evaluated
    stats = {"ops": len(graph.nodes)}
    graph.precision = opts["precision"]
    run_passes(graph, opts["disable_passes"])
    cpu, bad = partition.place(graph)       # nodes without a GPU kernel -> numpy CPU kernels (warned)
    if bad:
        raise UnsupportedError(_unsupported_message(bad))
    partition.cluster(graph, cpu)           # as few CPU segments as the dependencies allow
    from gpuc.compiler.control_flow import CONTROL_OPS, Context
    n_gpu = [sum(1 for n in graph.nodes if id(n) not in cpu and n.op not in CONTROL_OPS)]

    def counting(g, nodes, placed, ctx):         # subgraphs of WHILE / IF, per call
        n_gpu[0] += sum(1 for n in nodes if id(n) not in placed and n.op not in CONTROL_OPS)
        return lower_nodes(g, nodes, placed, ctx)
    ctx = Context(model_ir, tuple(opts["disable_passes"]), counting)
    kernels = lower_graph(graph, cpu, ctx)
    stats["gpu_nodes"] = n_gpu[0]
    warnings = graph.__dict__.get("cpu_warnings", []) + ctx.warnings
    if warnings:
        stats["warnings"] = warnings             # printed again when the compile cache answers
    from gpuc.compiler.passes.precision import attach_fallback, store_fp16
    n16 = store_fp16(graph, kernels)             # --precision fp16: tensors stored as float16
    if n16:
        stats["fp16_tensors"] = n16
    out = build_bundle(graph, kernels, name, opts, fp, stats)
    return attach_fallback(out, data, name, opts) if n16 else out
