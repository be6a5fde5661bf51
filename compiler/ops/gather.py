"""Index maps that are not affine, or not everywhere: GATHER, GATHER_ND, EMBEDDING_LOOKUP
(shaders/gather.comp: indices constant or computed at run time), MIRROR_PAD
(shaders/mirror_pad.comp), and SPACE_TO_BATCH_ND / BATCH_TO_SPACE_ND (one strided copy, plus a
zero-padding pass into / a cropping copy out of an intermediate tensor when paddings / crops are set).

Indices: int32 are bound as they are; constant int64 (or int16) become an int32 constant; runtime
int64 are bound through an int32 view of twice the length (low, high words; IDX64).  LiteRT fails
the Invoke on an index outside [0, dim) (negative ones included; GATHER_ND per index component):
constant indices out of range are refused at compile time, naming the op; runtime ones are checked
by the kernel (compiler/status.py: the run fails naming the op, the operator and the index tensor),
which reads nothing for them.

EMBEDDING_LOOKUP of a constant, symmetric int8 table into float32 (litert-torch's LLM token embeddings):
the table stays int8 in the bundle (keeps_int8_table; one copy with a tied int8 LM head) and the kernel
computes q * scale[row] for the rows it reads (Q8), LiteRT's hybrid kernel's float product.
"""
from __future__ import annotations

import numpy as np

from gpuc.compiler import status
from gpuc.compiler.codegen.kernel import Kernel
from gpuc.compiler import sym_shapes as D
from gpuc.compiler.ops.shape import pad_sym
from gpuc.compiler.ops import (ALWAYS, BY_SHAPE_RULE, NEUTRAL, SHAPE_ONLY, Why, declare, gemm_q8, register, rules,
                               template)
from gpuc.compiler.ops.elements import DTYPES, adapt
from gpuc.compiler.ops.movement import copy, expect_shape, ints, io_tensors, register_plan, same_dtype
from gpuc.compiler.ops.util import checked, norm_axis, size, strides

_CHECK = dict(INNER=3, COORD=2, OUTER=2, AXIS=4, K=2, X_DIMS=[4, 3], X_STRIDES=[3, 1], CHECK=1, CHECK_WORD=4,
              STATUS_ROW=8, ITEMS=2, ITEM_OUT=6)      # run-time index checks (compiler/status.py)
VARIANTS = {
    "gather": (dict(INNER=3, COORD=2, OUTER=2, AXIS=4, K=2, X_DIMS=[4, 3], X_STRIDES=[3, 1]),
               {"ND": [0, 1], "IDX64": [0, 1]}, ["out_", "x", "idx"], {"idx": "int32"}),
    "gather:q8": (dict(INNER=3, COORD=2, OUTER=1, AXIS=4, Q8=1, ROW_WORDS=4), {"IDX64": [0, 1]},
                  ["out_", "x", "xs", "idx"], {"x": "uint32", "idx": "int32"}),
    "gather:q8-check": (dict(_CHECK, OUTER=1, Q8=1, ROW_WORDS=4), {"IDX64": [0, 1]},
                        ["out_", "x", "xs", "idx", "status"], {"x": "uint32", "idx": "int32", "status": "uint32"},
                        lambda d: dict(rw=("status",))),
    "gather:check": (dict(_CHECK), {"ND": [0, 1], "IDX64": [0, 1]}, ["out_", "x", "idx", "status"],
                     {"idx": "int32", "status": "uint32"}, lambda d: dict(rw=("status",))),
    "gather:check-packed": (dict(_CHECK, ELEM=1, N=12), {"ND": [0, 1]}, ["out_", "x", "idx", "status"],
                            {"out_": "uint32", "x": "uint32", "idx": "int32", "status": "uint32"},
                            lambda d: dict(rw=("status",))),
    "mirror_pad": (dict(RANK=2, OUT_SHAPE=[5, 7], IN_SHAPE=[3, 4], IN_STRIDES=[4, 1], PAD_LO=[1, 2]),
                   {"OFFSET": [0, 1]}, ["out_", "x"]),
}


def _indices(node, graph, i: int, bound_check):
    """Validate index tensor i; `bound_check(values)` raises for out-of-range constants."""
    t = graph.t(node.inputs[i])
    if t.is_const:
        if t.dtype not in ("int32", "int64", "int16"):
            raise ValueError(f"indices have dtype {t.dtype}")
        bound_check(np.asarray(t.data).astype(np.int64))
    elif t.dtype not in ("int32", "int64"):
        raise ValueError(f"runtime indices of dtype {t.dtype} not supported (int32, int64)")
    return t


