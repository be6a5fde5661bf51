"""numpy CPU kernels that move data (any dtype): the data-movement half of runtime/cpu_ops.py's table.

They keep the input's dtype (the compiler's trial run checks it) and take the integer dtypes the GPU
kernels do not (int64, int16, ...), and quantized integers as they are (no arithmetic)."""
from __future__ import annotations

import numpy as np

from gpuc.runtime.cpu_table import const_reason, cpu_op, norm_axis


def _check_same_size(attrs, ins, outs):
    if not ins or ins[0] is None or len(outs) != 1:
        return "expects a data input and 1 output"
    if int(np.prod(ins[0].shape, dtype=np.int64)) != int(np.prod(outs[0].shape, dtype=np.int64)):
        return "input and output element counts differ"
    return None


@cpu_op("RESHAPE", "SQUEEZE", "EXPAND_DIMS", check=_check_same_size, raw=True, summary="any dtype")
def _reshape(attrs, x, outs):
    return [x[0].reshape(outs[0].shape)]


def _check_transpose(attrs, ins, outs):
    bad = const_reason(ins, 1, "perm")
    if bad:
        return bad
    perm = [int(p) for p in np.asarray(ins[1].value).reshape(-1)]
    if sorted(perm) != list(range(len(ins[0].shape))):
        return f"perm {perm} is not a permutation of the {len(ins[0].shape)} axes"
    if tuple(outs[0].shape) != tuple(ins[0].shape[p] for p in perm):
        return "output shape does not match the permutation"
    return None


@cpu_op("TRANSPOSE", check=_check_transpose, raw=True, summary="any dtype")
def _transpose(attrs, x, outs):
    return [np.transpose(x[0], [int(p) for p in np.asarray(x[1]).reshape(-1)])]


@cpu_op("CONCATENATION", raw=True, summary="any dtype")
def _concat(attrs, x, outs):
    return [np.concatenate(x, axis=norm_axis(attrs.get("axis", 0), len(outs[0].shape)))]


@cpu_op("PACK", raw=True, summary="any dtype")
def _pack(attrs, x, outs):
    return [np.stack(x, axis=norm_axis(attrs.get("axis", 0), len(outs[0].shape)))]


@cpu_op("UNPACK", raw=True, summary="any dtype")
def _unpack(attrs, x, outs):
    ax = norm_axis(attrs.get("axis", 0), x[0].ndim)
    return [np.take(x[0], i, axis=ax) for i in range(x[0].shape[ax])]


def _check_gather(attrs, ins, outs):
    if len(ins) != 2 or ins[1].dtype not in ("int32", "int64"):
        return "expects data and int32/int64 indices"
    if ins[1].value is not None:
        ax = norm_axis(attrs.get("axis", 0), len(ins[0].shape))
        v = np.asarray(ins[1].value)
        if v.size and (v.min() < 0 or v.max() >= ins[0].shape[ax]):
            return "constant indices out of range"
    return None


def _in_range(op, idx, bounds):
    """LiteRT fails the invoke on an index outside [0, bound) (per component: bounds broadcast over
    the last axis): so does the CPU kernel (the host step's error names the op)."""
    bad = (idx < 0) | (idx >= np.asarray(bounds, np.int64))
    if bad.any():
        pos = np.argwhere(bad)[0]
        b = np.broadcast_to(np.asarray(bounds, np.int64), idx.shape)[tuple(pos)]
        raise IndexError(f"{op} index {idx[tuple(pos)]} out of range [0, {b}); LiteRT fails the invoke on it too")


@cpu_op("GATHER", check=_check_gather, raw=True, summary="any dtype; an index out of range fails the run")
def _gather(attrs, x, outs):
    ax = norm_axis(attrs.get("axis", 0), x[0].ndim)
    bd = int(attrs.get("batch_dims", 0) or 0)
    idx = np.asarray(x[1]).astype(np.int64)
    _in_range("gather", idx, x[0].shape[ax])
    if bd == 0:
        return [np.take(x[0], idx, axis=ax)]
    lead = x[0].shape[:bd]
    res = [np.take(x[0][b], idx[b], axis=ax - bd) for b in np.ndindex(*lead)]
    return [np.stack(res).reshape(outs[0].shape)]


@cpu_op("TILE", check=lambda a, i, o: const_reason(i, 1, "multiples"), raw=True, summary="any dtype")
def _tile(attrs, x, outs):
    return [np.tile(x[0], [int(m) for m in np.asarray(x[1]).reshape(-1)])]


@cpu_op("REVERSE_V2", raw=True, summary="any dtype")
def _reverse(attrs, x, outs):
    axes = tuple(norm_axis(a, x[0].ndim) for a in np.asarray(x[1]).reshape(-1))
    return [np.flip(x[0], axis=axes)]


