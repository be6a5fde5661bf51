"""STRIDED_SLICE: LiteRT's index normalisation (begin / end / strides, the five masks, offset) as a plan of
strided copies (copy_nd, one dispatch), and its shape, symbolic-shape and value rules.  The other
copy_nd movement ops and their shared helpers are in movement.py; movement folding
(passes/movement_pieces.py) and the attention fusion read slices through strided_slice_dims.
"""
from __future__ import annotations

import math

import numpy as np

from gpuc.compiler import sym_shapes as D
from gpuc.compiler.ops import ALWAYS, BY_SHAPE_RULE, declare, rules
from gpuc.compiler.ops.movement import COPY_FACTS, copy, expect_shape, ints, io_tensors, register_plan, same_dtype
from gpuc.compiler.ops.util import strides


# ---------------------------------------------------------------------------------------------------
# STRIDED_SLICE: TFLite's index normalisation (strided_slice.cc BuildStridedSliceParams, and
# StridedSliceStartForAxis / StridedSliceEndForAxis of strided_slice_logic.h), replicated exactly.

def _bit(mask: int, i: int) -> bool:
    return i >= 0 and bool((mask >> i) & 1)


def strided_slice_dims(in_shape, begin, end, stride, begin_mask=0, end_mask=0, ellipsis_mask=0,
                       new_axis_mask=0, shrink_axis_mask=0, offset=False):
    """[(input dim or None for a new axis, start, count, stride)] over the effective dims (shrunk
    ones have count 1), and the output shape.  Raises ValueError where LiteRT fails or its shape and iteration disagree."""
    r, n = len(in_shape), len(begin)
    if len(end) != n:
        raise ValueError(f"begin has {n} entries, end {len(end)}")
    if len(stride) < n:
        raise ValueError(f"strides has {len(stride)} entries for {n} begin entries")
    num_add = sum(1 for i in range(n) if not _bit(ellipsis_mask, i) and _bit(new_axis_mask, i))
    eff = r + num_add
    ell_mask = new_mask = 0
    ell_start, expanded, i = eff, 0, 0
    while i < eff:
        if _bit(ellipsis_mask, i):
            ell_start = i
            ell_end = max(i + 1, min(i + 1 + num_add + r - n, eff))
            expanded = ell_end - ell_start - 1
            while i < ell_end:
                ell_mask |= 1 << i
                i += 1
            continue
        if _bit(new_axis_mask, i - expanded):
            new_mask |= 1 << i
        i += 1
    dims, added_ell, added_axes = [], 0, 0
    for i in range(eff):
        if _bit(ell_mask, i) or (not _bit(new_mask, i) and i >= n + expanded):
            if _bit(ell_mask, i):
                added_ell = max(0, i - ell_start)
            spec = (i - added_axes, 0, 0, 1, True, True, False, i)      # full range
        elif _bit(new_mask, i):
            spec = (None, 0, 1, 1, False, False, False, i)
            added_axes += 1
        else:
            o = i - added_ell
            spec = (i - added_axes, begin[o], end[o], stride[o], _bit(begin_mask, o), _bit(end_mask, o),
                    _bit(shrink_axis_mask, o), i)
        dims.append(spec)
    if eff > 6:
        raise ValueError(f"{eff} dims including new axes (at most 6)")
    out, plan = [], []
    for d, b, e, s, bm, em, sh, i in dims:
        if d is not None and not 0 <= d < r:
            raise ValueError("masks do not fit the input rank")
        if s == 0:
            raise ValueError("stride value has to be non-zero")
        size_ = 1 if d is None else in_shape[d]
        start = b + size_ if b < 0 else b                                   # StridedSliceStartForAxis
        start = min(max(start, 0), size_) if s > 0 else min(max(start, -1), size_ - 1)
        if bm:
            start = 0 if s > 0 else size_ - 1
        if sh:                                                              # StridedSliceEndForAxis
            stop = start if start >= size_ else start + 1
        else:
            stop = e + start if offset else e
            stop = stop + size_ if stop < 0 else stop
            stop = min(max(stop, 0), size_) if s > 0 else min(max(stop, -1), size_ - 1)
            if em:
                stop = size_ if s > 0 else -1
        count = max(0, -((start - stop) // s) if s > 0 else -((stop - start) // -s))   # iterations
        if sh:
            if s < 0 or count != 1:
                raise ValueError(f"shrink_axis on effective dim {i} with begin {b}, stride {s}: LiteRT "
                                 f"reads no element (it needs a positive stride and an in-range begin)")
        else:
            if offset:      # LiteRT sizes this dim from end[i] (i: the effective dim) unclamped
                if i >= n:
                    raise ValueError("offset=True with more effective dims than end entries")
                declared = max(0, math.ceil(end[i] / s))
            else:
                declared = count
            if declared != count:
                raise ValueError(f"offset slice of effective dim {i} runs out of the input "
                                 f"(LiteRT sizes it {declared}, iterates {count})")
            out.append(count)
        plan.append((d, start, count, s))
    return plan, out


@register_plan("STRIDED_SLICE", inputs=(4, 4),
               summary="constant begin/end/strides (negative strides), all masks, offset; rank <= 6")
def plan_strided_slice(node, graph, emit):
    same_dtype(graph, node)
    x, y = io_tensors(node, graph)
    a = node.attrs
    for i, what in ((1, "begin"), (2, "end"), (3, "strides")):
        if i >= len(node.inputs) or graph.t(node.inputs[i]).dtype != "int32" or len(graph.t(node.inputs[i]).shape) != 1:
            raise ValueError(f"{what} must be a 1-D int32 constant (as LiteRT requires)")
    plan, out = strided_slice_dims(x.shape, ints(node, graph, 1, "begin"), ints(node, graph, 2, "end"),
                                   ints(node, graph, 3, "strides"), int(a.get("begin_mask", 0) or 0),
                                   int(a.get("end_mask", 0) or 0), int(a.get("ellipsis_mask", 0) or 0),
                                   int(a.get("new_axis_mask", 0) or 0), int(a.get("shrink_axis_mask", 0) or 0),
                                   bool(a.get("offset", False)))
    expect_shape(graph, y.id, out)
    xs = strides(x.shape)
    shape = [c for _, _, c, _ in plan]
    src = [0 if d is None else s * xs[d] for d, _, _, s in plan]
    off = sum(st * xs[d] for d, st, _, _ in plan if d is not None)
    return copy(x.id, y.id, shape, src, strides(shape), off, label=node.label())



# --- facts (compiler/ops/__init__.py FACT_FIELDS) ---------------------------------------------------
def _slice_masks(a) -> tuple:
    return (*(int(a.get(k, 0) or 0) for k in ("begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask",
                                               "shrink_axis_mask")), bool(a.get("offset", False)))


def _strided_slice_shape(node, vals, graph, need=None):
    x = vals[0]
    plan, out = strided_slice_dims(x.shape, rules.ints(vals[1], "begin"), rules.ints(vals[2], "end"),
                                   rules.ints(vals[3], "strides"), *_slice_masks(node.attrs))
    idx = [np.arange(n) for n in x.shape]
    for d, start, count, step in plan:
        if d is not None:
            idx[d] = start + np.arange(count) * step
    if x.ndim == 0:
        return [np.asarray(x).reshape(out)]
    return [np.asarray(x[np.ix_(*idx)]).reshape(out)]


def _strided_slice_sym(node, graph, values=None):
    x = D.in_shapes(node, graph)[0]
    ints = [D.const_ints(graph, node.inputs[k], node, w) for k, w in ((1, "begin"), (2, "end"), (3, "strides"))]
    _, out = strided_slice_dims(x, *ints, *_slice_masks(node.attrs))
    return [list(out)]


declare("STRIDED_SLICE", shape=_strided_slice_shape, exact=ALWAYS, sym_shape=_strided_slice_sym,
        batch="strided_slice", pieces="strided_slice", cpu="STRIDED_SLICE", **COPY_FACTS)
declare("STRIDED_SLICE", sym_value=BY_SHAPE_RULE)