def bind_indices(graph, t) -> tuple[int, int]:
    """(tensor id to bind as int indices, IDX64)."""
    if t.is_const and t.dtype != "int32":
        return graph.add_const(f"{t.name}/int32", np.asarray(t.data).astype(np.int32)), 0
    if t.dtype == "int64":
        view = graph.add_tensor(f"{t.name}/int32_pairs", [2 * t.size], "int32")
        graph.aliases[view] = t.id
        return view, 1
    return t.id, 0


def _values(node, graph, x_in: int):
    """Params and output: the same dtype (a quantized table would be hybrid)."""
    x, y = graph.t(node.inputs[x_in]), graph.t(node.outputs[0])
    if x.dtype != y.dtype or y.dtype not in DTYPES:
        raise ValueError(f"params {x.dtype} -> output {y.dtype} not supported (same dtype, {', '.join(DTYPES)})")
    return x, y


def _in_range(bound, what):
    def check(v):
        bad = v[(v < 0) | (v >= bound)] if v.size else v
        if bad.size:
            raise ValueError(f"{what} index {bad[0]} out of range [0, {bound}) in the constant indices "
                             f"(LiteRT fails the invoke)")
    return check


def _checked(node, graph, kernels: list, idx_t, bounds: list) -> list:
    """The gather kernel of `kernels` (adapted to the dtype) checks runtime indices at run time."""
    if not idx_t.is_const:
        status.index_check(graph, node, kernels[0], idx_t.id, bounds)
    return kernels


def _gather_kernel(node, graph, x, y, idx_t, outer, coord, axis_size, inner):
    idx, is64 = bind_indices(graph, idx_t)
    d = dict(ND=0, IDX64=is64, INNER=max(inner, 1), COORD=max(coord, 1), OUTER=max(outer, 1), AXIS=axis_size)
    if size(y.shape) == 0:
        return []
    ks = adapt(graph, [Kernel("gather", [("out_", y.id), ("x", x.id), ("idx", idx)], y.size, d, node.label())],
               y.dtype)
    return _checked(node, graph, ks, idx_t, [axis_size])


def _gather_plan(node, graph):
    x, y = _values(node, graph, 0)
    pos = graph.t(node.inputs[1])
    r, q = len(x.shape), len(pos.shape)
    axis = norm_axis(int(node.attrs.get("axis", 0) or 0), r)
    bd = int(node.attrs.get("batch_dims", 0) or 0)
    bd = bd + q if bd < 0 else bd
    if not (0 <= bd <= axis and bd < r and bd <= q):
        raise ValueError(f"batch_dims {bd} invalid for axis {axis}, params rank {r}, indices rank {q}")
    if list(x.shape[:bd]) != list(pos.shape[:bd]):
        raise ValueError(f"batch dims of params {list(x.shape[:bd])} and indices {list(pos.shape[:bd])} differ")
    _indices(node, graph, 1, _in_range(x.shape[axis], "gather"))
    expect_shape(graph, y.id, list(x.shape[:axis]) + list(pos.shape[bd:]) + list(x.shape[axis + 1:]))
    return x, y, pos, size(x.shape[bd:axis]), size(pos.shape[bd:]), x.shape[axis], size(x.shape[axis + 1:])


@register("GATHER", check=checked(lambda n, g: _gather_plan(n, g) and None), dtypes=DTYPES,
          inputs=(2, 2), summary="any axis and batch_dims; int32/int64 indices, constant or runtime (out of range: the run fails)")
def lower_gather(node, graph):
    x, y, pos, outer, coord, axis_size, inner = _gather_plan(node, graph)
    return _gather_kernel(node, graph, x, y, pos, outer, coord, axis_size, inner)


def keeps_int8_table(node, graph) -> bool:
    """Whether `node` is an EMBEDDING_LOOKUP of a constant int8 table (symmetric, per tensor or per row) into
    float32, LiteRT's hybrid kernel (out = q * scale[row]): the table stays int8 in the bundle, packed as
    ops/gemm_q8.py packs FC weights (one copy when the LM head is tied to it), and the kernel dequantizes
    the rows it reads (passes/quant.py asks, and flags the node with gemm_q8.ATTR)."""
    if node.op != "EMBEDDING_LOOKUP" or len(node.inputs) != 2 or min(node.inputs) < 0 or len(node.outputs) != 1:
        return False
    x, y = graph.t(node.inputs[1]), graph.t(node.outputs[0])
    q = x.quant
    if not x.is_const or x.dtype != "int8" or q is None or len(x.shape) < 2 or x.data.size == 0:
        return False
    if y.dtype != "float32" or y.quant is not None or q.scale.size not in (1, x.shape[0]):
        return False
    if q.scale.size > 1 and int(getattr(q, "axis", 0) or 0) != 0:
        return False
    return not (q.zero_point.size and np.any(np.asarray(q.zero_point) != 0)) and bool(np.all(np.isfinite(q.scale)))


