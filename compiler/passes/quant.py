"""Full-integer quantized models run as float32 programs with *simulated* quantization.

What LiteRT's GPU delegate does: constants are dequantized once, at compile time; activations are
float32 inside the program, and every op whose output tensor is quantized rounds its result to that
tensor's grid ("fake quant"): q = clamp(round_half_away(v / scale) + zp, qmin, qmax), v = (q - zp) *
scale.  The record is `Tensor.fake_quant = (scale, zero_point, qmin, qmax)`; lowering (prepare.py
Lowering.lower) turns it into the FQ epilogue defines (shaders/common.glsl gpuc_act).

Graph inputs / outputs keep their int8 / uint8 dtype: a DEQUANTIZE node after each quantized input
and a QUANTIZE node before each quantized output convert at the boundary (ops/quantize.py).
QUANTIZE / DEQUANTIZE inside the model become float copies (with fake quant where the output is
quantized).  int16 activations and per-channel activations are left alone (still unsupported).
"""
from __future__ import annotations

import numpy as np

from gpuc.compiler.codegen.kernel import Kernel
from gpuc.compiler.ir import Graph, Node
from gpuc.compiler.ops import fact, gather, gemm_q8, int8_common
from gpuc.compiler.passes.fold import dequantize
from gpuc.errors import UnsupportedError

QRANGE = {"int8": (-128, 127), "uint8": (0, 255)}
# ops that see the raw integer values of their inputs (not the real values): left unsupported
RAW_OPS = {"CAST", "BITCAST", "LSH_PROJECTION"}   # (LSH_PROJECTION hashes the raw bytes)
# a node's own output grid is recorded before fusion in Node.epilogue.fq_mid (a fused residual ADD needs
# both roundings); the requantization rounding of LiteRT's gemm kernels in Node.epilogue.fq_rs
RS_OPS = {"CONV_2D": 0, "FULLY_CONNECTED": 0, "DEPTHWISE_CONV_2D": 64}   # op -> rounding mode offset


def _quantized_activation(graph: Graph, tid: int) -> bool:
    t = graph.t(tid)
    return (not t.is_const and t.dtype in QRANGE and t.quant is not None and t.quant.scale.size == 1
            and float(t.quant.scale[0]) > 0)


def fq_params(t) -> tuple:
    lo, hi = QRANGE[t.dtype]
    return (float(np.float32(t.quant.scale[0])), int(t.quant.zero_point[0]) if t.quant.zero_point.size else 0, lo, hi)


def _dequantize_const(t) -> None:
    t.data = dequantize(t)
    t.dequantized = t.dtype
    t.dtype = "float32"
    t.quant = None


def native_int8(graph: Graph) -> bool:
    """Rewrite a full-integer int8 model's ops into their int8 forms (ops/int8_common.py FORMS) when every
    op touching a quantized activation has one (or takes int8 tensors as they are: QUANTIZE at a float
    input, DEQUANTIZE at a float output); True when it did.  Otherwise nothing changes and the model runs
    as a float program with simulated quantization."""
    if graph.dynamic_dims:
        return False
    acts = {tid for tid in range(len(graph.tensors)) if _quantized_activation(graph, tid)}
    if not acts or any(graph.t(t).dtype != "int8" for t in acts):
        return False
    rewrite, moves = [], []
    for n in graph.nodes:
        touched = [t for t in list(n.inputs) + list(n.outputs) if t >= 0 and t in acts]
        if not touched:
            continue
        if _int8_view(n, graph):
            continue
        if n.op in int8_common.MOVES:
            if int8_common.MOVES[n.op][0](n, graph) is not None:
                return False
            moves.append(n)
            continue
        if n.op in int8_common.BOUNDARY:
            if int8_common.BOUNDARY[n.op](n, graph) is not None:
                return False
            continue
        form = int8_common.FORMS.get(n.op)
        if form is None or n.epilogue.reads() or int8_common.CHECKS[form](n, graph) is not None:
            return False
        rewrite.append((n, form))
    if not rewrite:
        return False
    for n, form in rewrite:
        n.op = form
    for n in moves:
        int8_common.MOVES[n.op][1](n, graph)
    for fold in int8_common.FOLDS:
        fold(graph)
    for n, form in rewrite:
        if form in int8_common.WIDEN:
            int8_common.WIDEN[form](n, graph)
    return True


