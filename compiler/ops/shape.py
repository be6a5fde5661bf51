"""Data movement: RESHAPE, PAD/PADV2, CONCATENATION (all through copy_nd / pad templates)."""
from __future__ import annotations

import numpy as np

from gpuc.compiler.codegen.kernel import Kernel
from gpuc.compiler.ops import ANY_COUNT, register
from gpuc.compiler.ops.elements import DTYPES, adapt
from gpuc.compiler.ops.util import act_code, check_act, checked, const_input, norm_axis, size, strides
from gpuc.compiler.sym_scope import structural
from gpuc.compiler.symbolic import dim


def copy_kernel(src: int, dst: int, shape, src_strides, dst_strides, src_off=0, dst_off=0, act=0, label=""):
    """Strided region copy; contiguous when both sides are plain row-major at the same offsets."""
    with structural():          # (dynamic sizes: contiguous only where that holds at every size)
        contiguous = list(src_strides) == list(dst_strides) == strides(shape)
    defines = dict(RANK=max(len(shape), 1), SHAPE=list(shape) or [1], SRC_STRIDES=list(src_strides) or [1],
                   DST_STRIDES=list(dst_strides) or [1], SRC_OFFSET=src_off, DST_OFFSET=dst_off,
                   CONTIGUOUS=int(contiguous), ACT=act)
    return Kernel("copy_nd", [("out_", dst), ("x", src)], size(shape), defines, label)


@checked
def _check_reshape(node, graph):
    x, y = graph.t(node.inputs[0]), graph.t(node.outputs[0])
    if x.size != y.size:
        return "input and output element counts differ"
    if x.dtype != y.dtype:
        return f"input dtype {x.dtype} differs from output dtype {y.dtype}"
    return None


@register("RESHAPE", "SQUEEZE", "EXPAND_DIMS", check=_check_reshape, inputs=(1, 2), optional=(1,), dtypes=DTYPES,
          summary="shape change (copy; a view after memory planning)")
def lower_reshape(node, graph):
    y = graph.t(node.outputs[0])
    return adapt(graph, [copy_kernel(node.inputs[0], y.id, [y.size], [1], [1], label=node.label())], y.dtype)


def _paddings(node, graph):
    x = graph.t(node.inputs[0])
    p = const_input(node, graph, 1, "paddings")
    if p is None:
        raise ValueError("missing paddings input")
    p = np.asarray(p).reshape(-1, 2)
    if p.shape[0] != len(x.shape):
        raise ValueError(f"paddings has {p.shape[0]} rows for a rank-{len(x.shape)} input")
    if (p < 0).any():
        raise ValueError("negative paddings")
    return p


@checked
def _check_pad(node, graph):
    x, y = graph.t(node.inputs[0]), graph.t(node.outputs[0])
    p = _paddings(node, graph)
    if list(y.shape) != [dim(d + int(a) + int(b)) for d, (a, b) in zip(x.shape, p)]:
        return f"output {list(y.shape)} does not match padding {list(x.shape)} by {p.tolist()}"
    if x.dtype != y.dtype:
        return f"input dtype {x.dtype} differs from output dtype {y.dtype}"
    _pad_value(node, graph)
    return None


def _pad_value(node, graph):
    """The padding value, a python scalar of the output's dtype (0 for PAD and a PADV2 without one)."""
    y = graph.t(node.outputs[0])
    if node.op == "PADV2" and len(node.inputs) > 2 and node.inputs[2] >= 0:
        v = np.asarray(const_input(node, graph, 2, "constant_values"))
        if v.size != 1 or v.dtype != np.dtype(y.dtype):
            raise ValueError(f"constant_values must be one {y.dtype} value (got {v.dtype} {list(v.shape)})")
        return v.reshape(-1)[0].item()
    return np.zeros((), y.dtype).item()


@register("PAD", "PADV2", check=_check_pad, inputs=(2, 3), optional=(2,), dtypes=DTYPES,
          summary="constant padding (PADV2: any constant value)")
def lower_pad(node, graph):
    x, y = graph.t(node.inputs[0]), graph.t(node.outputs[0])
    p = _paddings(node, graph)
    defines = dict(RANK=max(len(y.shape), 1), OUT_SHAPE=list(y.shape) or [1], IN_SHAPE=list(x.shape) or [1],
                   IN_STRIDES=strides(x.shape) or [1], PAD_LO=[int(a) for a, _ in p] or [0],
                   PAD_VALUE=_pad_value(node, graph))
    return adapt(graph, [Kernel("pad", [("out_", y.id), ("x", x.id)], y.size, defines, node.label())], y.dtype)


@checked
def _check_concat(node, graph):
    y = graph.t(node.outputs[0])
    axis = norm_axis(int(node.attrs.get("axis", 0)), len(y.shape))
    total = 0
    for i in node.inputs:
        s = graph.t(i).shape
        if len(s) != len(y.shape) or any(a != b for d, (a, b) in enumerate(zip(s, y.shape)) if d != axis):
            return f"input shape {list(s)} does not fit output {list(y.shape)} on axis {axis}"
        total += s[axis]
        if graph.t(i).dtype != y.dtype:
            return f"input {graph.t(i).name!r} is {graph.t(i).dtype}, the output {y.dtype}"
    if total != y.shape[axis]:
        return "input sizes along the axis do not add up to the output's"
    if y.dtype != "float32" and node.attrs.get("fused_activation_function", 0):
        return f"fused activation on a {y.dtype} concatenation"
    return check_act(node, graph, allowed=(0, 1, 2, 3, 4))


@register("CONCATENATION", check=_check_concat, dtypes=DTYPES, inputs=(1, ANY_COUNT),
          summary="any axis, any input count, fused activation")
def lower_concat(node, graph):
    y = graph.t(node.outputs[0])
    axis = norm_axis(int(node.attrs.get("axis", 0)), len(y.shape))
    ys = strides(y.shape)
    kernels, off = [], 0
    for i in node.inputs:
        s = graph.t(i).shape
        if size(s):
            kernels.append(copy_kernel(i, y.id, s, strides(s), ys, dst_off=off * ys[axis], act=act_code(node, ignore=()),
                                       label=node.label()))
        off += s[axis]
    return adapt(graph, kernels, y.dtype)
