"""`--precision fp16`: which tensors are stored as float16.

Two steps.  `plan_fp16_storage` (a PIPELINE pass, so `--disable-pass plan_fp16_storage` turns fp16
off) runs on the fused graph and pins to fp32 every tensor whose values fp16 storage cannot be
trusted with; `assign_storage` runs on the lowered kernels and stores as float16 every other float32
tensor (activations and weights, including the weights lowerings re-laid out) whose every kernel
comes from a template that reads and writes through the storage macros (`// @storage16`, LD/ST in
shaders/common.glsl).  Loads widen to float and stores narrow, so every accumulation (convolutions,
matmuls, MEAN/SUM, SOFTMAX denominators, pooling) runs in fp32; only stored values are rounded.
A tensor touched by a template without fp16 support stays fp32: no conversion kernels are needed,
since each binding of an fp16-aware template has its own storage type.

A quantized model (a float program simulating int8, passes/quant.py) stays entirely fp32: its
results must stay within one quantization step of LiteRT's integer kernels.

Pinned to fp32:
- graph inputs and outputs (the user sees float32), variables;
- outputs of ops whose results routinely leave fp16's range (+-65504) even when their inputs are
  in range: SUM and PROD (accumulations), EXP, POW, SQUARE, SQUARED_DIFFERENCE, DIV, RSQRT ...;
- outputs of any op with such an input (transitively), unless the op bounds its output (LOGISTIC, TANH,
  SOFTMAX, comparisons, a fused RELU6 / RELU_N1_TO_1 / TANH / LOGISTIC epilogue): a large value
  stays in fp32 until it is squashed.
- constants with a value beyond fp16's range.
Kept fp32 although they could be fp16 (assign_storage, ops/gemm_coopmat.py storage_wishes): tensors
bound to a kernel that runs slower with float16 storage (the plain gemm, measured on the H100), unless
another kernel needs them in float16 (the coopmat variant's A and B).
"""
from __future__ import annotations

import numpy as np

from gpuc.compiler.shader_text import supports_storage16
from gpuc.compiler.ew_table import BOUNDED_ACTS
from gpuc.compiler.ir import GPU, Graph
from gpuc.compiler.ew_table import FUSIBLE
from gpuc.compiler.ops.gemm_candidates import plain_gemm
from gpuc.compiler.ops.gemm_coopmat import GEMM_OPS, storage_wishes
from gpuc.compiler.ops.util import act_code

FP16_MAX = 65504.0

from gpuc.compiler.ops import BOUNDED, UNSAFE, fact

# each op's fp16 fact (compiler/ops/): UNSAFE, its output can overflow fp16 although its inputs fit;
# BOUNDED, its output range is bounded whatever its input (stops the propagation of pinning)


def _bounded(node) -> bool:
    """The node's output range is bounded whatever its inputs: a bounding op, or a fused clamping
    activation (relu_n1_to_1, relu6, tanh, logistic) that is the last step of its epilogue."""
    if fact(node.op, "fp16") == BOUNDED:
        return True
    return node.epilogue.residual is None and act_code(node) in BOUNDED_ACTS


def plan_fp16_storage(graph: Graph) -> None:
    """With graph.precision == "fp16": record the tensors that must stay fp32 (graph.fp32_pinned)."""
    if graph.precision != "fp16":
        return
    if any(t.quant is not None and not t.is_const and t.dtype == "float32" for t in graph.tensors):
        return          # simulated integer program: its 1-step guarantee needs exact fp32 values
    st = graph.storage
    wide = set()                    # values that may exceed fp16's range
    for n in graph.nodes:
        if fact(n.op, "fp16") == UNSAFE or (not _bounded(n) and any(i >= 0 and st(i) in wide for i in n.inputs)):
            wide.update(st(o) for o in n.outputs)
    pinned = wide | {st(t) for t in graph.inputs + graph.outputs}
    pinned |= {t.id for t in graph.tensors if t.is_variable}
    graph.fp32_pinned = pinned | plain_gemm_values(graph)


