"""TRANSPOSE_CONV and MediaPipe's CUSTOM:Convolution2DTransposeBias, through shaders/transpose_conv.comp.

Both compute TFLite's reference scatter  out[n, iy*SH - PT + ky, ix*SW - PL + kx, o] +=
x[n, iy, ix, i] * w[o, ky, kx, i]  (weights OHWI), then + bias[o], then the activation; the shader
gathers instead (one invocation per output element, visiting only the taps that land on it).

TRANSPOSE_CONV: inputs (output_shape const int32[4], weights, input, optional bias).  Padding as in
LiteRT's transpose_conv.cc: the conv that maps the output back onto the input decides it
(ComputePaddingHeightWidth on the output size; the leading pad is half the total, rounded down),
and LiteRT insists that conv's size equals the input's.  The fused activation is LiteRT's clamp:
RELU / RELU_N1_TO_1 / RELU6 apply, TANH and SIGN_BIT are ignored (CalculateActivationRange).

Convolution2DTransposeBias (mediapipe/util/tflite/operations/transpose_conv_bias.cc): inputs
(input, weights, bias); custom_options = TfLiteTransposeConvParams {int32 padding (1 SAME,
2 VALID), int32 stride_width, int32 stride_height}.  Output size s*(in-1) + k - pad_total with
pad_total = max(0, k - (in-1) % s - 1) for SAME (0 for VALID), leading pad pad_total / 2; no
activation.
"""
from __future__ import annotations

import struct

import numpy as np

from gpuc.compiler.codegen.kernel import Kernel
from gpuc.compiler.ew_table import ACTS
from gpuc.compiler.ops import NEUTRAL, SHAPE_ONLY, Why, declare, register, template
from gpuc.compiler.ops.util import PADDING_SAME, PADDING_VALID, check_act, checked, const_input, epilogue, size

CUSTOM_OP = "CUSTOM:Convolution2DTransposeBias"
_GEO = dict(N=1, H=3, W=4, CI=3, OH=6, OW=8, CO=5, KH=3, KW=3, SH=2, SW=2, PT=0, PL=1)
VARIANTS = {
    "transpose_conv": (_GEO, {"ACT": ACTS, "HAS_BIAS": [0, 1], "RESIDUAL": [0, 1], "ACT2": [0, 3]},
                       ["out_", "x", "w", "bias", "res"]),
}
_TFL_PAD_SAME, _TFL_PAD_VALID = 1, 2        # TfLitePadding (C API enum), used by the custom op


def conv_out_size(n: int, k: int, s: int, padding: int) -> int:
    """TFLite's ComputeOutSize (C integer division, truncating)."""
    return (n + s - 1) // s if padding == PADDING_SAME else int((n + s - k) / s)


def _custom_params(node):
    raw = node.attrs.get("custom_options")
    if raw is None or len(raw) < 12:
        raise ValueError(f"custom_options must hold TfLiteTransposeConvParams (12 bytes), "
                         f"got {0 if raw is None else len(raw)}")
    padding, sw, sh = struct.unpack_from("<iii", bytes(raw[:12]))
    if padding not in (_TFL_PAD_SAME, _TFL_PAD_VALID):
        raise ValueError(f"padding enum {padding} not supported (1 SAME, 2 VALID)")
    return padding, sh, sw


