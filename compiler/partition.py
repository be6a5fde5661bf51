"""Partial delegation: which nodes run on the CPU, their order, and their host steps.

Every node is checked against the GPU op registry; a node the GPU cannot run goes to a numpy CPU
kernel of the runtime (runtime/cpu_ops.py CPU_OPS; the compiler only reads that table) and gets a
warning; a node with neither is a compile error naming it.  CPU nodes are then gathered into as
few host segments as possible: a list schedule that keeps the dependencies (data edges, and the
program order of every node touching one variable tensor, which has no data edge) and runs all
ready nodes of one side before switching to the other.
"""
from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field

import numpy as np

from gpuc.compiler import ops
from gpuc.compiler.control_flow import CONTROL_OPS
from gpuc.compiler.ir import Graph, HostOp, Node
from gpuc.runtime import cpu_ops


def specs(node: Node, graph: Graph):
    def spec(tid):
        if tid < 0:
            return None
        t = graph.t(tid)
        quantized = t.quant is not None and t.dtype in ("int8", "uint8", "int16", "int32", "int64") and not t.is_const
        return cpu_ops.Spec(tuple(t.shape), t.dtype, t.data if t.is_const and not t.is_variable else None, quantized)
    return [spec(i) for i in node.inputs], [spec(o) for o in node.outputs]


def cpu_reason(node: Node, graph: Graph) -> str | None:
    ins, outs = specs(node, graph)
    if any(o is None for o in outs):
        return "an output is absent"
    return cpu_ops.unsupported_reason(node.op, node.attrs, ins, outs) or _trial(node, ins, outs)


TRIAL_ELEMENTS = 1 << 20


def _trial(node: Node, ins, outs) -> str | None:
    """Run the CPU kernel once on zeros (constants as they are): the element counts it gives must
    be the node's.  A kernel that raises on zeros (e.g. RANGE with a runtime delta) is not judged here."""
    if sum(int(np.prod(s.shape, dtype=np.int64)) for s in list(ins) + list(outs) if s is not None) > TRIAL_ELEMENTS:
        return None
    args = [None if s is None else (np.asarray(s.value) if s.value is not None else np.zeros(s.shape, s.dtype))
            for s in ins]
    try:
        with np.errstate(all="ignore"):
            got = cpu_ops.CPU_OPS[node.op].fn(node.attrs, args, outs)
    except Exception:                                  # noqa: BLE001 - judged at run time instead
        return None
    if len(got) != len(outs):
        return f"CPU kernel gives {len(got)} outputs, the node has {len(outs)}"
    raw = cpu_ops.CPU_OPS[node.op].raw
    for j, (v, s) in enumerate(zip(got, outs)):
        if int(np.size(v)) != int(np.prod(s.shape, dtype=np.int64)):
            return f"output {j} would have shape {list(np.shape(v))}, the model says {list(s.shape)}"
        if raw and np.asarray(v).dtype.name != s.dtype:        # data movement keeps the dtype
            return f"output {j} would be {np.asarray(v).dtype.name}, the model says {s.dtype}"
    return None


# what GPU kernels take at all, beyond data movement (compiler/ops/elements.py: every dtype) and int64 indices
GPU_DTYPES = ("float32", "int32", "bool", "int8", "uint8")


def capability_limit(node: Node, reason: str, graph: Graph) -> bool:
    """True when the GPU refuses the node for what gpuc's GPU kernels cannot do (no kernel, op
    version, a dtype, quantized tensors), not because the node is invalid (bad attributes, shapes,
    constant operands LiteRT rejects): only those go to the CPU.  A runtime tensor of a dtype no GPU
    kernel handles (int64 values, float16, int16, complex ...) always means the CPU."""
    if node.op not in ops.REGISTRY:      # (refused outright: ops.refuse, or the importer's reason on the node)
        return node.op not in ops.REFUSED and ops.REFUSAL_ATTR not in node.attrs
    if reason.startswith(ops.LITERT_REJECTS):      # LiteRT fails the model too: no answer to give
        return False
    if reason.startswith("version ") or " has dtype " in reason or reason.startswith("quantized tensor"):
        return True
    return any(t >= 0 and not graph.t(t).is_const and graph.t(t).dtype not in GPU_DTYPES
               for t in list(node.inputs) + list(node.outputs))


@dataclass
class Placement:
    cpu: dict = field(default_factory=dict)         # id(node) -> why not the GPU, for the nodes on the CPU
    bad: list = field(default_factory=list)         # [(node, reason)] for the nodes neither side can run
    warnings: list = field(default_factory=list)    # one line per CPU node (kept in the bundle's stats)