def plain_gemm_values(graph: Graph) -> set:
    """Activations of gemms that get no coopmat variant (ops/gemm_candidates.py plain_gemm), which run
    slower on float16 tensors (measured on the H100): their A, runtime B, residual and result, and
    every value elementwise ops make from that result (what fuse_gemm_epilogue may fold into the
    gemm: planned here, before fusion, so a folded chain rounds nothing to float16 that the unfused
    program would keep in float32).  Storage roots.  Except a value that a gemm with coopmat variants
    reads as its A (a regnet's squeeze-excited tensor, after a plain grouped convolution, into a 1x1
    convolution): in float32 it would keep that gemm off the tensor cores (on the H100 a batch-32
    1568 x 888 x 888 one ran 122 us on the plain kernel)."""
    st = graph.storage
    readers: dict[int, list] = {}
    for n in graph.nodes:
        for i in n.inputs:
            if i >= 0:
                readers.setdefault(st(i), []).append(n)

    def tensor_core_a(r: int) -> bool:          # the A of a gemm with coopmat variants (they need it in float16)
        return any(c.op in GEMM_OPS and c.inputs and st(c.inputs[0]) == r and not plain_gemm(c, graph)
                   for c in readers.get(r, []))

    out, todo = set(), []
    for n in graph.nodes:
        if plain_gemm(n, graph):
            acts = [i for i in list(n.inputs[:2]) + n.epilogue.reads() if i >= 0 and not graph.t(i).is_const]
            out.update(st(i) for i in acts if not tensor_core_a(st(i)))
            todo += [st(o) for o in n.outputs]
    while todo:
        r = todo.pop()
        if r in out or tensor_core_a(r):
            continue
        out.add(r)
        todo += [st(o) for c in readers.get(r, []) if c.op in FUSIBLE for o in c.outputs]
    return out


def assign_storage(graph: Graph, kernels: list) -> int:
    """Store as float16 every float32 tensor the plan allows whose kernels all support it.
    Changes tensor dtypes (and constant data) in place, after lowering; returns how many tensors."""
    if graph.fp32_pinned is None:
        return 0
    st = graph.storage
    ok: dict[int, bool] = {}
    keep32, need16 = set(), set()
    for k in kernels:
        fits = supports_storage16(k.template)
        for _, t in k.bindings:
            r = st(t)
            ok[r] = ok.get(r, True) and fits
        fp32, fp16 = storage_wishes(k)
        keep32.update(st(t) for n, t in k.bindings if n in fp32)
        need16.update(st(t) for n, t in k.bindings if n in fp16)
    for r in keep32 - need16:          # no kernel reading or writing it gains from float16
        ok[r] = False
    members: dict[int, list[int]] = {}
    for view in graph.aliases:
        members.setdefault(st(view), []).append(view)
    pinned = {st(t) for t in graph.fp32_pinned}
    done = 0
    for root, fits in ok.items():
        t = graph.t(root)
        group = [root] + members.get(root, [])
        if not fits or root in pinned or t.dtype != "float32" or any(graph.t(v).dtype != "float32" for v in group):
            continue
        if t.is_const:
            if not np.all(np.abs(t.data) <= FP16_MAX):
                continue
            t.data = np.ascontiguousarray(t.data.astype(np.float16))
        for v in group:
            graph.t(v).dtype = "float16"
        done += 1
    return done


def store_fp16(graph: Graph, kernels: list) -> int:
    """assign_storage for a lowered program: host steps and jumps read and write float32 (or their own
    dtype), so their tensors stay fp32.  Returns how many tensors are stored as float16."""
    if graph.fp32_pinned is not None:
        graph.fp32_pinned = set(graph.fp32_pinned) | {t for k in kernels if k.kind != GPU for _, t in k.bindings}
    return assign_storage(graph, [k for k in kernels if k.kind == GPU])
