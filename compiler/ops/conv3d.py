"""CONV_3D as an implicit GEMM through the batch_matmul template (shaders/batch_matmul.comp, IM2COL):
out[m, co] = sum_k A[m, k] * filter[k, co] with m = (n, oz, oy, ox) over the NDHWC output and
k = (kd, kh, kw, ci), A gathered from the input (zero padding), the filter [KD, KH, KW, CI, CO]
(constant or runtime) read as it is stored.  Strides, dilations, SAME / VALID, optional bias, fused
activation as LiteRT's float kernel applies it (RELU / RELU_N1_TO_1 / RELU6 clamp; TANH and
SIGN_BIT leave the value unclamped)."""
from __future__ import annotations

import numpy as np

from gpuc.compiler.ops import NEUTRAL, SHAPE_ONLY, Why, declare, register
from gpuc.compiler.ops.batch_matmul import in_k_chunks, matmul_kernel
from gpuc.compiler.ops.util import PADDING_SAME, PADDING_VALID, act_code, check_act, checked, same_padding


def window_attrs(node) -> tuple:
    """(strides, dilations, padding) of a CONV_3D / CONV_3D_TRANSPOSE node; ValueError for values below 1."""
    a = node.attrs
    st = [int(a.get(k, 1) or 0) for k in ("stride_d", "stride_h", "stride_w")]
    dl = [int(a.get(k, 1) or 0) for k in ("dilation_dfactor", "dilation_hfactor", "dilation_wfactor")]
    if min(st + dl) < 1:
        raise ValueError(f"strides {st} and dilations {dl} must be >= 1")
    return st, dl, int(a.get("padding", 0))


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
    st, dl, pad = window_attrs(node)
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
          summary="NDHWC, strides, dilations, SAME/VALID, bias, fused activation (implicit GEMM)")
def lower_conv3d(node, graph):
    geo, ci, co, bias = _geometry(node, graph)
    y = graph.t(node.outputs[0])
    if y.size == 0:
        return []
    binds = [("out_", y.id), ("a", node.inputs[0]), ("b", _f32(graph, node.inputs[1]))]
    if bias is not None:
        binds.append(("bias", _f32(graph, bias)))
    m = y.size // co
    k = geo["KD"] * geo["KH"] * geo["KW"] * ci
    extra = {key: geo[key] for key in ("D", "H", "W", "OD", "OH", "OW", "KH", "KW", "SD", "SH", "SW", "DD", "DH",
                                       "DW", "PF", "PT", "PL")}
    extra.update(CI=ci, IM2COL=1, EPILOGUE=1, HAS_BIAS=int(bias is not None), ACT=act_code(node))
    return in_k_chunks(matmul_kernel(node, binds, m=m, n=co, k=k, a_sm=k, a_sk=1, b_sk=co, b_sn=1, extra=extra), graph)


# --- facts (compiler/ops/__init__.py FACT_FIELDS) ---------------------------------------------------
def _flops(node, graph):
    w = graph.t(node.inputs[1]).shape                  # [KD, KH, KW, CI, CO]
    out = graph.t(node.outputs[0]).size
    return 2 * out * w[0] * w[1] * w[2] * w[3] if len(w) == 5 else out


declare("CONV_3D", shape=Why("no shape rule: its output shape is the model's (no resize of 5-D inputs)"),
        exact=SHAPE_ONLY, sym_shape=Why("no dynamic-size rule yet"), batch="merge", pieces=Why("computes values"),
        fp16=NEUTRAL, in_place=False, templates=("gemm",), flops=_flops,
        cpu=Why("no CPU kernel: the GPU runs every float CONV_3D"))