def _embedding_plan(node, graph):
    if keeps_int8_table(node, graph) or node.attrs.get(gemm_q8.ATTR):
        x, y = graph.t(node.inputs[1]), graph.t(node.outputs[0])
    else:
        x, y = _values(node, graph, 1)
    ids = graph.t(node.inputs[0])
    if ids.dtype != "int32" or len(ids.shape) != 1:
        raise ValueError("lookup must be 1-D int32")
    if len(x.shape) < 2:
        raise ValueError("value must have rank >= 2")
    _indices(node, graph, 0, _in_range(x.shape[0], "embedding lookup"))
    expect_shape(graph, y.id, [ids.shape[0]] + list(x.shape[1:]))
    return x, y, ids


@register("EMBEDDING_LOOKUP", check=checked(lambda n, g: _embedding_plan(n, g) and None), dtypes=("float32", "int32"),
          inputs=(2, 2), summary="float32/int32 table, or a constant int8 one dequantized per row in the kernel "
                                 "(stored as int8); constant or runtime ids (out of range: the run fails)")
def lower_embedding(node, graph):
    x, y, ids = _embedding_plan(node, graph)
    if node.attrs.get(gemm_q8.ATTR) and x.dtype == "int8":      # int8 table kept (passes/quant.py)
        if y.size == 0:
            return []
        packed, scales, kq = gemm_q8.packed_rows(graph, x.id)
        idx, is64 = bind_indices(graph, ids)
        d = dict(ND=0, IDX64=is64, INNER=size(x.shape[1:]), COORD=ids.shape[0], OUTER=1, AXIS=x.shape[0], Q8=1,
                 ROW_WORDS=kq * 4)
        k = Kernel("gather", [("out_", y.id), ("x", packed), ("xs", scales), ("idx", idx)], y.size, d, node.label())
        return _checked(node, graph, [k], ids, [x.shape[0]])
    return _gather_kernel(node, graph, x, y, ids, 1, ids.shape[0], x.shape[0], size(x.shape[1:]))


def _gather_nd_plan(node, graph):
    x, y = _values(node, graph, 0)
    ind = graph.t(node.inputs[1])
    if not ind.shape or not x.shape:
        raise ValueError("params and indices must have rank >= 1")
    k = ind.shape[-1]
    if k > len(x.shape):
        raise ValueError(f"index depth {k} exceeds the params rank {len(x.shape)}")

    def bounds(v):
        v = v.reshape(-1, k) if k else v
        for j in range(k):
            _in_range(x.shape[j], "gather_nd")(v[:, j])
    _indices(node, graph, 1, bounds)
    expect_shape(graph, y.id, list(ind.shape[:-1]) + list(x.shape[k:]))
    return x, y, ind, k


@register("GATHER_ND", check=checked(lambda n, g: _gather_nd_plan(n, g) and None), dtypes=DTYPES,
          inputs=(2, 2), summary="int32/int64 indices, constant or runtime (out of range: the run fails)")
def lower_gather_nd(node, graph):
    x, y, ind, k = _gather_nd_plan(node, graph)
    if y.size == 0:
        return []
    idx, is64 = bind_indices(graph, ind)
    d = dict(ND=1, IDX64=is64, K=k, X_DIMS=list(x.shape[:k]), X_STRIDES=strides(x.shape)[:k],
             INNER=max(size(x.shape[k:]), 1))
    ks = adapt(graph, [Kernel("gather", [("out_", y.id), ("x", x.id), ("idx", idx)], y.size, d, node.label())],
               y.dtype)
    return _checked(node, graph, ks, ind, list(x.shape[:k]))


def _mirror_plan(node, graph):
    same_dtype(graph, node)
    x, y = graph.t(node.inputs[0]), graph.t(node.outputs[0])
    mode = node.attrs.get("mode", 0)
    offset = {0: 1, 1: 0, "REFLECT": 1, "SYMMETRIC": 0}.get(mode)
    if offset is None:
        raise ValueError(f"unknown mode {mode}")
    p = ints(node, graph, 1, "paddings")
    if len(p) != 2 * len(x.shape):
        raise ValueError(f"paddings has {len(p)} values for a rank-{len(x.shape)} input")
    pads = [(p[2 * d], p[2 * d + 1]) for d in range(len(x.shape))]
    for d, ((a, b), n) in enumerate(zip(pads, x.shape)):
        if min(a, b) < 0 or max(a, b) > n - offset:
            raise ValueError(f"paddings {a, b} on dim {d} exceed the input size {n} minus the mode offset {offset}")
    expect_shape(graph, y.id, [n + a + b for n, (a, b) in zip(x.shape, pads)])
    return x, y, pads, offset


