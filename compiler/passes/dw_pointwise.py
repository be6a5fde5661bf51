"""fuse_depthwise_pointwise: a DEPTHWISE_CONV_2D whose result only a pointwise CONV_2D reads becomes
one DEPTHWISE_POINTWISE node (ops/dw_pointwise.py): the pointwise GEMM computes the depthwise output
as it loads its A tiles, so the pair costs one dispatch and the depthwise result no memory (MobileNet's
depthwise-separable blocks: 17 of MobileNetV2's 52 dispatches).

Fused when all of these hold:
- the depthwise conv has depth multiplier 1, no residual or elementwise chain of its own (an activation
  and a folded PAD are kept), and both convs pass their own checks;
- its result is read by the pointwise conv only (as its input 0), is no graph output or variable,
  and has no view another node reads;
- the pointwise conv is 1x1, stride 1, ungrouped, without a folded PAD;
- every tensor involved is float32 without quantization or fake quantization, and the program is fp32
  (under --precision fp16 the cooperative-matrix variant stages raw fp16 A tiles; it has no such path).
Runs after the epilogue fusions (the pointwise conv keeps its residual ADD and activations) and before
plan_fp16_storage and fuse_gemm_epilogue (which treats the fused node as a gemm host).
"""
from __future__ import annotations

from gpuc.compiler import ops
from gpuc.compiler.ir import Graph, Node
from gpuc.compiler.ops.util import act_code


def _plain(graph: Graph, tid: int) -> bool:
    t = graph.t(tid)
    return t.dtype == "float32" and t.quant is None and t.fake_quant is None and not t.is_variable


def _pair(graph: Graph, d: Node, users: dict) -> Node | None:
    """The pointwise conv fusable with depthwise node `d`, or None."""
    if d.op != "DEPTHWISE_CONV_2D" or len(d.outputs) != 1 or len(d.inputs) < 2 or min(d.inputs[:2]) < 0:
        return None
    mid = d.outputs[0]
    if graph.storage(mid) != mid or mid in graph.outputs or any(graph.storage(a) == mid for a in graph.aliases):
        return None
    readers = users.get(mid, [])
    if len(readers) != 1:
        return None
    p = readers[0]
    if p.op != "CONV_2D" or len(p.outputs) != 1 or len(p.inputs) < 2 or p.inputs[0] != mid or mid in p.inputs[1:] \
            or mid in p.epilogue.reads():
        return None
    x, f, g = graph.t(d.inputs[0]), graph.t(d.inputs[1]), graph.t(p.inputs[1])
    if len(x.shape) != 4 or len(f.shape) != 4 or len(g.shape) != 4 or f.shape[3] != x.shape[3]:
        return None                              # depth multiplier 1 only
    if g.shape[1:] != (1, 1, x.shape[3]) or p.epilogue.pad is not None:
        return None
    a = p.attrs
    if int(a.get("stride_h", 1) or 1) != 1 or int(a.get("stride_w", 1) or 1) != 1:
        return None
    e = d.epilogue
    if e.residual is not None or e.chain or e.act2 or e.fq_mid is not None:
        return None
    tensors = [t for t in list(d.inputs) + list(p.inputs) + [mid, p.outputs[0]] if t >= 0]
    if not all(_plain(graph, t) for t in tensors) or any(graph.t(t).size == 0 for t in tensors):
        return None
    if ops.unsupported_reason(d, graph) or ops.unsupported_reason(p, graph):
        return None
    return p


def fuse_depthwise_pointwise(graph: Graph) -> None:
    if graph.precision != "fp32":
        return
    users = graph.consumers()
    for d in list(graph.nodes):
        p = _pair(graph, d, users)
        if p is None:
            continue
        ins = [d.inputs[0], d.inputs[1], d.inputs[2] if len(d.inputs) > 2 else -1,
               p.inputs[1], p.inputs[2] if len(p.inputs) > 2 else -1]
        attrs = dict(p.attrs, dw=dict(d.attrs), dw_act=act_code(d), dw_pad=d.epilogue.pad, mid=d.outputs[0])
        fused = Node("DEPTHWISE_POINTWISE", ins, list(p.outputs), attrs, p.version, p.index, p.epilogue)
        if ops.unsupported_reason(fused, graph):
            continue
        graph.nodes = [fused if n is p else n for n in graph.nodes if n is not d]
        users = graph.consumers()