def _geometry(node, graph):
    """(defines, input id, weights id, bias id or None)."""
    custom = node.op == CUSTOM_OP
    n_in = list(node.inputs)
    if custom:
        if len(n_in) != 3 or min(n_in) < 0:
            raise ValueError("expects 3 inputs (input, weights, bias)")
        xi, wi, bi = n_in
    else:
        if len(n_in) not in (3, 4) or min(n_in[:3]) < 0:
            raise ValueError("expects inputs (output_shape, weights, input[, bias])")
        wi, xi = n_in[1], n_in[2]
        bi = n_in[3] if len(n_in) == 4 and n_in[3] >= 0 else None
    x, w, y = graph.t(xi), graph.t(wi), graph.t(node.outputs[0])
    if len(x.shape) != 4 or len(w.shape) != 4 or len(y.shape) != 4:
        raise ValueError(f"input {list(x.shape)}, weights {list(w.shape)} and output {list(y.shape)} must be 4-D")
    n, h, wd, ci = x.shape
    co, kh, kw, wci = w.shape
    if wci != ci:
        raise ValueError(f"weights {list(w.shape)} do not fit {ci} input channels")
    for t in [w] + ([graph.t(bi)] if bi is not None else []):
        if t.dtype != "float32":
            raise ValueError(f"{t.name!r} has dtype {t.dtype}, expected float32")
    if bi is not None and graph.t(bi).size != co:
        raise ValueError(f"bias {graph.t(bi).name!r} has {graph.t(bi).size} elements, expected {co}")
    if custom:
        padding, sh, sw = _custom_params(node)
        if sh < 1 or sw < 1:
            raise ValueError(f"strides ({sh},{sw}) must be >= 1")
        tot_h = max(0, kh - (h - 1) % sh - 1) if padding == _TFL_PAD_SAME else 0
        tot_w = max(0, kw - (wd - 1) % sw - 1) if padding == _TFL_PAD_SAME else 0
        exp = [n, sh * (h - 1) + kh - tot_h, sw * (wd - 1) + kw - tot_w, co]
        if list(y.shape) != exp:
            raise ValueError(f"output {list(y.shape)} does not match the computed {exp}")
        pt, pl = tot_h // 2, tot_w // 2
    else:
        os_ = const_input(node, graph, 0, "output_shape")
        if os_.dtype != np.int32 or os_.size != 4:
            raise ValueError(f"output_shape must be an int32 [4] constant (got {os_.dtype} {list(os_.shape)})")
        if [int(v) for v in os_.reshape(-1)] != list(y.shape):
            raise ValueError(f"output_shape {os_.reshape(-1).tolist()} differs from the output tensor {list(y.shape)}")
        a = node.attrs
        sh, sw = int(a.get("stride_h", 0) or 0), int(a.get("stride_w", 0) or 0)
        padding = int(a.get("padding", 0))
        if sh < 1 or sw < 1:
            raise ValueError(f"strides ({sh},{sw}) must be >= 1")
        if padding not in (PADDING_SAME, PADDING_VALID):
            raise ValueError(f"padding {padding} not supported")
        if y.shape[0] != n or y.shape[3] != co:
            raise ValueError(f"output {list(y.shape)} does not fit batch {n} and {co} output channels")
        oh, ow = y.shape[1], y.shape[2]
        ch, cw = conv_out_size(oh, kh, sh, padding), conv_out_size(ow, kw, sw, padding)
        if (ch, cw) != (h, wd):
            raise ValueError(f"output {list(y.shape)} with kernel {kh}x{kw}, strides {sh}x{sw}, "
                             f"{'SAME' if padding == PADDING_SAME else 'VALID'} maps back to {ch}x{cw}, "
                             f"not the input's {h}x{wd}")
        pt = max((ch - 1) * sh + kh - oh, 0) // 2 if padding == PADDING_SAME else 0
        pl = max((cw - 1) * sw + kw - ow, 0) // 2 if padding == PADDING_SAME else 0
    geo = dict(N=n, H=h, W=wd, CI=ci, OH=y.shape[1], OW=y.shape[2], CO=co, KH=kh, KW=kw,
               SH=sh, SW=sw, PT=pt, PL=pl)
    return geo, xi, wi, bi


@checked
def _check(node, graph):
    _geometry(node, graph)
    if graph.t(node.outputs[0]).size == 0:
        return "empty output"
    return None if node.op == CUSTOM_OP else check_act(node, graph)


@register("TRANSPOSE_CONV", check=_check, inputs=(3, 4), optional=(3,),
          summary="NHWC transposed conv, SAME/VALID, strides, optional bias, fused activation")
@register(CUSTOM_OP, check=_check, inputs=(3, 3), summary="MediaPipe transposed conv + bias (TfLiteTransposeConvParams)")
def lower_transpose_conv(node, graph):
    geo, xi, wi, bi = _geometry(node, graph)
    binds = [("out_", node.outputs[0]), ("x", xi), ("w", wi)]
    if bi is not None:
        binds.append(("bias", bi))
    defines = dict(geo, HAS_BIAS=int(bi is not None), **epilogue(node, binds))
    return [Kernel("transpose_conv", binds, size(graph.t(node.outputs[0]).shape), defines, node.label())]


# --- facts (compiler/ops/__init__.py FACT_FIELDS) ---------------------------------------------------
def _flops(node, graph):
    """Each input element scatters into KH*KW*CO outputs (a multiply-add each)."""
    w = graph.t(node.inputs[1]).shape
    return 2 * graph.t(node.inputs[2]).size * w[0] * w[1] * w[2]


def _flops_custom(node, graph):
    w = graph.t(node.inputs[1]).shape
    return 2 * graph.t(node.inputs[0]).size * w[0] * w[1] * w[2]


_COMMON = dict(shape=Why("no shape rule: its output shape is a constant input (or the model's)"), exact=SHAPE_ONLY,
               sym_shape=Why("no dynamic-size rule yet"), pieces=Why("computes values"), fp16=NEUTRAL,
               in_place=False, templates=("transpose_conv",), cpu=Why("no CPU kernel: the GPU runs every float one"))
declare("TRANSPOSE_CONV", batch="transpose_conv", flops=_flops, **_COMMON)
declare(CUSTOM_OP, batch="merge", flops=_flops_custom, **_COMMON)
template("transpose_conv", item_major=False, flat=False, in_place=("res",))
