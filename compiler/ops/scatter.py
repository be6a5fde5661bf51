"""SCATTER_ND and SPARSE_TO_DENSE on the GPU (shaders/scatter_nd.comp), LiteRT's semantics
(tensorflow/lite/kernels/scatter_nd.cc, sparse_to_dense.cc), checked by tests/ops/test_scatter_segment.py:

  SCATTER_ND(indices [..., K] int32, updates [..., slice], shape [R] int32): zeros of `shape` plus every
    update at its index; duplicates accumulate in index order (each output element sums its updates
    sequentially, as LiteRT's loop does: float sums match bit for bit); an index out of range fails
    the invoke.
  SPARSE_TO_DENSE(indices [N, K] / [N] / scalar, output_shape [K], values [N] (or one value), default
    scalar): default everywhere, values[n] at index n; the last of duplicate indices wins; an index
    out of range fails the invoke; int32 or int64 indices.

Data float32 / int32 here (the 4-byte dtypes); shape / output_shape constant (they set the output
shape).  Run-time indices out of range fail the run naming the op (compiler/status.py); constant ones
are refused at compile time.
"""
from __future__ import annotations

import numpy as np

from gpuc.compiler import status
from gpuc.compiler.codegen.kernel import Kernel
from gpuc.compiler.ops import NEUTRAL, SHAPE_ONLY, Why, declare, register, rules, template
from gpuc.compiler.ops.gather import bind_indices
from gpuc.compiler.ops.step_chunks import in_chunks
from gpuc.compiler.ops.util import checked, size, strides

SCATTER, S2D = "SCATTER_ND", "SPARSE_TO_DENSE"
DTYPES = ("float32", "int32")

_BASE = dict(NIDX=3, K=2, DIMS=[4, 3], STR=[3, 1], INNER=2, IDX64=0, VSCALAR=0)
_CHECK = dict(CHECK=1, CHECK_WORD=0, STATUS_ROW=4, ITEMS=1, ITEM_OUT=0)
_I = {"idx": "int32", "status": "uint32"}
_II = dict(_I, out_="int32", src="int32", dflt="int32")
VARIANTS = {
    "scatter_nd": (dict(_BASE, FLOATS=1), {"MODE": [0], "IDX64": [0]}, ["out_", "src", "idx"], _I),
    "scatter_nd:int": (dict(_BASE, FLOATS=0), {"MODE": [0]}, ["out_", "src", "idx"], _II),
    "scatter_nd:dense": (dict(_BASE, FLOATS=1, MODE=1), {"IDX64": [0, 1], "VSCALAR": [0, 1]},
                         ["out_", "src", "idx", "dflt"], _I),
    "scatter_nd:dense-int": (dict(_BASE, FLOATS=0, MODE=1), {"IDX64": [0, 1]}, ["out_", "src", "idx", "dflt"], _II),
    "scatter_nd:chunked": (dict(_BASE, **_CHECK, CHUNKED=1, FLOATS=1), {"MODE": [0, 1]},
                           ["out_", "src", "idx", "dflt", "status", "steps"], dict(_I, steps="int32"),
                           lambda d: dict(rw=("status", "out_"))),
    "scatter_nd:chunked-int": (dict(_BASE, CHUNKED=1, FLOATS=0), {"MODE": [0, 1]},
                               ["out_", "src", "idx", "dflt", "steps"], dict(_II, steps="int32"),
                               lambda d: dict(rw=("out_",))),
    "scatter_nd:check": (dict(_BASE, **_CHECK), {"MODE": [0, 1], "FLOATS": [1]},
                         ["out_", "src", "idx", "dflt", "status"], _I, lambda d: dict(rw=("status",))),
}


def _const_ints(graph, tid, what):
    t = graph.t(tid)
    if not t.is_const:
        raise ValueError(f"{what} {t.name!r} is computed at run time: gpuc takes it constant (it sets the "
                         "output shape)")
    return [int(v) for v in np.asarray(t.data).reshape(-1)]