@cpu_op("FILL", raw=True, summary="any dtype")
def _fill(attrs, x, outs):
    return [np.full(outs[0].shape, np.asarray(x[1]).reshape(-1)[0], dtype=outs[0].dtype)]


@cpu_op("SHAPE", raw=True, summary="static shapes")
def _shape(attrs, x, outs):
    return [np.asarray(x[0].shape, outs[0].dtype)]


@cpu_op("RANGE", summary="start, limit, delta")
def _range(attrs, x, outs):
    s, l, d = (np.asarray(v).reshape(-1)[0] for v in x)
    return [np.arange(s, l, d, dtype=outs[0].dtype)]


@cpu_op("SLICE", raw=True, summary="any dtype; size -1 = to the end")
def _slice(attrs, x, outs):
    begin = [int(v) for v in np.asarray(x[1]).reshape(-1)]
    size = [int(v) for v in np.asarray(x[2]).reshape(-1)]
    idx = tuple(slice(b, None if s < 0 else b + s) for b, s in zip(begin, size))
    return [x[0][idx]]


@cpu_op("STRIDED_SLICE", raw=True, summary="any dtype; begin/end/ellipsis/new-axis/shrink masks, offset")
def _strided_slice(attrs, x, outs):
    inp = x[0]
    begin, end, strides = ([int(v) for v in np.asarray(t).reshape(-1)] for t in x[1:4])
    bm, em = int(attrs.get("begin_mask", 0) or 0), int(attrs.get("end_mask", 0) or 0)
    elm, nam = int(attrs.get("ellipsis_mask", 0) or 0), int(attrs.get("new_axis_mask", 0) or 0)
    sam, offset = int(attrs.get("shrink_axis_mask", 0) or 0), bool(attrs.get("offset", False))
    n = len(begin)
    dense = sum(1 for i in range(n) if not (elm >> i) & 1 and not (nam >> i) & 1)
    idx = []
    for i in range(n):
        if (elm >> i) & 1:
            idx.append(Ellipsis)
            continue
        if (nam >> i) & 1:
            idx.append(np.newaxis)
            continue
        if (sam >> i) & 1:
            idx.append(begin[i])
            continue
        start = None if (bm >> i) & 1 else begin[i]
        stop = None if (em >> i) & 1 else (begin[i] + end[i] if offset else end[i])
        idx.append(slice(start, stop, strides[i] or 1))
    if Ellipsis not in idx and dense < inp.ndim:
        idx.append(Ellipsis)
    return [np.ascontiguousarray(inp[tuple(idx)])]


@cpu_op("PAD", "PADV2", raw=True, summary="constant padding, any dtype")
def _pad(attrs, x, outs):
    p = np.asarray(x[1]).reshape(-1, 2).astype(np.int64)
    value = np.asarray(x[2]).reshape(-1)[0] if len(x) > 2 and x[2] is not None else 0
    if value == 0:                    # LiteRT writes a zero of either sign as +0.0 (zero bytes)
        value = np.zeros((), np.asarray(value).dtype)[()]
    return [np.pad(x[0], p.tolist(), constant_values=value)]


@cpu_op("SPLIT", raw=True, summary="equal parts along an axis, any dtype")
def _split(attrs, x, outs):
    ax = norm_axis(np.asarray(x[0]).reshape(-1)[0], x[1].ndim)
    return np.split(x[1], len(outs), axis=ax)


@cpu_op("SPLIT_V", raw=True, summary="parts of given sizes (one may be -1), any dtype")
def _split_v(attrs, x, outs):
    ax = norm_axis(np.asarray(x[2]).reshape(-1)[0], x[0].ndim)
    sizes = [int(v) for v in np.asarray(x[1]).reshape(-1)]
    if sizes.count(-1) == 1:
        sizes[sizes.index(-1)] = x[0].shape[ax] - sum(v for v in sizes if v >= 0)
    return np.split(x[0], np.cumsum(sizes)[:-1], axis=ax)


@cpu_op("GATHER_ND", raw=True, summary="any dtype; an index out of range fails the run")
def _gather_nd(attrs, x, outs):
    p, idx = x[0], np.asarray(x[1]).astype(np.int64)
    k = idx.shape[-1]
    _in_range("gather_nd", idx, list(p.shape[:k]))
    return [p[tuple(np.moveaxis(idx, -1, 0))]]


@cpu_op("BROADCAST_TO", raw=True, summary="any dtype")
def _broadcast_to(attrs, x, outs):
    return [np.broadcast_to(x[0], tuple(outs[0].shape)).copy()]


@cpu_op("READ_VARIABLE", "ASSIGN_VARIABLE", check=_check_same_size, raw=True,
        summary="resource variables of dtypes the GPU copy does not take (e.g. int64)")
def _variable(attrs, x, outs):
    return [x[0]]
