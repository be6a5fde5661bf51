"""CONV_3D_TRANSPOSE (shaders/conv3d_transpose.comp): float32 NDHWC transposed 3-D convolution, as
LiteRT's kernel: inputs (output_shape, filter [KD, KH, KW, CO, CI], input, optional bias [CO]),
strides, dilations, SAME / VALID padding (LiteRT's ComputePadding3DValues over the output shape, which
must give back the input's spatial dims), fused activation.  output_shape must be a constant int32
vector (LiteRT's output is dynamic-sized otherwise)."""
from __future__ import annotations

import numpy as np

from gpuc.compiler.codegen.kernel import Kernel
from gpuc.compiler.ops import NEUTRAL, SHAPE_ONLY, Why, declare, register, rules, template
from gpuc.compiler.ops.conv3d import window_attrs
from gpuc.compiler.ops.util import PADDING_SAME, PADDING_VALID, act_code, check_act, checked, const_input

VARIANTS = {"conv3d_transpose": (dict(N=1, D=2, H=3, W=3, CI=2, OD=4, OH=6, OW=6, CO=3, KD=2, KH=3, KW=3, SD=2, SH=2,
                                      SW=2, DD=1, DH=1, DW=1, PF=0, PT=1, PL=1), {"HAS_BIAS": [0, 1], "ACT": [0, 1]},
                                 ["out_", "x", "f", "bias"])}


def _plan(node, graph):
    shp = const_input(node, graph, 0, "output_shape")
    f, x, y = graph.t(node.inputs[1]), graph.t(node.inputs[2]), graph.t(node.outputs[0])
    if shp is None or shp.dtype != np.int32 or shp.size != 5:
        raise ValueError("output_shape must be a constant int32 vector of 5 values")
    shp = [int(v) for v in shp.reshape(-1)]
    if len(x.shape) != 5 or len(f.shape) != 5:
        raise ValueError(f"input {list(x.shape)} and filter {list(f.shape)} must be 5-D")
    if f.dtype != "float32" or not f.is_const and x.dtype != "float32":
        raise ValueError(f"filter {f.dtype} must be float32")
    kd, kh, kw, co, ci = f.shape
    if x.shape[4] != ci or shp[0] != x.shape[0] or shp[4] % co or shp[4] != co:
        raise ValueError(f"filter {list(f.shape)} and output_shape {shp} do not fit the input {list(x.shape)}")
    if list(y.shape) != shp:
        raise ValueError(f"output {list(y.shape)} differs from output_shape {shp}")
    st, dl, pad = window_attrs(node)
    if pad not in (PADDING_SAME, PADDING_VALID):
        raise ValueError(f"padding {pad} not supported")
    pads = []
    for size_out, k, s, d, size_in in zip(shp[1:4], (kd, kh, kw), st, dl, x.shape[1:4]):
        eff = (k - 1) * d + 1
        back = (size_out + s - 1) // s if pad == PADDING_SAME else (size_out - eff + s) // s
        if back != size_in:
            raise ValueError(f"output_shape {shp} gives input dims {back} where the input has {size_in} "
                             f"(LiteRT's check)")
        pads.append(max((back - 1) * s + eff - size_out, 0) // 2)
    bias = node.inputs[3] if len(node.inputs) > 3 and node.inputs[3] >= 0 else -1
    if bias >= 0 and (graph.t(bias).size != co or graph.t(bias).dtype != "float32"):
        raise ValueError(f"bias {graph.t(bias).dtype} {list(graph.t(bias).shape)} must be {co} float32 values")
    geo = dict(N=int(x.shape[0]), D=int(x.shape[1]), H=int(x.shape[2]), W=int(x.shape[3]), CI=int(ci), OD=shp[1],
               OH=shp[2], OW=shp[3], CO=int(co), KD=int(kd), KH=int(kh), KW=int(kw), SD=st[0], SH=st[1], SW=st[2],
               DD=dl[0], DH=dl[1], DW=dl[2], PF=pads[0], PT=pads[1], PL=pads[2])
    return geo, f.id, x.id, bias


@checked
def _check(node, graph):
    _plan(node, graph)
    return check_act(node, graph, allowed=(0, 1, 2, 3, 4, 5))


@register("CONV_3D_TRANSPOSE", check=_check, inputs=(3, 4), optional=(3,),
          summary="NDHWC, strides, dilations, SAME/VALID, bias, fused activation; float32")
def lower_conv3d_transpose(node, graph):
    geo, f, x, bias = _plan(node, graph)
    n = graph.t(node.outputs[0]).size
    if not n:
        return []
    binds = [("out_", node.outputs[0]), ("x", x), ("f", f)] + ([("bias", bias)] if bias >= 0 else [])
    return [Kernel("conv3d_transpose", binds, n, dict(geo, HAS_BIAS=int(bias >= 0), ACT=act_code(node)),
                   node.label())]


def _shape(node, vals, graph, need=None):
    if need is not None and not need[0]:
        raise ValueError("output_shape must be a constant")
    return [rules.placeholder(rules.ints(vals[0], "output_shape"), rules.out_dtype(node, graph))]


def _flops(node, graph):
    f = graph.t(node.inputs[1]).shape
    return 2 * graph.t(node.inputs[2]).size * int(np.prod(f[:4]))


declare("CONV_3D_TRANSPOSE", shape=_shape, exact=SHAPE_ONLY, sym_shape=Why("no dynamic-size rule yet"),
        batch=Why("no batch rule yet: output_shape fixes the batch"), pieces=Why("computes values"), fp16=NEUTRAL,
        in_place=False, templates=("conv3d_transpose",), flops=_flops,
        cpu=Why("no CPU kernel: the GPU runs every float CONV_3D_TRANSPOSE"))
template("conv3d_transpose", item_major=True, flat=True)
