"""Data movement that is an affine index map, lowered to strided copies (copy_nd, one or a few
dispatches): TRANSPOSE, SLICE, SPLIT, SPLIT_V, PACK, UNPACK, REVERSE_V2, DEPTH_TO_SPACE,
SPACE_TO_DEPTH.  (STRIDED_SLICE: strided_slice.py; SPACE_TO_BATCH_ND / BATCH_TO_SPACE_ND: gather.py.)

Each op has one `plan_*(node, graph, emit)` (see register_plan) that validates the node (raising ValueError with the
reason), checks the declared output shapes against what LiteRT computes, and returns the kernels.
With emit=False (check) it must not touch the graph; with emit=True (lowering) it may add
intermediate tensors.  Negative strides (reversal) are plain copy_nd strides with an offset.
"""
from __future__ import annotations

import numpy as np

from gpuc.compiler.codegen.kernel import Kernel
from gpuc.compiler import sym_shapes as D
from gpuc.compiler.ops import ALWAYS, ANY_COUNT, BY_SHAPE_RULE, NEUTRAL, SHAPE_ONLY, Why, declare, register, rules
from gpuc.compiler.ops.elements import DTYPES, adapt
from gpuc.compiler.ops.shape import copy_kernel
from gpuc.compiler.ops.util import checked, const_input, norm_axis, size, strides
from gpuc.compiler.sym_scope import structural
from gpuc.compiler.symbolic import dim


# ---------------------------------------------------------------------------------------------------
# helpers

def ints(node, graph, i: int, what: str) -> list[int]:
    """A constant integer input as a flat list of python ints."""
    return rules.ints(const_input(node, graph, i, what), what)


def expect_shape(graph, tid: int, shape) -> None:
    t = graph.t(tid)
    shape = [dim(d) for d in shape]
    if list(t.shape) != shape:
        raise ValueError(f"output {t.name!r} has shape {list(t.shape)}, the op computes {shape}")


def same_dtype(graph, node, ins=(0,)) -> None:
    want = graph.t(node.inputs[ins[0]]).dtype
    for tid in [node.inputs[i] for i in ins] + list(node.outputs):
        t = graph.t(tid)
        if t.dtype != want:
            raise ValueError(f"tensor {t.name!r} has dtype {t.dtype}, expected {want}")
        if t.dtype not in DTYPES:
            raise ValueError(f"dtype {t.dtype} not supported (supported: {', '.join(DTYPES)})")


def copy(src, dst, shape, src_strides, dst_strides, src_off=0, dst_off=0, label="") -> list[Kernel]:
    """copy_kernel after dropping size-1 dims and merging dims contiguous on both sides
    (fewer index ops per element; a plain block copy becomes CONTIGUOUS).  No kernel when empty."""
    if size(shape) == 0:
        return []
    merged = []
    with structural():          # (dynamic sizes: dims merge where their strides are identical expressions)
        for n, a, b in zip(shape, src_strides, dst_strides):
            if n == 1:
                continue
            if merged and merged[-1][1] == a * n and merged[-1][2] == b * n:
                merged[-1] = (merged[-1][0] * n, a, b)
            else:
                merged.append((n, a, b))
    return [copy_kernel(src, dst, [m[0] for m in merged], [m[1] for m in merged], [m[2] for m in merged],
                        src_off, dst_off, label=label)]


def register_plan(*names, summary="", inputs=(1, 1), outputs=(1, 1), rejects=()):
    """Register `plan` as both check (emit=False) and lowering (emit=True, its kernels adapted to the
    moved dtype: elements.adapt).  rejects: the DTYPES LiteRT's kernel refuses."""
    def deco(plan):
        @checked
        def check(node, graph):
            plan(node, graph, False)
            return None

        def lower(node, graph):
            return adapt(graph, plan(node, graph, True), graph.t(node.outputs[0]).dtype)

        register(*names, check=check, dtypes=[d for d in DTYPES if d not in rejects], summary=summary, inputs=inputs,
                 outputs=outputs, rejects=rejects)(lower)
        return plan
    return deco


