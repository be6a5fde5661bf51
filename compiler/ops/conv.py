"""CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED, AVERAGE_POOL_2D, MAX_POOL_2D."""
from __future__ import annotations

from gpuc.compiler.codegen.kernel import Kernel
from gpuc.compiler.ops import register
from gpuc.compiler.ops.util import (PADDING_SAME, PADDING_VALID, act_code, check_act, checked, epilogue,
                                    same_padding, size)


def _bias(node, graph, n_out):
    if len(node.inputs) < 3 or node.inputs[2] < 0:
        return None
    b = graph.t(node.inputs[2])
    if b.size != n_out:
        raise ValueError(f"bias {b.name!r} has {b.size} elements, expected {n_out}")
    return node.inputs[2]


def _window(node, graph, kh, kw):
    """Shared geometry of conv/pool: input/output NHWC dims, strides, dilation, leading pads."""
    x, y = graph.t(node.inputs[0]), graph.t(node.outputs[0])
    if len(x.shape) != 4 or len(y.shape) != 4:
        raise ValueError(f"input and output must be 4-D NHWC (got {list(x.shape)} -> {list(y.shape)})")
    a = node.attrs
    sh, sw = int(a.get("stride_h", 1) or 0), int(a.get("stride_w", 1) or 0)
    dh, dw = int(a.get("dilation_hfactor", 1) or 0), int(a.get("dilation_wfactor", 1) or 0)
    pad = int(a.get("padding", 0))
    if min(sh, sw, dh, dw) < 1:
        raise ValueError(f"strides ({sh},{sw}) and dilations ({dh},{dw}) must be >= 1")
    if pad not in (PADDING_SAME, PADDING_VALID):
        raise ValueError(f"padding {pad} not supported")
    n, h, w, c = x.shape
    on, oh, ow, oc = y.shape
    if pad == PADDING_SAME:
        exp = (-(-h // sh), -(-w // sw))
    else:
        exp = ((h - (kh - 1) * dh - 1) // sh + 1, (w - (kw - 1) * dw - 1) // sw + 1)
    if on != n or (oh, ow) != exp:
        raise ValueError(f"output shape {list(y.shape)} does not match input {list(x.shape)} "
                         f"with kernel {kh}x{kw}, strides {sh}x{sw}, {'SAME' if pad == 0 else 'VALID'}")
    pt = same_padding(h, kh, sh, dh, oh, pad)
    pl = same_padding(w, kw, sw, dw, ow, pad)
    return dict(N=n, H=h, W=w, OH=oh, OW=ow, SH=sh, SW=sw, DH=dh, DW=dw, PT=pt, PL=pl), c, oc


@checked
def _check_conv(node, graph):
    if len(node.inputs) < 2 or node.inputs[1] < 0:
        return "missing filter input"
    f = graph.t(node.inputs[1])
    if len(f.shape) != 4:
        return f"filter {f.name!r} must be 4-D"
    dw = node.op == "DEPTHWISE_CONV_2D"
    geo, ci, co = _window(node, graph, f.shape[1], f.shape[2])
    if dw:
        if f.shape[0] != 1 or f.shape[3] != co or co % ci:
            return f"depthwise filter {list(f.shape)} does not fit input channels {ci} -> {co}"
    elif f.shape[0] != co or f.shape[3] < 1 or ci % f.shape[3] or co % (ci // f.shape[3]):
        return f"filter {list(f.shape)} does not fit input channels {ci} -> {co}"
    _bias(node, graph, co)
    return check_act(node, graph)


@register("CONV_2D", "DEPTHWISE_CONV_2D", check=_check_conv, inputs=(2, 3), optional=(2,), summary="NHWC conv, groups, dilation, SAME/VALID")
def lower_conv(node, graph):
    f = graph.t(node.inputs[1])
    geo, ci, co = _window(node, graph, f.shape[1], f.shape[2])
    dw = node.op == "DEPTHWISE_CONV_2D"
    groups = 1 if dw else ci // f.shape[3]
    bias = _bias(node, graph, co)
    binds = [("out_", node.outputs[0]), ("x", node.inputs[0]), ("w", node.inputs[1])]
    if bias is not None:
        binds.append(("bias", bias))
    defines = dict(geo, CI=ci, CO=co, KH=f.shape[1], KW=f.shape[2], CIG=ci if dw else f.shape[3],
                   COG=co // groups, HAS_BIAS=int(bias is not None), DEPTHWISE=int(dw), MULT=co // ci if dw else 1,
                   **epilogue(node, binds))
    return [Kernel("conv2d", binds, size(graph.t(node.outputs[0]).shape), defines, node.label())]


@checked
def _check_fc(node, graph):
    if len(node.inputs) < 2 or node.inputs[1] < 0:
        return "missing weights input"
    if int(node.attrs.get("weights_format", 0)) != 0:
        return "shuffled weights format not supported"
    x, w, y = graph.t(node.inputs[0]), graph.t(node.inputs[1]), graph.t(node.outputs[0])
    if len(w.shape) != 2 or w.shape[1] < 1 or x.size % w.shape[1]:
        return f"weights {list(w.shape)} do not fit input {list(x.shape)}"
    if y.size != x.size // w.shape[1] * w.shape[0]:
        return f"output {list(y.shape)} does not fit input {list(x.shape)} and weights {list(w.shape)}"
    _bias(node, graph, w.shape[0])
    return check_act(node, graph, allowed=(0, 1, 2, 3))


@register("FULLY_CONNECTED", check=_check_fc, inputs=(2, 4), optional=(2,), summary="dense layer, any leading dims, optional bias")
def lower_fc(node, graph):
    w = graph.t(node.inputs[1])
    bias = _bias(node, graph, w.shape[0])
    binds = [("out_", node.outputs[0]), ("x", node.inputs[0]), ("w", node.inputs[1])]
    if bias is not None:
        binds.append(("bias", bias))
    defines = dict(IN=w.shape[1], O=w.shape[0], HAS_BIAS=int(bias is not None), **epilogue(node, binds, ignore=()))
    return [Kernel("fully_connected", binds, size(graph.t(node.outputs[0]).shape), defines, node.label())]


@checked
def _check_pool(node, graph):
    kh, kw = int(node.attrs.get("filter_height", 0)), int(node.attrs.get("filter_width", 0))
    if kh < 1 or kw < 1:
        return f"filter size {kh}x{kw} must be >= 1"
    _, c, oc = _window(node, graph, kh, kw)
    if c != oc:
        return "pooling must keep the channel count"
    return check_act(node, graph)


@register("AVERAGE_POOL_2D", "MAX_POOL_2D", check=_check_pool, inputs=(1, 1), summary="2-D pooling, SAME/VALID")
def lower_pool(node, graph):
    kh, kw = int(node.attrs["filter_height"]), int(node.attrs["filter_width"])
    geo, c, _ = _window(node, graph, kh, kw)
    geo.pop("DH"), geo.pop("DW")
    defines = dict(geo, C=c, KH=kh, KW=kw, OP=int(node.op == "MAX_POOL_2D"), ACT=act_code(node))
    binds = [("out_", node.outputs[0]), ("x", node.inputs[0])]
    return [Kernel("pool2d", binds, size(graph.t(node.outputs[0]).shape), defines, node.label())]