def place(graph: Graph, warn=True, where: str = "") -> Placement:
    """Which nodes run on the CPU, and which cannot run at all; warn: print each CPU node's warning."""
    placed = Placement()
    cpu, bad = placed.cpu, placed.bad
    for n in graph.nodes:
        if n.op in CONTROL_OPS:          # lowered with their subgraphs (control_flow.py)
            continue
        r = ops.unsupported_reason(n, graph)
        if r is None:
            continue
        if not capability_limit(n, r, graph):      # the GPU check found the node itself invalid: no fallback
            bad.append((n, r))
            continue
        cr = cpu_reason(n, graph)
        if cr is None:
            cpu[id(n)] = r
            why = "no GPU kernel" if r == "op not implemented" else r
            msg = f"op #{n.index} {n.op}{where} runs on CPU: {why}"
            placed.warnings.append(msg)
            if warn:
                print(f"gpuc: warning: {msg}", file=sys.stderr)
        else:
            bad.append((n, f"{r}; CPU: {cr}"))
    return placed


def unsupported_message(bad: list) -> str:
    """The compile error for [(node, reason)] of nodes neither the GPU nor the CPU can run."""
    parts = [f"{n.op} (operator #{n.index}): {r}" for n, r in bad[:8]]
    more = f" (and {len(bad) - 8} more)" if len(bad) > 8 else ""
    return f"unsupported model: {len(bad)} operator(s) cannot run on the GPU: " + "; ".join(parts) + more


def cluster(graph: Graph, cpu: dict) -> None:
    """Reorder graph.nodes so CPU nodes form as few contiguous runs as the dependencies allow."""
    if not cpu:
        return
    nodes, st = graph.nodes, graph.storage
    prod = {st(o): k for k, n in enumerate(nodes) for o in n.outputs if o >= 0}
    deps = [set() for _ in nodes]
    last_touch, last_control = {}, None
    for k, n in enumerate(nodes):
        for i in list(n.inputs) + n.epilogue.reads():
            if i >= 0 and st(i) in prod and prod[st(i)] < k:
                deps[k].add(prod[st(i)])
        if n.op in CONTROL_OPS:              # its subgraphs may touch any variable: an ordering barrier
            deps[k].update(last_touch.values())
            if last_control is not None:
                deps[k].add(last_control)
            last_control = k
            last_touch = {t: k for t in last_touch}
            continue
        if last_control is not None and any(t >= 0 and graph.t(st(t)).is_variable
                                            for t in set(n.inputs) | set(n.outputs)):
            deps[k].add(last_control)
        for t in set(n.inputs) | set(n.outputs):
            if t >= 0 and graph.t(st(t)).is_variable:
                if st(t) in last_touch:
                    deps[k].add(last_touch[st(t)])
                last_touch[st(t)] = k
    on_cpu = [id(n) in cpu for n in nodes]
    done, order = [False] * len(nodes), []
    side = on_cpu[0]
    while len(order) < len(nodes):
        progressed = False
        for k in range(len(nodes)):
            if not done[k] and on_cpu[k] == side and all(done[d] for d in deps[k]):
                done[k] = True
                order.append(k)
                progressed = True
        if not progressed:
            side = not side
    graph.nodes = [nodes[k] for k in order]


def _jsonable(v):
    if isinstance(v, (bytes, bytearray, memoryview)):
        return {"__bytes__": bytes(v).hex()}
    if isinstance(v, np.ndarray):
        return v.tolist()
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    return str(v)


def host_op(node: Node, graph: Graph) -> HostOp:
    attrs = {k: _jsonable(v) for k, v in node.attrs.items() if not k.startswith("_")}
    if node.epilogue.act is not None:            # the runtime's CPU kernels read these (runtime/cpu_ops.py)
        attrs["_act"] = node.epilogue.act
    fq = [graph.t(o).fake_quant for o in node.outputs]
    if any(q is not None for q in fq):
        attrs["_fq_out"] = [None if q is None else list(q) for q in fq]
    binds = [(f"in{j}", t) for j, t in enumerate(node.inputs) if t >= 0]
    binds = [(f"out{j}", t) for j, t in enumerate(node.outputs)] + binds
    return HostOp(node.op, list(node.inputs), list(node.outputs), json.dumps(attrs, sort_keys=True),
                  node.label(), binds)