def io_tensors(node, graph):
    return graph.t(node.inputs[0]), graph.t(node.outputs[0])


# ---------------------------------------------------------------------------------------------------
# TRANSPOSE, SLICE, REVERSE_V2

@register_plan("TRANSPOSE", inputs=(2, 2), summary="any permutation (negative entries like LiteRT), any rank")
def plan_transpose(node, graph, emit):
    same_dtype(graph, node)
    x, y = io_tensors(node, graph)
    r = len(x.shape)
    perm = ints(node, graph, 1, "perm")
    if len(perm) != r:
        raise ValueError(f"perm has {len(perm)} entries for a rank-{r} input")
    perm = [norm_axis(p, r) for p in perm]
    if sorted(perm) != list(range(r)):
        raise ValueError(f"perm {perm} is not a permutation")
    expect_shape(graph, y.id, [x.shape[p] for p in perm])
    xs = strides(x.shape)
    return copy(x.id, y.id, y.shape, [xs[p] for p in perm], strides(y.shape), label=node.label())


@register_plan("SLICE", inputs=(3, 3), summary="constant begin/size (int32/int64, size -1 = to the end), any rank")
def plan_slice(node, graph, emit):
    same_dtype(graph, node)
    x, y = io_tensors(node, graph)
    r = len(x.shape)
    begin, sz = ints(node, graph, 1, "begin"), ints(node, graph, 2, "size")
    if len(begin) != r or len(sz) != r:
        raise ValueError(f"begin/size have {len(begin)}/{len(sz)} entries for a rank-{r} input")
    out = []
    for d, (b, s, n) in enumerate(zip(begin, sz, x.shape)):
        if b < 0 or b > n:
            raise ValueError(f"invalid begin {b} on axis {d} (size {n})")
        if s == -1:
            s = n - b
        elif s < 0 or b + s > n:
            raise ValueError(f"invalid size {s} from begin {b} on axis {d} (size {n})")
        out.append(s)
    expect_shape(graph, y.id, out)
    xs = strides(x.shape)
    return copy(x.id, y.id, out, xs, strides(out), sum(b * s for b, s in zip(begin, xs)), label=node.label())


@register_plan("REVERSE_V2", inputs=(2, 2), summary="any set of constant axes (negative too), any rank")
def plan_reverse(node, graph, emit):
    same_dtype(graph, node)
    x, y = io_tensors(node, graph)
    r = len(x.shape)
    axes = [norm_axis(a, r) for a in ints(node, graph, 1, "axis")]
    if len(set(axes)) != len(axes):
        raise ValueError(f"repeated axes {axes}")
    expect_shape(graph, y.id, x.shape)
    xs = strides(x.shape)
    src = [-s if d in axes else s for d, s in enumerate(xs)]
    off = sum((x.shape[d] - 1) * xs[d] for d in axes)
    return copy(x.id, y.id, x.shape, src, xs, off, label=node.label())


# ---------------------------------------------------------------------------------------------------
# SPLIT, SPLIT_V, PACK, UNPACK (one dispatch per output / input)

def _split(node, graph, x, axis, sizes):
    if len(sizes) != len(node.outputs):
        raise ValueError(f"{len(sizes)} splits but {len(node.outputs)} outputs")
    for i in range(len(node.outputs)):
        if graph.t(node.outputs[i]).dtype != x.dtype:
            raise ValueError("outputs must have the input's dtype")
    xs, kernels, pos = strides(x.shape), [], 0
    for tid, n in zip(node.outputs, sizes):
        shape = list(x.shape)
        shape[axis] = n
        expect_shape(graph, tid, shape)
        kernels += copy(x.id, tid, shape, xs, strides(shape), pos * xs[axis], label=node.label())
        pos += n
    return kernels


