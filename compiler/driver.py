"""compile_bytes: tflite bytes -> IR -> passes -> kernels -> GLSL -> SPIR-V -> bundle bytes."""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

import numpy as np
import xxhash

from gpuc import __version__
from gpuc.compiler import ops, partition
from gpuc.compiler.codegen import glsl
from gpuc.compiler.codegen.kernel import Kernel
from gpuc.compiler.ir import HOST, JUMP, LABEL, Graph
from gpuc.compiler.memory_plan import align, plan_memory
from gpuc.compiler.passes import run_passes
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
        out.append(B.TensorInfo(g.name, tuple(g.shape), g.dtype, mem, off, g.nbytes, q))
    return out


@dataclass
class Program:
    shaders: list = field(default_factory=list)
    dispatches: list = field(default_factory=list)
    variants: list = field(default_factory=list)
    steps: list = field(default_factory=list)       # empty: GPU only (one command buffer, no program)


def emit_program(program: list, index: dict, dtypes: dict) -> Program:
    """Shaders (GLSL -> SPIR-V, one per distinct source), dispatches, kernel variants and program
    steps for the lowered `program`; index: tensor -> bundle tensor index."""
    out = Program()
    shader_index, label_at, jumps = {}, {}, []
    steps = out.steps

    def shader_of(k, variant=""):
        src = glsl.render(k, dtypes)
        if src not in shader_index:
            shader_index[src] = len(out.shaders)
            name = k.template + (f"+{variant}" if variant else "")
            out.shaders.append(B.Shader(name, glsl.kernel_spirv(k, dtypes, f"{name} for {k.label}"), len(k.bindings)))
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
        out.dispatches.append(B.Dispatch(shader_of(k), [index[t] for _, t in k.bindings], k.groups(), b"", k.label,
                                         k.flops))
        for v in k.variants:                 # hardware paths of this dispatch, chosen at load (runtime/variants.py)
            if all(dtypes[t] == "float16" for n, t in k.bindings if n in v.f16_bindings):
                vk = v.make(k)
                out.variants.append(B.Variant(len(out.dispatches) - 1, shader_of(vk, v.name), vk.groups(), v.requires,
                                              v.name))
    for j, target in jumps:
        steps[j].target = label_at[id(target)]
    if all(s.kind == B.GPU for s in steps):
        out.steps = []
    return out


def program_stats(steps: list) -> dict:
    return {"host_round_trips": sum(1 for j, s in enumerate(steps) if s.kind == B.JUMP_IF_FALSE or (  # loops once
                s.kind == B.HOST and (j == 0 or steps[j - 1].kind != B.HOST))),
            "cpu_nodes": sum(s.kind == B.HOST for s in steps),
            "cpu_ops": [s.label for s in steps if s.kind == B.HOST]}


def build_bundle(graph: Graph, kernels: list, name: str, options: dict, fp: str, stats: dict) -> bytes:
    """The bundle of a lowered program: memory plan, weights, program, stats (added to `stats`)."""
    used = list(dict.fromkeys([tid for k in kernels for _, tid in k.bindings] + graph.inputs + graph.outputs))
    used = list(dict.fromkeys(used + [graph.storage(t) for t in used]))
    state_pairs = variable_state(graph, used)
    used += [c for _, c in state_pairs]
    mem = plan_memory(graph, kernels, used, [t for t, _ in state_pairs])
    weights, woff = pack_weights(graph, [t for t in used if graph.t(t).is_const])
    index = {t: i for i, t in enumerate(used)}
    prog = emit_program(kernels, index, {t: graph.t(t).dtype for t in used})
    stats.update(program_stats(prog.steps))
    stats.update(dispatches=len(prog.dispatches), shaders=len(prog.shaders), arena_bytes=mem.arena_bytes,
                 arena_lower_bound_bytes=mem.lower_bound_bytes, naive_bytes=mem.naive_bytes,
                 weights_bytes=int(weights.nbytes), layout_conversions=0, views=len(graph.aliases),
                 in_place=mem.in_place)
    b = B.Bundle(name, tensor_table(graph, used, woff, mem.offsets), [index[t] for t in graph.inputs],
                 [index[t] for t in graph.outputs], prog.shaders, prog.dispatches, mem.arena_bytes, weights, options,
                 stats, __version__, fp, state_init=[(index[t], index[c]) for t, c in state_pairs], steps=prog.steps,
                 variants=prog.variants)
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