def _plan(node, graph):
    """(out, src, idx tensor, defaults tensor or None, K, dims, n rows, inner, vscalar)."""
    y = graph.t(node.outputs[0])
    if node.op == SCATTER:
        if len(node.inputs) != 3:
            raise ValueError(f"has {len(node.inputs)} inputs (LiteRT's kernel takes 3)")
        ind, upd, shp = (graph.t(i) for i in node.inputs)
        if ind.dtype != "int32" or shp.dtype != "int32":
            raise ValueError(f"indices {ind.dtype} / shape {shp.dtype}: LiteRT's SCATTER_ND takes int32 for both")
        shape = _const_ints(graph, node.inputs[2], "shape")
        if not ind.shape or not upd.shape or len(shp.shape) != 1:
            raise ValueError("indices and updates need rank >= 1 and shape rank 1 (LiteRT's check)")
        k, outer = ind.shape[-1], len(ind.shape) - 1
        if list(ind.shape[:-1]) != list(upd.shape[:outer]) or k > len(shape) or \
                list(upd.shape[outer:]) != shape[k:]:
            raise ValueError(f"indices {list(ind.shape)} and updates {list(upd.shape)} do not fit shape {shape} "
                             "(LiteRT's CheckShapes)")
        src, dflt, vscalar, nrows = upd, None, 0, size(ind.shape[:-1])
    else:
        if len(node.inputs) != 4:
            raise ValueError(f"has {len(node.inputs)} inputs (LiteRT's kernel takes 4)")
        ind, shp, src, dflt = (graph.t(i) for i in node.inputs)
        if ind.dtype not in ("int32", "int64") or shp.dtype != ind.dtype:
            raise ValueError(f"indices {ind.dtype} / output_shape {shp.dtype}: LiteRT takes int32 or int64, "
                             "the same for both")
        shape = _const_ints(graph, node.inputs[1], "output_shape")
        if len(ind.shape) > 2 or len(shp.shape) != 1:
            raise ValueError(f"indices have rank {len(ind.shape)} (LiteRT takes 0 to 2) or output_shape is not 1-D")
        nrows = ind.shape[0] if ind.shape else 1
        k = ind.shape[1] if len(ind.shape) == 2 else 1
        if k != len(shape):
            raise ValueError(f"indices address {k} dims of the rank-{len(shape)} output")
        if src.size != nrows and not (len(src.shape) == 0 and nrows == 1):
            raise ValueError(f"values have {src.size} elements for {nrows} indices (LiteRT's check)")
        if dflt.size != 1 or len(dflt.shape) > 1 or dflt.dtype != src.dtype:
            raise ValueError(f"default_value {dflt.name!r} must be one {src.dtype} value")
        vscalar = int(len(src.shape) == 0)
    if src.dtype not in DTYPES or y.dtype != src.dtype:
        raise ValueError(f"data {src.dtype} -> output {y.dtype} not supported on the GPU (float32, int32; the same "
                         "dtype)")
    if any(d < 0 for d in shape) or tuple(y.shape) != tuple(shape):
        raise ValueError(f"output {y.name!r} has shape {list(y.shape)}, LiteRT makes it {shape}")
    if ind.is_const:
        v = np.asarray(ind.data).astype(np.int64).reshape(nrows, k) if k else np.zeros((nrows, 0), np.int64)
        bad = (v < 0) | (v >= np.array(shape[:k], np.int64))
        if bad.any():
            raise ValueError(f"constant index {int(v[bad][0])} out of range (LiteRT fails the invoke)")
    return y, src, ind, dflt, k, shape, nrows, vscalar


def _shape(node, vals, graph, need=None):
    y, src, *_, shape, nrows, vscalar = _plan(node, graph)
    return [rules.placeholder(shape, src.dtype)]


@register(SCATTER, S2D, check=checked(lambda n, g: _plan(n, g) and None), dtypes=DTYPES + ("int64",),
          inputs=(3, 4), summary="one invocation per output element, index rows in LiteRT's order (SCATTER_ND "
                                 "sums duplicates bit-exactly; SPARSE_TO_DENSE: the last wins); float32/int32; "
                                 "out-of-range indices fail the run")
def lower_scatter(node, graph):
    y, src, ind, dflt, k, shape, nrows, vscalar = _plan(node, graph)
    if y.size == 0:
        return []
    idx, is64 = bind_indices(graph, ind)
    inner = max(size(shape[k:]), 1)
    d = dict(MODE=int(node.op == S2D), FLOATS=int(y.dtype == "float32"), NIDX=nrows, K=max(k, 1),
             DIMS=shape[:k] or [1], STR=strides(shape[:k]) or [0], INNER=inner, IDX64=is64, VSCALAR=vscalar)
    if k == 0:          # (every row addresses the one slice: component 0 of a 1-row dummy never fails)
        idx = graph.add_const(f"{node.label()}/no_index", np.zeros(max(nrows, 1), np.int32))
        d.update(IDX64=0)
    binds = [("out_", y.id), ("src", src.id), ("idx", idx)] + ([("dflt", dflt.id)] if dflt is not None else [])
    kern = Kernel("scatter_nd", binds, y.size, d, node.label())
    if not ind.is_const and nrows and k:
        status.index_check(graph, node, kern, ind.id, shape[:k])
    chunks = in_chunks(kern, graph, 2 * (d["K"] + 1), "NIDX", rw=("out_",))     # (invocation 0 also checks each row)
    return status.split(graph, kern, chunks)


# --- facts (compiler/ops/__init__.py FACT_FIELDS) ---------------------------------------------------
declare(SCATTER, S2D, shape=_shape, exact=SHAPE_ONLY, sym_shape=Why("no dynamic-size rule: its shape is a value"),
        batch=Why("no batch rule: its indices address the whole output"), pieces=Why("computes values"),
        fp16=NEUTRAL, in_place=False, templates=("scatter_nd",),
        flops=lambda node, graph: graph.t(node.outputs[0]).size * max(graph.t(node.inputs[0]).size, 1),
        cpu=Why("no CPU kernel yet for its other dtypes"))
template("scatter_nd", item_major=False, flat=False)
