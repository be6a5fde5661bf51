"""Native int8 TRANSPOSE_CONV (INT8_TRANSPOSE_CONV), as LiteRT's builtin kernel (transpose_conv.cc
EvalQuantizedPerChannel, optimized_integer_ops::TransposeConvV2) computes it: the scatter of
(input - its zero point) x int8 weights (per-channel or per-tensor, OHWI; their zero points ignored, as LiteRT
ignores them) summed exactly in int32, plus
the int32 bias, requantized per output channel with PopulateConvolutionQuantizationParams' multipliers (input scale
x weight scale / output scale in double: the float product differed on 6 of 5 x 65,280 outputs) by
optimized_ops::Quantize: channels in whole blocks of 8 RQ_UPWARD (its vector path: SaturatingRoundingDoublingHighMul,
then a half-up shift), the channels past the last block of 8 RQ_GEMMLOWP (its scalar loop) -- found by experiment on
LiteRT 2.3, as the depthwise kernel's; then the output zero point and the fused activation's clamp
(CalculateActivationRangeQuantized: RELU, RELU_N1_TO_1, RELU6; NONE, TANH and SIGN_BIT the int8 range).

Kernel: the flat int8 conv kernel (shaders/int8_conv.comp TCONV) as the equivalent stride-1 convolution over the
input dilated by the strides (a window position off that lattice reads nothing), with the filter flipped at compile
time and leading pads K - 1 - LiteRT's (ComputePaddingHeightWidth on the output size, as ops/transpose_conv.py),
visiting only the taps on the lattice (a stride-2 layer: a quarter of them; the word-wise loop's zero-point
correction then from the weight sums of the taps a pixel visits, one set per position modulo the strides);
the word-wise channel loop (VEC4) and 4-channel words (OC4) where the depths are multiples of 4.
passes/quant.py native_int8 makes this op when the whole model runs in int8."""
from __future__ import annotations

import numpy as np

from gpuc.compiler.codegen.kernel import Kernel
from gpuc.compiler.ops import register
from gpuc.compiler.ops.int8_facts import declare_int8
from gpuc.compiler.ops.int8_common import (RQ_UPWARD, act_range, int8_activation, native_form, quantize_multiplier,
                                           scale_zp)
from gpuc.compiler.ops.int8_conv import DOT_VARIANT
from gpuc.compiler.ops.math import words
from gpuc.compiler.ops.transpose_conv import conv_out_size
from gpuc.compiler.ops.util import PADDING_SAME, PADDING_VALID, checked, fused_act

from gpuc.compiler.ops.int8_common import TRANSPOSE_CONV  # noqa: E402 (the int8 op name)

_BASE = dict(N=1, H=3, W=4, CIN=4, OH=6, OW=8, COUT=8, KH=3, KW=3, SH=1, SW=1, DH=1, DW=1, PT=1, PL=1, DM=1, QP0=0,
             LH=2, LW=2, TCONV=1, BMM=0, DEPTHWISE=0, IN_OFF=3, OUT_ZP=-2, ACT_MIN=-128, ACT_MAX=127, NOUT=384,
             RQ_MODE=RQ_UPWARD, RQ_SPLIT=8, XZ_WORD=-50529028)
VARIANTS = {
    "int8_conv:tconv": (dict(_BASE, VEC4=1, OC4=1), {"VEC4": [0, 1], "OC4": [0, 1]}, ["out_", "x", "w", "qp"],
                        {"out_": "uint32", "x": "uint32", "w": "uint32", "qp": "int32"}),
}