@register_plan("SPLIT", inputs=(2, 2), outputs=(1, ANY_COUNT), summary="equal splits on a constant axis (negative too)",
               rejects=("bool", "float16"))
def plan_split(node, graph, emit):
    x = graph.t(node.inputs[1])
    same_dtype(graph, node, (1,))
    ax = ints(node, graph, 0, "axis")
    if len(ax) != 1:
        raise ValueError("axis must hold one value")
    axis = norm_axis(ax[0], len(x.shape))
    k = int(node.attrs.get("num_splits", 0) or 0)
    if k <= 0 or x.shape[axis] % k:
        raise ValueError(f"num_splits {k} does not divide dim {x.shape[axis]}")
    return _split(node, graph, x, axis, [x.shape[axis] // k] * k)


@register_plan("SPLIT_V", inputs=(3, 3), outputs=(1, ANY_COUNT),
               summary="constant size_splits (one -1 allowed) on a constant axis", rejects=("bool", "float16"))
def plan_split_v(node, graph, emit):
    x = graph.t(node.inputs[0])
    same_dtype(graph, node)
    ax = ints(node, graph, 2, "axis")
    if len(ax) != 1:
        raise ValueError("axis must hold one value")
    axis = norm_axis(ax[0], len(x.shape))
    sizes = ints(node, graph, 1, "size_splits")
    if sizes.count(-1) > 1 or any(s < -1 for s in sizes):
        raise ValueError(f"invalid size_splits {sizes}")
    if -1 in sizes:
        sizes[sizes.index(-1)] = x.shape[axis] - (sum(sizes) + 1)
    if sum(sizes) != x.shape[axis] or any(s < 0 for s in sizes):
        raise ValueError(f"size_splits {sizes} do not add up to dim {x.shape[axis]}")
    return _split(node, graph, x, axis, sizes)


@register_plan("PACK", inputs=(1, ANY_COUNT), summary="any axis (negative too), any count", rejects=("bool", "float16"))
def plan_pack(node, graph, emit):
    same_dtype(graph, node, tuple(range(len(node.inputs))))
    x, y = io_tensors(node, graph)
    if any(graph.t(i).shape != x.shape for i in node.inputs):
        raise ValueError("inputs have different shapes")
    if int(node.attrs.get("values_count", len(node.inputs)) or 0) != len(node.inputs):
        raise ValueError("values_count does not match the number of inputs")
    axis = norm_axis(int(node.attrs.get("axis", 0) or 0), len(x.shape) + 1)
    expect_shape(graph, y.id, list(x.shape[:axis]) + [len(node.inputs)] + list(x.shape[axis:]))
    ys = strides(y.shape)
    dst = ys[:axis] + ys[axis + 1:]
    return [k for i, tid in enumerate(node.inputs)
            for k in copy(tid, y.id, x.shape, strides(x.shape), dst, 0, i * ys[axis], label=node.label())]


@register_plan("UNPACK", outputs=(1, ANY_COUNT), summary="any axis (negative too)", rejects=("int64",))
def plan_unpack(node, graph, emit):
    same_dtype(graph, node)
    x = graph.t(node.inputs[0])
    axis = norm_axis(int(node.attrs.get("axis", 0) or 0), len(x.shape))
    num = int(node.attrs.get("num", 0) or 0)
    if not num == x.shape[axis] == len(node.outputs):
        raise ValueError(f"num {num}, dim {x.shape[axis]} and {len(node.outputs)} outputs disagree")
    xs = strides(x.shape)
    shape = list(x.shape[:axis]) + list(x.shape[axis + 1:])
    src = xs[:axis] + xs[axis + 1:]
    kernels = []
    for i, tid in enumerate(node.outputs):
        expect_shape(graph, tid, shape)
        kernels += copy(x.id, tid, shape, src, strides(shape), i * xs[axis], label=node.label())
    return kernels


# ---------------------------------------------------------------------------------------------------
# DEPTH_TO_SPACE, SPACE_TO_DEPTH (NHWC, TF's DCR order)

def _block(node, x):
    b = int(node.attrs.get("block_size", 0) or 0)
    if len(x.shape) != 4:
        raise ValueError(f"input must be 4-D NHWC, got rank {len(x.shape)}")
    if b < 1:
        raise ValueError(f"invalid block_size {b}")
    return b


@register_plan("DEPTH_TO_SPACE", summary="NHWC, any block_size", rejects=("bool", "int16", "float16"))
def plan_depth_to_space(node, graph, emit):
    same_dtype(graph, node)
    x, y = io_tensors(node, graph)
    b = _block(node, x)
    n, h, w, c = x.shape
    if c % (b * b):
        raise ValueError(f"depth {c} not divisible by block_size^2 = {b * b}")
    co = c // (b * b)
    expect_shape(graph, y.id, [n, h * b, w * b, co])
    # iterate (n, h, bh, w, bw, co) in output order
    src = [h * w * c, w * c, b * co, c, co, 1]
    return copy(x.id, y.id, [n, h, b, w, b, co], src, strides([n, h, b, w, b, co]), label=node.label())


@register_plan("SPACE_TO_DEPTH", summary="NHWC, any block_size", rejects=("bool", "int16", "float16"))
def plan_space_to_depth(node, graph, emit):
    same_dtype(graph, node)
    x, y = io_tensors(node, graph)
    b = _block(node, x)
    n, h, w, c = x.shape
    if h % b or w % b:
        raise ValueError(f"spatial dims {h}x{w} not divisible by block_size {b}")
    oh, ow = h // b, w // b
    expect_shape(graph, y.id, [n, oh, ow, c * b * b])
    # iterate (n, oh, bh, ow, bw, c) in input order
    dst = [oh * ow * c * b * b, ow * c * b * b, b * c, c * b * b, c, 1]
    return copy(x.id, y.id, [n, oh, b, ow, b, c], strides([n, oh, b, ow, b, c]), dst, label=node.label())


# --- facts (compiler/ops/__init__.py FACT_FIELDS) ---------------------------------------------------
def _slice_shape(node, vals, graph, need=None):
    x = vals[0]
    begin, size_ = rules.ints(vals[1], "begin"), rules.ints(vals[2], "size")
    return [np.asarray(x[tuple(slice(b, n if s == -1 else b + s) for b, s, n in zip(begin, size_, x.shape))])]


def _split_shape(node, vals, graph, need=None):
    ax = rules.axis(rules.ints(vals[0], "axis")[0], vals[1].ndim)
    k = int(node.attrs.get("num_splits", 0) or 0)
    if k <= 0 or vals[1].shape[ax] % k:
        raise ValueError(f"num_splits {k} does not divide dim {vals[1].shape[ax]}")
    return list(np.split(np.asarray(vals[1]), k, axis=ax))


def _split_v_shape(node, vals, graph, need=None):
    x = vals[0]
    ax = rules.axis(rules.ints(vals[2], "axis")[0], x.ndim)
    sizes = rules.ints(vals[1], "size_splits")
    if sizes.count(-1) > 1 or any(n < -1 for n in sizes):
        raise ValueError(f"invalid size_splits {sizes}")
    if -1 in sizes:
        sizes[sizes.index(-1)] = x.shape[ax] - (sum(sizes) + 1)
    if sum(sizes) != x.shape[ax] or any(n < 0 for n in sizes):
        raise ValueError(f"size_splits {sizes} do not add up to dim {x.shape[ax]}")
    return list(np.split(np.asarray(x), np.cumsum(sizes)[:-1], axis=ax))


def _pack_shape(node, vals, graph, need=None):
    return [np.stack([np.asarray(v) for v in vals], axis=int(node.attrs.get("axis", 0) or 0))]


def _unpack_shape(node, vals, graph, need=None):
    x = vals[0]
    ax = rules.axis(int(node.attrs.get("axis", 0) or 0), x.ndim)
    return [np.take(x, i, axis=ax) for i in range(x.shape[ax])]


def _transpose_shape(node, vals, graph, need=None):
    return [np.transpose(vals[0], rules.ints(vals[1], "perm"))]


def _reverse_shape(node, vals, graph, need=None):
    x = vals[0]
    return [np.flip(x, [rules.axis(d, x.ndim) for d in rules.ints(vals[1], "axis")])]


def _transpose_sym(node, graph, values=None):
    x = D.in_shapes(node, graph)[0]
    return [[x[p] for p in D.const_ints(graph, node.inputs[1], node, "perm")]]


def _slice_sym(node, graph, values=None):
    x = D.in_shapes(node, graph)[0]
    begin = D.const_ints(graph, node.inputs[1], node, "begin")
    size_ = D.const_ints(graph, node.inputs[2], node, "size")
    return [[n - b if sz == -1 else sz for n, b, sz in zip(x, begin, size_)]]


_NO_SYM = Why("no dynamic-size rule yet")
# the facts every copy_nd movement op shares (strided_slice.py too)
COPY_FACTS = dict(fp16=NEUTRAL, in_place=False, flops=rules.per_output, templates=("copy_nd",))
declare("TRANSPOSE", shape=_transpose_shape, exact=ALWAYS, sym_shape=_transpose_sym, batch="transpose",
        pieces="transpose", cpu="TRANSPOSE", **COPY_FACTS)
declare("SLICE", shape=_slice_shape, exact=ALWAYS, sym_shape=_slice_sym, batch="slice", pieces="slice", cpu="SLICE",
        **COPY_FACTS)
declare("REVERSE_V2", shape=_reverse_shape, exact=ALWAYS, sym_shape=_NO_SYM, batch=("axis_input", 1, "axes"),
        pieces="reverse", cpu="REVERSE_V2", **COPY_FACTS)
declare("SPLIT", shape=_split_shape, exact=ALWAYS, sym_shape=_NO_SYM, batch=("axis_input", 0, "axis", 1),
        pieces="split", cpu="SPLIT", **COPY_FACTS)
declare("SPLIT_V", shape=_split_v_shape, exact=ALWAYS, sym_shape=_NO_SYM, batch=("axis_input", 2, "axis"),
        pieces="split_v", cpu="SPLIT_V", **COPY_FACTS)
declare("PACK", shape=_pack_shape, exact=ALWAYS, sym_shape=_NO_SYM, batch=("axis_attr", "axis", "out"),
        pieces="pack", cpu="PACK", **COPY_FACTS)
declare("SLICE", "PACK", sym_value=BY_SHAPE_RULE)
declare("UNPACK", shape=_unpack_shape, exact=ALWAYS, sym_shape=_NO_SYM, batch=("axis_attr", "axis", "in"),
        pieces="unpack", cpu="UNPACK", **COPY_FACTS)
declare("DEPTH_TO_SPACE", "SPACE_TO_DEPTH", shape=Why("no shape rule yet (the model's output shape is kept)"),
        exact=SHAPE_ONLY, sym_shape=_NO_SYM, batch="merge", pieces=Why("not folded yet"),
        cpu=Why("no CPU kernel: the GPU takes every dtype"), **COPY_FACTS)
declare("SPACE_TO_BATCH_ND", "BATCH_TO_SPACE_ND", shape=Why("no shape rule yet (the model's output shape is kept)"),
        exact=SHAPE_ONLY, sym_shape=_NO_SYM, batch=Why("moves data across the batch axis: no batch-native form"),
        pieces=Why("not folded yet"), cpu=Why("no CPU kernel: the GPU takes every dtype"), **COPY_FACTS)
