"""fuse_gemm_epilogue: a GEMM-like node (FULLY_CONNECTED, CONV_2D, BATCH_MATMUL, DEPTHWISE_CONV_2D: the
gemm, batch_matmul and depthwise templates) absorbs the elementwise work that alone reads its result, as a chain computed
per output element in its epilogue (Node.epilogue.chain; ops/epi_chain.py, shaders/epi_chain.glsl).
So GELU in any form (the builtin, approximate or not, or decomposed into MUL / ADD / TANH / POW ...
steps), a constant bias or positional ADD, a scale, a residual or mask ADD and any activation after
an FC / conv / matmul cost no dispatch and no memory.

Runs after fuse_elementwise and fuse_reduce_prologue, so the consumer is one elementwise node: a
FUSED_ELEMENTWISE chain or a single fusible op of compiler/ew_table.py.  Fused when all of these hold:
- the producer's result (with its RESHAPE / SQUEEZE / EXPAND_DIMS views) is read by that one node
  only, and none of them is a graph output or a variable;
- the consumer reads it with as many elements as its own output has (one value per output element,
  so a view's linear index, or [8, 49, 49] broadcast to [1, 8, 49, 49], is the producer's);
- every tensor involved is float32 without fake quantization (quantized programs keep their steps);
- the chain's other inputs are float32 tensors that broadcast to their step's shape (at most
  MAX_CHAIN_INPUTS), scalar constants are inlined as in FUSED_ELEMENTWISE;
- the producer runs on the GPU (its check passes);
- under --precision fp16, no costly step (ew_table.py) follows a gemm that gets the cooperative-matrix
  variant (_tensor_core_costly).
Where a chain input is made after the producer, the producer moves to the consumer's place (it has
no other reader).  The pass repeats, so a chain grows across views (a matmul, RESHAPE, ADD, RESHAPE,
ADD, as converters write attention biases and masks).

Results equal the unfused program's: the same per-op formulas, v passed through ew_keep as its store
and load were; under --precision fp16 (after plan_fp16_storage) a value the unfused program stored as
float16 is rounded to float16 where it was stored.
"""
from __future__ import annotations

import numpy as np

from gpuc.compiler import ops
from gpuc.compiler.ir import Graph, Node
from gpuc.compiler.ew_table import COSTLY
from gpuc.compiler.ops.epi_chain import chain_reason
from gpuc.compiler.ops.gemm_coopmat import gemm_shape, worthwhile
from gpuc.compiler.passes.ew_fusion import FUSED_OP, chain_step, external_inputs, fusible
from gpuc.compiler.pattern import Op, index_of, plain_f32, rewrite

HOSTS = {"FULLY_CONNECTED", "CONV_2D", "BATCH_MATMUL", "DEPTHWISE_CONV_2D"}


def _consumer_steps(graph: Graph, c: Node):
    """(steps, external inputs, op names) of elementwise node `c` in ops/ew_fused.py's format, or None."""
    if c.op == FUSED_OP:
        return [dict(s) for s in c.attrs["steps"]], list(c.inputs), list(c.attrs.get("fused", [c.op]))
    if not fusible(graph, c) or c.op == "CAST":
        return None
    ext = external_inputs(graph, [c])
    args = [("x", ext.index(i)) if i in ext else ("c", float(np.asarray(graph.t(i).data).reshape(-1)[0]))
            for i in c.inputs]
    return [dict(chain_step(c), args=args)], ext, [c.op]


def _plain(graph: Graph, tid: int) -> bool:
    return plain_f32(graph.t(tid), variables=False)


def _tensor_core_costly(graph: Graph, p: Node, steps: list) -> bool:
    """A costly step (compiler/ew_table.py: exp, tanh, erf ... per element) after a gemm that gets the
    cooperative-matrix variant (--precision fp16, ops/gemm_coopmat.py worthwhile): it stays a kernel of
    its own.  That gemm runs one or two workgroups per SM, and a chain in its epilogue serialises behind
    the matrix work: on the H100 (benchmarks/archive/coopmat_epilogue_ab.py, 2026-11-24) a 7x7-depthwise
    CNN's batch-32 FC + GELU layers took 356 us fused against about 280 for the FC and a GELU kernel; the
    whole run 6.09 -> 5.76 ms, a windowed-attention transformer's 7.38 -> 7.14."""
    if graph.precision != "fp16" or not any(s["op"] in COSTLY for s in steps):
        return False
    shape = gemm_shape(p, graph)
    return shape is not None and worthwhile(*shape[:4], gather=shape[4])