def _plan(node, graph) -> dict:
    """The int8_conv defines (without the requantization's) of TRANSPOSE_CONV `node`; ValueError where the int8
    form does not take it."""
    ins = list(node.inputs)
    if len(ins) not in (3, 4) or min(ins[:3]) < 0 or len(node.outputs) != 1:
        raise ValueError("expects inputs (output_shape, weights, input[, bias]) and one output")
    f, x, y = graph.t(ins[1]), graph.t(ins[2]), graph.t(node.outputs[0])
    if not (int8_activation(graph, x.id) and int8_activation(graph, y.id)):
        raise ValueError("input and output must be per-tensor quantized int8")
    if not f.is_const or f.data is None or f.dtype != "int8" or f.quant is None or not f.quant.scale.size:
        raise ValueError(f"weights {f.name!r} must be a constant int8 tensor with scales")
    if len(x.shape) != 4 or len(f.shape) != 4 or len(y.shape) != 4:
        raise ValueError(f"input {list(x.shape)}, weights {list(f.shape)} and output {list(y.shape)} must be 4-D")
    n, h, w, ci = (int(v) for v in x.shape)
    co, kh, kw, wci = (int(v) for v in f.shape)
    if wci != ci or list(y.shape[::3]) != [n, co]:
        raise ValueError(f"weights {list(f.shape)} do not fit input {list(x.shape)} and output {list(y.shape)}")
    if f.quant.scale.size not in (1, co) or (f.quant.scale.size > 1 and int(f.quant.axis or 0) != 0):
        raise ValueError(f"weights {f.name!r}: {f.quant.scale.size} scales for {co} output channels")
    if len(ins) == 4 and ins[3] >= 0:
        b = graph.t(ins[3])
        if not b.is_const or b.data is None or b.dtype != "int32" or b.size != co:
            raise ValueError(f"bias {b.name!r} must be a constant int32 of {co} values")
    os_ = graph.t(ins[0])
    if not os_.is_const or os_.data is None or [int(v) for v in np.asarray(os_.data).reshape(-1)] != list(y.shape):
        raise ValueError("output_shape must be a constant equal to the output's shape")
    a = node.attrs
    sh, sw = int(a.get("stride_h", 0) or 0), int(a.get("stride_w", 0) or 0)
    padding = int(a.get("padding", 0))
    if sh < 1 or sw < 1 or padding not in (PADDING_SAME, PADDING_VALID):
        raise ValueError(f"strides ({sh},{sw}) / padding {padding} not supported")
    oh, ow = int(y.shape[1]), int(y.shape[2])
    ch, cw = conv_out_size(oh, kh, sh, padding), conv_out_size(ow, kw, sw, padding)
    if (ch, cw) != (h, w):
        raise ValueError(f"output {list(y.shape)} maps back to {ch}x{cw}, not the input's {h}x{w}")
    pt = max((ch - 1) * sh + kh - oh, 0) // 2 if padding == PADDING_SAME else 0
    pl = max((cw - 1) * sw + kw - ow, 0) // 2 if padding == PADDING_SAME else 0
    if fused_act(node) not in (0, 1, 2, 3, 4, 5):       # (TANH, SIGN_BIT: LiteRT clamps to int8 only)
        raise ValueError(f"fused activation {fused_act(node)} not supported")
    vec4 = ci % 4 == 0
    return dict(N=n, H=h, W=w, CIN=ci, OH=oh, OW=ow, COUT=co, KH=kh, KW=kw, SH=1, SW=1, DH=1, DW=1,
                PT=kh - 1 - pt, PL=kw - 1 - pl, DM=1, LH=sh, LW=sw, TCONV=1, BMM=0, DEPTHWISE=0, QP0=0,
                VEC4=int(vec4), OC4=int(vec4 and co % 4 == 0))


@checked
def _check(node, graph):
    _plan(node, graph)
    act_range(fused_act(node), graph.t(node.outputs[0]))
    return None


@register(TRANSPOSE_CONV, check=_check, dtypes=("int8",), inputs=(3, 4), optional=(3,), quantized_io=True,
          summary="internal: native int8 transpose convolution (passes/quant.py native_int8)")
def lower_int8_transpose_conv(node, graph):
    d = _plan(node, graph)
    f, x, y = graph.t(node.inputs[1]), graph.t(node.inputs[2]), graph.t(node.outputs[0])
    (sx, zx), (sy, zy) = scale_zp(x), scale_zp(y)
    co = d["COUT"]
    wf = np.ascontiguousarray(np.asarray(f.data, np.int8)[:, ::-1, ::-1, :])
    wt = graph.add_tensor(f"{f.name}#flipped", wf.shape, "int8", wf, quant=f.quant)
    lh, lw = d["LH"], d["LW"]
    qp = np.zeros((3 + lh * lw, co), np.int64)
    if len(node.inputs) > 3 and node.inputs[3] >= 0:
        qp[0] = np.asarray(graph.t(node.inputs[3]).data, np.int64).reshape(-1)
    scales = np.broadcast_to(f.quant.scale.astype(np.float32), (co,))
    for c in range(co):         # PopulateConvolutionQuantizationParams: in double
        qp[1, c], qp[2, c] = quantize_multiplier(sx * float(scales[c]) / sy)
    for py in range(lh):        # (VEC4) the weights' sums over the taps a pixel visits: its first ones py, px
        for px in range(lw):
            qp[3 + py * lw + px] = wf[:, py::lh, px::lw, :].astype(np.int64).sum(axis=(1, 2, 3))
    lo, hi = act_range(fused_act(node), y)
    d.update(IN_OFF=-zx, OUT_ZP=zy, ACT_MIN=lo, ACT_MAX=hi, NOUT=y.size, RQ_MODE=RQ_UPWARD, RQ_SPLIT=co // 8 * 8,
             XZ_WORD=int(np.uint32((zx & 0xFF) * 0x01010101).view(np.int32)))
    qpt = graph.add_const(f"{y.name}#int8_qp", qp.astype(np.int32))
    binds = [("out_", words(graph, y.id)), ("x", words(graph, x.id)), ("w", words(graph, wt)), ("qp", qpt)]
    k = Kernel("int8_conv", binds, -(-y.size // 4), d, node.label(),
               flops=2 * x.size * co * d["KH"] * d["KW"])
    if d["VEC4"]:
        k.variants.append(DOT_VARIANT)
    return [k]


native_form(("TRANSPOSE_CONV", TRANSPOSE_CONV), check=_check)

declare_int8(TRANSPOSE_CONV, templates=("int8_conv",), flops=lambda nd,
             g: 2 * g.t(nd.inputs[2]).size * int(np.prod(g.t(nd.inputs[1]).shape[:3])))