@register("MIRROR_PAD", check=checked(lambda n, g: _mirror_plan(n, g) and None), dtypes=DTYPES,
          inputs=(2, 2), summary="REFLECT and SYMMETRIC, any rank")
def lower_mirror_pad(node, graph):
    x, y, pads, offset = _mirror_plan(node, graph)
    if y.size == 0:
        return []
    d = dict(RANK=max(len(y.shape), 1), OUT_SHAPE=list(y.shape) or [1], IN_SHAPE=list(x.shape) or [1],
             IN_STRIDES=strides(x.shape) or [1], PAD_LO=[a for a, _ in pads] or [0], OFFSET=offset)
    return adapt(graph, [Kernel("mirror_pad", [("out_", y.id), ("x", x.id)], y.size, d, node.label())], y.dtype)


# ---------------------------------------------------------------------------------------------------
# SPACE_TO_BATCH_ND, BATCH_TO_SPACE_ND

def _block_nd(node, graph, x, what):
    block = ints(node, graph, 1, "block_shape")
    pads = ints(node, graph, 2, what)
    m = len(block)
    if m < 1 or m + 1 > len(x.shape):
        raise ValueError(f"block_shape of {m} entries for a rank-{len(x.shape)} input")
    if len(pads) != 2 * m:
        raise ValueError(f"{what} must be [{m}, 2]")
    if any(b < 1 for b in block) or any(p < 0 for p in pads):
        raise ValueError(f"invalid block_shape {block} or {what} {pads}")
    return block, [(pads[2 * k], pads[2 * k + 1]) for k in range(m)]


def _batch_layout(batch, block, spatial, rest):
    """Shape and row-major strides of a [prod(block) * batch, spatial..., rest...] tensor viewed as
    [block..., batch, spatial..., rest...] (batch index = block_position * batch + b)."""
    m = len(block)
    full = [size(block) * batch] + list(spatial) + list(rest)
    fs = strides(full)
    bs = [s * fs[0] * batch for s in strides(block)]
    return list(block) + [batch] + list(spatial) + list(rest), bs + [fs[0]] + fs[1:1 + m] + fs[1 + m:]


