"""Data movement: RESHAPE, PAD/PADV2, CONCATENATION (all through copy_nd / pad templates)."""
from __future__ import annotations

import numpy as np

from gpuc.compiler.codegen.kernel import Kernel
from gpuc.compiler import sym_shapes as D
from gpuc.compiler import symbolic as S
from gpuc.compiler.ops import ALWAYS, ANY_COUNT, BY_SHAPE_RULE, NEUTRAL, Why, declare, register, rules, template
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


def litert_pad_value(v):
    """The value LiteRT's PAD kernels write for constant_values `v` (a numpy scalar): a zero of either
    sign is written as +0.0 (its kernels fill zero padding as zero bytes), any other value as it is."""
    return np.zeros((), np.asarray(v).dtype)[()] if v == 0 else v


def pad_constant(graph, node):
    """A PAD / PADV2 node's padding value as LiteRT writes it (a numpy scalar of its dtype: 0 for PAD
    and a PADV2 without one), or None where constant_values is not one constant."""
    if node.op == "PADV2" and len(node.inputs) > 2 and node.inputs[2] >= 0:
        c = graph.t(node.inputs[2])
        if not c.is_const or c.size != 1:
            return None
        return litert_pad_value(np.asarray(c.data).reshape(-1)[0])
    return np.zeros((), graph.t(node.outputs[0]).dtype)[()]


def _pad_value(node, graph):
    """The padding value, a python scalar of the output's dtype (0 for PAD and a PADV2 without one)."""
    y = graph.t(node.outputs[0])
    if node.op == "PADV2" and len(node.inputs) > 2 and node.inputs[2] >= 0:
        v = np.asarray(const_input(node, graph, 2, "constant_values"))
        if v.size != 1 or v.dtype != np.dtype(y.dtype):
            raise ValueError(f"constant_values must be one {y.dtype} value (got {v.dtype} {list(v.shape)})")
        return litert_pad_value(v.reshape(-1)[0]).item()
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


# --- facts (compiler/ops/__init__.py FACT_FIELDS) ---------------------------------------------------
def _reshape_target(node, vals, x) -> list[int]:
    if len(vals) > 1 and vals[1] is not None:
        shape = rules.ints(vals[1], "new shape")
    else:
        shape = [int(d) for d in node.attrs.get("new_shape") or []]
    if shape.count(-1) > 1:
        raise ValueError(f"new shape {shape} has more than one -1")
    if -1 in shape:
        rest = int(np.prod([d for d in shape if d != -1], dtype=np.int64))
        if rest == 0 or x.size % rest:
            raise ValueError(f"cannot reshape {list(x.shape)} to {shape}")
        shape[shape.index(-1)] = x.size // rest
    if int(np.prod(shape, dtype=np.int64)) != x.size:
        raise ValueError(f"cannot reshape {list(x.shape)} ({x.size} elements) to its target {shape} "
                         f"({int(np.prod(shape, dtype=np.int64))} elements)")
    return shape


def _reshape_shape(node, vals, graph, need=None):
    return [np.asarray(vals[0]).reshape(_reshape_target(node, vals, vals[0]))]


def _squeeze_shape(node, vals, graph, need=None):
    x = vals[0]
    dims = [rules.axis(int(d), x.ndim) for d in node.attrs.get("squeeze_dims") or []]
    return [np.asarray(x).reshape([n for d, n in enumerate(x.shape) if (d not in dims if dims else n != 1)])]


def _expand_dims_shape(node, vals, graph, need=None):
    x = vals[0]
    ax = rules.ints(vals[1], "axis")[0]
    ax = ax + x.ndim + 1 if ax < 0 else ax
    return [np.asarray(x).reshape(list(x.shape[:ax]) + [1] + list(x.shape[ax:]))]


def _pad_shape(node, vals, graph, need=None):
    p = np.asarray(rules.ints(vals[1], "paddings")).reshape(-1, 2)
    c = litert_pad_value(np.asarray(vals[2]).reshape(-1)[0]) if len(vals) > 2 and vals[2] is not None else 0
    return [np.pad(np.asarray(vals[0]), p, constant_values=c)]


def _concat_shape(node, vals, graph, need=None):
    if node.attrs.get("fused_activation_function"):
        return None
    return [np.concatenate([np.asarray(v) for v in vals], axis=int(node.attrs.get("axis", 0) or 0))]


