"""DEPTHWISE_POINTWISE: an internal op made by passes/dw_pointwise.py from a DEPTHWISE_CONV_2D (depth
multiplier 1) whose result only a 1x1, stride-1, ungrouped CONV_2D reads (MobileNet's depthwise-separable
pair).  One `gemm` dispatch (shaders/gemm.comp DWA=1): the pointwise GEMM computes each element of its
A operand as the depthwise output on load, so the depthwise result never reaches memory and costs no
dispatch.  Inputs: x, depthwise filter [1, KH, KW, C], depthwise bias (or -1), pointwise filter
[CO, 1, 1, C], pointwise bias (or -1).  attrs: `dw` (the depthwise op's options: strides, dilation,
padding), `dw_act` (its activation code), `dw_pad` (a PAD folded into it), `mid` (its output tensor,
for the window's shape); the node's own options and epilogue are the pointwise conv's."""
from __future__ import annotations

import numpy as np

from gpuc.compiler.ir import Epilogue, Node
from gpuc.compiler.ops import register
from gpuc.compiler.ops.conv import _check_conv, _relayout, _window, gemm_kernel
from gpuc.compiler.ops.util import checked


def parts(node: Node) -> tuple[Node, Node]:
    """The (depthwise, pointwise) nodes the fused node stands for, as the conv lowering sees them."""
    a = node.attrs
    x, dw_w, dw_b, pw_w, pw_b = node.inputs
    dw = Node("DEPTHWISE_CONV_2D", [x, dw_w] + ([dw_b] if dw_b >= 0 else []), [a["mid"]], dict(a["dw"]),
              index=node.index, epilogue=Epilogue(act=a["dw_act"], pad=a["dw_pad"]))
    pw = Node("CONV_2D", [a["mid"], pw_w] + ([pw_b] if pw_b >= 0 else []), list(node.outputs),
              {k: v for k, v in node.attrs.items() if k not in ("dw", "dw_act", "dw_pad", "mid")},
              index=node.index, epilogue=node.epilogue)
    return dw, pw


@checked
def _check(node, graph):
    dw, pw = parts(node)
    for n in (dw, pw):
        why = _check_conv(n, graph)
        if why:
            return f"{n.op}: {why}"
    f, g = graph.t(dw.inputs[1]), graph.t(pw.inputs[1])
    c = graph.t(dw.inputs[0]).shape[3]
    if f.shape[3] != c or g.shape[1:] != (1, 1, c):
        return f"filters {list(f.shape)} / {list(g.shape)} are not depthwise x1 then pointwise over {c} channels"
    return None


@register("DEPTHWISE_POINTWISE", check=_check, inputs=(5, 5), optional=(2, 4),
          summary="internal: depthwise conv computed inside the 1x1 conv that alone reads it (passes/dw_pointwise.py)")
def lower_dw_pointwise(node, graph):
    dw, pw = parts(node)
    f = graph.t(dw.inputs[1])
    kh, kw = f.shape[1], f.shape[2]
    geo, c, _ = _window(dw, graph, kh, kw)
    pgeo, _, co = _window(pw, graph, 1, 1)
    w_id = dw.inputs[1]
    if f.is_const and f.dtype != "float32":
        w_id = _relayout(graph, w_id, "f32", lambda: f.data)
    b_dw = dw.inputs[2] if len(dw.inputs) > 2 else None
    b_pw = pw.inputs[2] if len(pw.inputs) > 2 else None
    g = graph.t(pw.inputs[1])
    w_kn = np.asarray(g.data, np.float32).reshape(1, co, c).transpose(0, 2, 1) if g.is_const else None
    pw.inputs[0] = node.inputs[0]                   # A is computed from the depthwise input
    k = gemm_kernel(pw, graph, M=pgeo["N"] * pgeo["OH"] * pgeo["OW"], GN=co, GK=c, G=1, lda=c, ldc=co,
                    w_id=pw.inputs[1], w_kn=w_kn, bias=b_pw, conv=None,
                    dw=dict(w=w_id, b=b_dw, act=dw.epilogue.act, geo=dict(geo, KH=kh, KW=kw)))
    k.label = node.label()
    return [k]