@register_plan("SPACE_TO_BATCH_ND", inputs=(3, 3), summary="any block_shape and zero paddings, any rank (pad + 1 copy)")
def plan_space_to_batch(node, graph, emit):
    same_dtype(graph, node)
    x, y = io_tensors(node, graph)
    block, pads = _block_nd(node, graph, x, "paddings")
    m = len(block)
    padded = [x.shape[0]] + [x.shape[1 + k] + a + b for k, (a, b) in enumerate(pads)] + list(x.shape[1 + m:])
    if any(padded[1 + k] % block[k] for k in range(m)):
        raise ValueError(f"padded spatial dims {padded[1:1 + m]} not divisible by block_shape {block}")
    osp = [padded[1 + k] // block[k] for k in range(m)]
    rest = list(x.shape[1 + m:])
    expect_shape(graph, y.id, [x.shape[0] * size(block)] + osp + rest)
    kernels, src = [], x.id
    if any(a or b for a, b in pads) and emit:
        src = graph.add_tensor(f"{y.name}/padded", padded, x.dtype)
        lo = [0] + [a for a, _ in pads] + [0] * len(rest)
        kernels.append(Kernel("pad", [("out_", src), ("x", x.id)], size(padded),
                              dict(RANK=len(padded), OUT_SHAPE=padded, IN_SHAPE=list(x.shape),
                                   IN_STRIDES=strides(x.shape), PAD_LO=lo, PAD_VALUE=0), node.label()))
    # iterate the output as [block..., batch, out_spatial..., rest]: padded[o*block + bo]
    shape, dst = _batch_layout(x.shape[0], block, osp, rest)
    ps = strides(padded)
    srcs = ps[1:1 + m] + [ps[0]] + [ps[1 + k] * block[k] for k in range(m)] + ps[1 + m:]
    return kernels + copy(src, y.id, shape, srcs, dst, label=node.label())


@register_plan("BATCH_TO_SPACE_ND", inputs=(3, 3),
               summary="any block_shape and crops, any rank (1 copy, +1 with crops)")
def plan_batch_to_space(node, graph, emit):
    same_dtype(graph, node)
    x, y = io_tensors(node, graph)
    block, crops = _block_nd(node, graph, x, "crops")
    m = len(block)
    if x.shape[0] % size(block):
        raise ValueError(f"batch {x.shape[0]} not divisible by prod(block_shape) {size(block)}")
    batch, rest = x.shape[0] // size(block), list(x.shape[1 + m:])
    full = [batch] + [x.shape[1 + k] * block[k] for k in range(m)] + rest
    out = [batch] + [full[1 + k] - a - b for k, (a, b) in enumerate(crops)] + rest
    if any(d < 0 for d in out):
        raise ValueError(f"crops {crops} larger than the spatial dims {full[1:1 + m]}")
    expect_shape(graph, y.id, out)
    cropped = any(a or b for a, b in crops)
    dst_t = graph.add_tensor(f"{y.name}/uncropped", full, x.dtype) if cropped and emit else y.id
    # iterate the input as [block..., batch, in_spatial..., rest]: -> full[b, i*block + bo, rest]
    shape, src = _batch_layout(batch, block, x.shape[1:1 + m], rest)
    fs = strides(full)
    dst = fs[1:1 + m] + [fs[0]] + [fs[1 + k] * block[k] for k in range(m)] + fs[1 + m:]
    kernels = copy(x.id, dst_t, shape, src, dst, label=node.label())
    if cropped:
        off = sum(a * fs[1 + k] for k, (a, _) in enumerate(crops))
        kernels += copy(dst_t, y.id, out, fs, strides(out), off, label=node.label())
    return kernels


# --- facts (compiler/ops/__init__.py FACT_FIELDS) ---------------------------------------------------
def _gather_shape(node, vals, graph, need=None):
    x = vals[0]
    ax = rules.axis(int(node.attrs.get("axis", 0) or 0), x.ndim)
    if int(node.attrs.get("batch_dims", 0) or 0):
        return None
    idx = np.asarray(vals[1]).astype(np.int64)
    if ((idx < 0) | (idx >= x.shape[ax])).any() and need and need[1]:
        raise ValueError(f"GATHER index out of range for axis size {x.shape[ax]}")
    return [np.take(x, np.clip(idx, 0, max(x.shape[ax] - 1, 0)), axis=ax)]


def _gather_sym(node, graph, values=None):
    x, i = D.in_shapes(node, graph)[:2]
    if int(node.attrs.get("batch_dims", 0) or 0):
        D.refuse(node, graph, "batch_dims")
    ax = int(node.attrs.get("axis", 0) or 0)
    ax = ax + len(x) if ax < 0 else ax
    return [x[:ax] + list(i) + x[ax + 1:]]


def _embedding_sym(node, graph, values=None):
    ids, params = D.in_shapes(node, graph)[:2]              # (ids, params)
    if any(D.is_dyn(d) for d in params):
        D.refuse(node, graph, "a dynamic embedding table")
    return [list(ids) + list(params[1:])]


_COMMON = dict(fp16=NEUTRAL, in_place=False, flops=rules.per_output)
declare("GATHER", shape=_gather_shape, exact=ALWAYS, sym_shape=_gather_sym, batch="gather", pieces="gather",
        templates=("gather",), cpu="GATHER", **_COMMON)
declare("GATHER", sym_value=BY_SHAPE_RULE)
declare("EMBEDDING_LOOKUP", shape=Why("no host rule: the symbolic rule gives its shape"), exact=SHAPE_ONLY,
        sym_shape=_embedding_sym, batch="embedding", pieces=Why("not folded yet (a GATHER of rows)"),
        templates=("gather",), cpu=Why("no CPU kernel: the GPU takes its float32 / int32 tables"), **_COMMON)
declare("GATHER_ND", shape=Why("no shape rule yet (the model's output shape is kept)"), exact=SHAPE_ONLY,
        sym_shape=Why("no dynamic-size rule yet"), batch="gather_nd", pieces=Why("not folded yet"),
        templates=("gather",), cpu="GATHER_ND", **_COMMON)
declare("MIRROR_PAD", shape=Why("no shape rule yet (the model's output shape is kept)"), exact=SHAPE_ONLY,
        sym_shape=pad_sym, batch="pad", pieces=Why("not folded yet (reflected reads)"), templates=("mirror_pad", "pad"),
        cpu=Why("no CPU kernel: the GPU takes every dtype"), **_COMMON)
template("gather", item_major=True, flat=True)
template("mirror_pad", item_major=True, flat=True)