def _int8_view(n: Node, graph: Graph) -> bool:
    """A view op (RESHAPE, SQUEEZE, EXPAND_DIMS: ops.fact pieces "reshape") of a runtime int8 tensor: it
    stays, and reshape_as_view makes its output a view of its input (a quantized reshape copies bytes)."""
    if fact(n.op, "pieces") != "reshape" or len(n.outputs) != 1 or not n.inputs or n.inputs[0] < 0:
        return False
    x, y = graph.t(n.inputs[0]), graph.t(n.outputs[0])
    return not x.is_const and x.dtype == y.dtype == "int8" and x.size == y.size


def simulate_quantization(graph: Graph) -> None:
    for n in graph.nodes:                   # int8 rules LiteRT's kernels enforce (ops' int8_common.REFUSALS)
        rule = int8_common.REFUSALS.get(n.op)
        why = rule(n, graph) if rule is not None else None
        if why:
            raise UnsupportedError(f"{n.label()}: {why}")
    native = native_int8(graph)
    users = graph.consumers()
    prod = graph.producers()
    touched = {tid for n in graph.nodes if n.op in RAW_OPS for tid in list(n.inputs) + list(n.outputs) if tid >= 0}
    cands = [tid for tid in range(len(graph.tensors))
             if _quantized_activation(graph, tid) and tid not in touched
             and (tid in users or tid in prod or tid in graph.inputs or tid in graph.outputs)]
    # LiteRT's gemm-based kernels requantize with a double rounding whose first step depends on the
    # multiplier's right shift (median over channels for per-channel weights)
    for n in graph.nodes:
        if n.op in RS_OPS and len(n.inputs) > 1 and n.inputs[1] >= 0 and len(n.outputs) == 1:
            x, w, y = graph.t(n.inputs[0]), graph.t(n.inputs[1]), graph.t(n.outputs[0])
            if all(t.quant is not None and t.quant.scale.size for t in (x, w, y)) and y.dtype in QRANGE:
                m = (float(x.quant.scale[0]) * w.quant.scale.astype(np.float64)) / float(y.quant.scale[0])
                rs = -np.frexp(m)[1]
                n.epilogue.fq_rs = max(int(np.median(rs)), 0) + RS_OPS[n.op]
    # constants read by float kernels: dequantize once.  This is also all a dynamic-range model needs
    # (int8 weights, float activations: FULLY_CONNECTED / CONV_2D / DEPTHWISE_CONV_2D / BATCH_MATMUL /
    # EMBEDDING_LOOKUP ...): gpuc computes with the dequantized weights in float, as LiteRT's
    # float-dequantized reference does, where LiteRT's hybrid kernels also quantize the float input on the fly
    # (see tests/ops/test_dynamic_range.py for the tolerance)
    # int8 FULLY_CONNECTED weights that the weight-only int8 kernel takes (ops/gemm_q8.py keeps_int8) stay
    # int8: the kernel quantizes the float input per row as LiteRT's default (XNNPACK) path does; any other
    # reader of the same weights gets a float32 copy; so do int8 embedding tables (ops/gather.py keeps_int8_table:
    # the gather dequantizes the rows it reads)
    kept = set()
    if native:             # int8 ops read their int8 constants as they are; float ops get dequantized ones
        cands = []
    for n in graph.nodes:
        if native and n.op in int8_common.CHECKS:
            continue
        if not cands and (gemm_q8.keeps_int8(n, graph) or gather.keeps_int8_table(n, graph)):
            n.attrs[gemm_q8.ATTR] = True
            kept.add(n.inputs[1])
    for n in graph.nodes:
        if n.op in RAW_OPS or n.attrs.get(gemm_q8.ATTR) or (native and n.op in int8_common.CHECKS):
            continue
        n.inputs = [gemm_q8.dequantized_weights(graph, i) if i in kept else i for i in n.inputs]
        for tid in n.inputs:
            if tid < 0:
                continue
            t = graph.t(tid)
            if t.is_const and t.quant is not None and t.quant.scale.size > 0 \
                    and t.dtype in ("int8", "uint8", "int16", "int32") and t.data.size:
                _dequantize_const(t)
    if not cands:       # float activations (dynamic-range "hybrid" models): only the weights were quantized
        return
    inputs, outputs = set(graph.inputs), set(graph.outputs)
    new_nodes_front, new_nodes_back = [], []
    for tid in cands:
        t = graph.t(tid)
        fq = fq_params(t)
        if tid in inputs:
            # keep the int8 graph input; consumers read a float copy of its real values
            f = graph.add_tensor(f"{t.name}#real", t.shape, "float32")
            for n in users.get(tid, []):
                n.inputs = [f if i == tid else i for i in n.inputs]
            new_nodes_front.append(Node("DEQUANTIZE", [tid], [f], attrs={"boundary": True}))
            continue
        if tid in outputs:
            # producer writes a fake-quantized float tensor; a QUANTIZE node stores the int8 output
            f = graph.add_tensor(f"{t.name}#real", t.shape, "float32")
            graph.t(f).fake_quant = fq
            p = prod.get(tid)
            if p is not None:
                p.outputs = [f if o == tid else o for o in p.outputs]
            for n in users.get(tid, []):
                n.inputs = [f if i == tid else i for i in n.inputs]
            for a, b in list(graph.aliases.items()):
                if b == tid:
                    graph.aliases[a] = f
            new_nodes_back.append(Node("QUANTIZE", [f], [tid], attrs={"boundary": True}))
            continue
        t.dtype = "float32"
        t.fake_quant = fq
    graph.nodes = new_nodes_front + graph.nodes + new_nodes_back
    # record each producer's own output grid before fusion passes rewrite its outputs
    for n in graph.nodes:
        if len(n.outputs) == 1 and n.outputs[0] >= 0:
            fq = graph.t(n.outputs[0]).fake_quant
            if fq is not None:
                n.epilogue.fq_mid = fq