def _try(graph: Graph, match) -> bool:
    p, readers, prod = match["p"], match.matcher.users, match.matcher.prod
    tid = p.outputs[0]
    if graph.storage(tid) != tid or not _plain(graph, tid) or graph.t(tid).size == 0:
        return False
    views = {t for t in [tid, *graph.aliases] if graph.storage(t) == tid}
    users = {id(n): n for v in views for n in readers.get(v, [])}
    if len(users) != 1 or views & set(graph.outputs):
        return False
    c = next(iter(users.values()))
    if c is p or len(c.outputs) != 1 or c.outputs[0] < 0 or c.epilogue.reads():
        return False
    got = _consumer_steps(graph, c)
    if got is None:
        return False
    steps, ext, names = got
    y = graph.t(c.outputs[0])
    if not _plain(graph, y.id) or y.size != graph.t(tid).size or any(s.get("fq") is not None for s in steps):
        return False
    if any(i in views and graph.t(i).size != y.size for i in ext):
        return False                         # read broadcast: not one value per output element
    if any(i not in views and not _plain(graph, i) and not graph.t(i).is_const for i in ext):
        return False
    ep, pinned = p.epilogue, graph.fp32_pinned
    # operands: ("x", 0) is the value so far (the producer's result, or the previous chain's last step)
    old, inputs, remap = [dict(s) for s in ep.chain or []], list(ep.chain_inputs), {}
    for k, i in enumerate(ext):
        if i in views:
            remap[k] = ("t", len(old) - 1) if old else ("x", 0)
        else:
            if (i, tuple(y.shape)) not in inputs:
                inputs.append((i, tuple(y.shape)))
            remap[k] = ("x", inputs.index((i, tuple(y.shape))) + 1)
    new = [dict(s, args=[remap[int(v)] if kind == "x" else (kind, v + len(old)) if kind == "t" else (kind, v)
                         for kind, v in s["args"]]) for s in steps]
    r16 = pinned is not None and tid not in pinned      # the unfused program stored the value so far as float16
    if old:
        old[-1]["r16"] = r16
    chain = old + new
    same_shape = tuple(y.shape) == tuple(graph.t(tid).shape)
    if not same_shape and pinned is not None and y.id not in pinned and tid in pinned:
        chain[-1] = dict(chain[-1], r16=True)           # stored in the producer's fp32 tensor: round as y's store
    if chain_reason(graph, graph.t(tid).size, chain, inputs) is not None or _tensor_core_costly(graph, p, chain):
        return False
    # the producer must run after every chain input is made: else it moves to the consumer's place
    late = any(index_of(graph.nodes, prod[st]) > index_of(graph.nodes, p) for i, _ in inputs
               for st in [graph.storage(i)] if st in prod)      # (a view: its base's producer)
    if late and any(i >= 0 and graph.t(i).is_variable for i in p.inputs):
        return False
    saved = (ep.chain, ep.chain_inputs, ep.chain_r16, list(p.outputs))
    ep.chain, ep.chain_inputs, ep.chain_r16 = chain, inputs, ep.chain_r16 if old else r16
    if same_shape:
        p.outputs = [y.id]
    if ops.unsupported_reason(p, graph) is not None:
        ep.chain, ep.chain_inputs, ep.chain_r16, p.outputs = saved
        return False
    if not same_shape:                       # the producer keeps its tensor; the chain's output is a view of it
        if pinned is not None and y.id in pinned:
            pinned.add(tid)
        graph.aliases[y.id] = tid
    p.attrs["fused"] = p.attrs.get("fused", []) + names
    if late:
        del graph.nodes[index_of(graph.nodes, p)]
        graph.nodes[index_of(graph.nodes, c)] = p
    else:
        del graph.nodes[index_of(graph.nodes, c)]
    return True


HOST = Op(HOSTS, name="p", where=lambda m, n: len(n.outputs) == 1 and n.outputs[0] >= 0)


def fuse_gemm_epilogue(graph: Graph) -> None:
    rewrite(graph, [(HOST, _try)], restart=True)