def _reshape_sym(node, graph, values=None):
    x = D.in_shapes(node, graph)[0]
    if values and len(node.inputs) > 1 and node.inputs[1] in values:       # a target computed from sizes
        target = list(np.asarray(values[node.inputs[1]], dtype=object).reshape(-1))
        known = [d for d in target if S.is_sym(d) or d != -1]
        if -1 in target:
            rest = S.prod(known)
            target = [S.prod(x) // rest if not S.is_sym(d) and d == -1 else d for d in target]
        if not isinstance(S.prod(target) - S.prod(x), int) or S.prod(target) - S.prod(x) != 0:
            D.refuse(node, graph, f"its computed target {target} does not hold the {S.prod(x)} elements")
        return [target]
    if len(node.inputs) > 1 and node.inputs[1] >= 0 and graph.t(node.inputs[1]).shape != (0,):
        target = D.const_ints(graph, node.inputs[1], node, "target shape")
    else:
        target = [int(d) for d in node.attrs.get("new_shape") or []]
    numel = S.prod(x)
    if -1 not in target:
        D.refuse(node, graph, f"its target {target} is a constant that fixes the size")
    rest = int(np.prod([d for d in target if d != -1], dtype=np.int64))
    if rest == 0:
        D.refuse(node, graph, f"target {target}")
    if numel % rest != 0:          # (a guard: the -1 must divide out at every size)
        D.refuse(node, graph, f"{numel} elements do not divide into {target}")
    return [[numel // rest if d == -1 else d for d in target]]


_reshape_sym.value_inputs = (1,)         # (its target may be computed from dynamic sizes)


def _squeeze_sym(node, graph, values=None):
    x = D.in_shapes(node, graph)[0]
    dims = [d + len(x) if d < 0 else d for d in (node.attrs.get("squeeze_dims") or [])]
    if not dims:
        D.refuse(node, graph, "a SQUEEZE without squeeze_dims would drop the dynamic dim at size 1")
    if any(D.is_dyn(x[d]) for d in dims):
        D.refuse(node, graph, "it squeezes the dynamic dim")
    return [[n for d, n in enumerate(x) if d not in dims]]


def _expand_dims_sym(node, graph, values=None):
    x = D.in_shapes(node, graph)[0]
    ax = D.const_ints(graph, node.inputs[1], node, "axis")[0]
    ax = ax + len(x) + 1 if ax < 0 else ax
    return [x[:ax] + [1] + x[ax:]]


def pad_sym(node, graph, values=None):
    x = D.in_shapes(node, graph)[0]
    p = np.asarray(D.const_ints(graph, node.inputs[1], node, "paddings")).reshape(-1, 2)
    return [[n + int(p[d, 0]) + int(p[d, 1]) for d, n in enumerate(x)]]


def _concat_sym(node, graph, values=None):
    shapes = D.in_shapes(node, graph)
    x = shapes[0]
    ax = int(node.attrs.get("axis", 0) or 0)
    ax = ax + len(x) if ax < 0 else ax
    out = list(x)
    out[ax] = sum((s[ax] for s in shapes if s is not None), 0)
    for s in shapes:
        for d in range(len(x)):
            if d != ax and (not isinstance(s[d] - x[d], int) or s[d] - x[d] != 0):
                D.refuse(node, graph, "its inputs differ in a dynamic dim")
    return [out]


_COMMON = dict(exact=ALWAYS, fp16=NEUTRAL, in_place=False, flops=rules.per_output)
declare("RESHAPE", shape=_reshape_shape, sym_shape=_reshape_sym, cpu="RESHAPE", **_COMMON)
declare("SQUEEZE", shape=_squeeze_shape, sym_shape=_squeeze_sym, cpu="SQUEEZE", **_COMMON)
declare("EXPAND_DIMS", shape=_expand_dims_shape, sym_shape=_expand_dims_sym, cpu="EXPAND_DIMS", **_COMMON)
declare("RESHAPE", "SQUEEZE", "EXPAND_DIMS", batch="reshape", pieces="reshape", templates=("copy_nd",))
declare("RESHAPE", "SQUEEZE", "EXPAND_DIMS", "CONCATENATION", sym_value=BY_SHAPE_RULE)
declare("PAD", "PADV2", shape=_pad_shape, sym_shape=pad_sym, batch="pad", pieces="pad", templates=("pad",),
        **_COMMON)
declare("PAD", cpu="PAD")
declare("PADV2", cpu="PADV2")
declare("CONCATENATION", shape=_concat_shape, sym_shape=_concat_sym, batch=("axis_attr", "axis", "out"),
        pieces="concatenation", templates=("copy_nd",), cpu="CONCATENATION", **_COMMON)
template("copy_nd", item_major=True, flat=True)
template("pad", item_major=True, flat=True)