# templates whose every output write goes through gpuc_act (shaders/common.glsl applies FQ there)
FQ_TEMPLATES = {"gemm", "depthwise", "binary_math", "pool2d", "transpose_conv", "copy_nd", "unary_math", "ew_fused"}


def _fq_defines(prefix: str, fq) -> dict:
    scale, zp, lo, hi = fq
    return {prefix: 1, f"{prefix}_SCALE": float(scale), f"{prefix}_ZP": int(zp), f"{prefix}_MIN": int(lo),
            f"{prefix}_MAX": int(hi)}


def apply_fake_quant(node, graph: Graph, ks: list) -> list:
    """Round every fake-quantized output of `node` to its grid (lower_graph calls this on each
    node's kernels): in the epilogue of templates that call gpuc_act, else by an extra elementwise
    kernel that reads the node's result from a fresh float tensor."""
    def fq_of(tid):
        return graph.t(tid).fake_quant or graph.t(graph.storage(tid)).fake_quant
    outs = {o for o in node.outputs if o >= 0 and fq_of(o) is not None}
    if not outs:
        return ks
    st = graph.storage
    extra = []
    for o in outs:
        writers = [k for k in ks if k.bindings and st(k.bindings[0][1]) == st(o)]
        if writers and all(k.template in FQ_TEMPLATES for k in writers):
            rs = node.epilogue.fq_rs
            for k in writers:
                k.defines.update(_fq_defines("FQ", fq_of(k.bindings[0][1])))
                if k.defines.get("RESIDUAL"):
                    if node.epilogue.fq_mid is not None:
                        k.defines.update(_fq_defines("FQM", node.epilogue.fq_mid))
                        if rs is not None:
                            k.defines["FQM_RS"] = rs
                elif rs is not None:
                    k.defines["FQ_RS"] = rs
            continue
        t = graph.t(o)
        tmp = graph.add_tensor(f"{t.name}#prequant", t.shape, "float32")
        for k in ks:
            k.bindings = [(name, tmp if st(tid) == st(o) else tid) for name, tid in k.bindings]
        extra.append(Kernel("unary_math", [("out_", o), ("x", tmp)], t.size, _fq_defines("FQ", fq_of(o)),
                            node.label()))                      # (a copy, rounded by gpuc_act)
    return ks + extra
