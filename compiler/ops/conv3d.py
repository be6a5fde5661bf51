"""CONV_3D (shaders/conv3d.comp): NDHWC input, filter [KD, KH, KW, CI, CO] (constant or runtime),
4 output channels per invocation (vec4 weights) when CO % 4 == 0,
strides, dilations, SAME / VALID, optional bias, fused activation as LiteRT's float kernel applies
it (RELU / RELU_N1_TO_1 / RELU6 clamp; TANH and SIGN_BIT leave the value unclamped)."""
from __future__ import annotations

import numpy as np

from gpuc.compiler.codegen.kernel import Kernel
from gpuc.compiler.ops import register
from gpuc.compiler.ops.util import PADDING_SAME, PADDING_VALID, check_act, checked, epilogue, same_padding

VARIANTS = {
    "conv3d": (dict(D=4, H=5, W=6, CI=3, OD=2, OH=3, OW=3, CO=4, KD=2, KH=3, KW=3, SD=2, SH=2, SW=2, DD=1, DH=1,
                    DW=1, PF=0, PT=1, PL=1, CG=1), {"HAS_BIAS": [0, 1], "ACT": [0, 1, 3], "VEC": [0, 1]},
               ["out_", "x", "w", "bias"], {},
               lambda d: dict(vec4=("out_", "w", "bias") if d["VEC"] else ())),
}


def _geometry(node, graph):
    x, f, y = graph.t(node.inputs[0]), graph.t(node.inputs[1]), graph.t(node.outputs[0])
    if len(x.shape) != 5 or len(f.shape) != 5 or len(y.shape) != 5:
        raise ValueError(f"input, filter and output must be 5-D (got {list(x.shape)}, {list(f.shape)}, "
                         f"{list(y.shape)})")
    for t in (x, f, y):
        if t.dtype != "float32" and not (t.is_const and np.dtype(t.dtype).kind == "f"):
            raise ValueError(f"tensor {t.name!r} has dtype {t.dtype} (float32 only)")
    n, d, h, w, ci = x.shape
    kd, kh, kw, fci, co = f.shape
    if min(kd, kh, kw, ci, co) < 1:
        raise ValueError(f"filter {list(f.shape)} has an empty dimension")
    if fci != ci or y.shape[4] != co or y.shape[0] != n:
        raise ValueError(f"filter {list(f.shape)} does not fit input {list(x.shape)} -> output {list(y.shape)}")
    a = node.attrs
    st = [int(a.get(k, 1) or 0) for k in ("stride_d", "stride_h", "stride_w")]
    dl = [int(a.get(k, 1) or 0) for k in ("dilation_dfactor", "dilation_hfactor", "dilation_wfactor")]
    if min(st + dl) < 1:
        raise ValueError(f"strides {st} and dilations {dl} must be >= 1")
    pad = int(a.get("padding", 0))
    if pad not in (PADDING_SAME, PADDING_VALID):
        raise ValueError(f"padding {pad} not supported")
    geo = {}
    for name, size_in, k, s, dil, out in (("D", d, kd, st[0], dl[0], y.shape[1]), ("H", h, kh, st[1], dl[1], y.shape[2]),
                                          ("W", w, kw, st[2], dl[2], y.shape[3])):
        if pad == PADDING_SAME:
            want = -(-size_in // s)
        else:                                 # LiteRT: (size + stride - effective filter) / stride, C division
            num = size_in + s - ((k - 1) * dil + 1)
            want = num // s if num >= 0 else -(-num // s)
        if out != want or want < 0:
            raise ValueError(f"output {list(y.shape)} does not match input {list(x.shape)} with filter "
                             f"{list(f.shape)}, strides {st}, dilations {dl}, {'SAME' if pad == 0 else 'VALID'}")
        geo[name] = size_in
        geo["O" + name] = out
        geo["K" + name] = k
        geo["S" + name] = s
        geo["D" + name] = dil
        geo[{"D": "PF", "H": "PT", "W": "PL"}[name]] = same_padding(size_in, k, s, dil, out, pad)
    bias = None
    if len(node.inputs) > 2 and node.inputs[2] >= 0:
        bias = node.inputs[2]
        if graph.t(bias).size != co:
            raise ValueError(f"bias {graph.t(bias).name!r} has {graph.t(bias).size} elements, expected {co}")
    return geo, ci, co, bias


@checked
def _check(node, graph):
    _geometry(node, graph)
    return check_act(node, graph)


def _f32(graph, tid):
    t = graph.t(tid)
    if t.is_const and t.dtype != "float32":
        return graph.add_const(f"{t.name}/f32", np.asarray(t.data, np.float32))
    return tid


@register("CONV_3D", check=_check, inputs=(2, 3), optional=(2,),
          summary="NDHWC, strides, dilations, SAME/VALID, bias, fused activation")
def lower_conv3d(node, graph):
    geo, ci, co, bias = _geometry(node, graph)
    y = graph.t(node.outputs[0])
    if y.size == 0:
        return []
    binds = [("out_", y.id), ("x", node.inputs[0]), ("w", _f32(graph, node.inputs[1]))]
    if bias is not None:
        binds.append(("bias", _f32(graph, bias)))
    vec = co % 4 == 0
    defines = dict(geo, CI=ci, CO=co, CG=co // 4, VEC=int(vec), HAS_BIAS=int(bias is not None),
                   **epilogue(node, binds))
    return [Kernel("conv3d", binds, y.size // 4 if vec else y.size, defines, node.label(),
                   vec4=("out_", "w", "bias") if vec else ())]
