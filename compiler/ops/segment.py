"""SEGMENT_SUM and UNSORTED_SEGMENT_SUM / MAX / MIN / PROD on the GPU (shaders/segment_reduce.comp),
with LiteRT's semantics (tensorflow/lite/kernels/segment_sum.cc, unsorted_segment.cc):

  UNSORTED_SEGMENT_*(data, segment_ids, num_segments): out[s, ...] folds data[i, ...] over every i
    with segment_ids[i] == s (segment_ids may have several dims: a prefix of data's shape), in
    increasing i; an empty segment holds the identity (0, 1, the dtype's lowest / highest value);
    negative ids are skipped; an id >= num_segments fails the invoke.  data float32 or int32, ids int32,
    num_segments an int32 scalar or [1] (constant here: it sets the output shape).
  SEGMENT_SUM(data, segment_ids): segment_ids 1-D over data's first dim, starting at 0 and rising by
    0 or 1 (else the invoke fails); the output has ids[-1] + 1 rows.  With run-time ids that size is
    known per run: the output is computed at its bound (data's first dim) and the bundle records that
    its length is the last id + 1 (runtime/output_sizes.py trims it).

Every output element folds its segment's values in LiteRT's sequential order, so float sums and
products match LiteRT bit for bit (no atomics).  O(output elements x ids) work: fine for the sizes
these ops meet in models (feature columns, small graphs).  Bad ids at run time fail the run naming the
op (compiler/status.py); constant bad ids are refused at compile time.
"""
from __future__ import annotations

import numpy as np

from gpuc.compiler import status
from gpuc.compiler.codegen.kernel import Kernel
from gpuc.compiler.ops import NEUTRAL, SHAPE_ONLY, Why, declare, register, rules, template
from gpuc.compiler.ops.output_lengths import declare_length
from gpuc.compiler.ops.step_chunks import in_chunks
from gpuc.compiler.ops.util import checked, size

UNSORTED = {"UNSORTED_SEGMENT_SUM": 0, "UNSORTED_SEGMENT_MAX": 1, "UNSORTED_SEGMENT_MIN": 2,
            "UNSORTED_SEGMENT_PROD": 3}
SORTED = "SEGMENT_SUM"
DTYPES = ("float32", "int32")

_CHECK = dict(CHECK=1, CHECK_WORD=0, STATUS_ROW=4, ITEMS=1, ITEM_OUT=0)
_INT = {"out_": "int32", "data": "int32", "ids": "int32"}
VARIANTS = {
    "segment_reduce": (dict(NSEG=3, NIDS=5, INNER=2, FLOATS=1, SORTED=0), {"OP": [0, 1, 2, 3]},
                       ["out_", "data", "ids"], {"ids": "int32"}),
    "segment_reduce:chunked": (dict(_CHECK, NSEG=3, NIDS=5, INNER=2, FLOATS=1, CHUNKED=1),
                               {"OP": [0, 1, 2, 3], "SORTED": [0, 1]}, ["out_", "data", "ids", "status", "steps"],
                               {"ids": "int32", "status": "uint32", "steps": "int32"},
                               lambda d: dict(rw=("status", "out_"))),
    "segment_reduce:int": (dict(NSEG=3, NIDS=5, INNER=2, FLOATS=0, SORTED=0), {"OP": [0, 1, 2, 3]},
                           ["out_", "data", "ids"], _INT),
    "segment_reduce:check": (dict(_CHECK, NSEG=3, NIDS=5, INNER=2, OP=0, FLOATS=1), {"SORTED": [0, 1]},
                             ["out_", "data", "ids", "status"], {"ids": "int32", "status": "uint32"},
                             lambda d: dict(rw=("status",))),
    "segment_reduce:check-int": (dict(_CHECK, NSEG=3, NIDS=5, INNER=2, OP=3, FLOATS=0), {"SORTED": [0, 1]},
                                 ["out_", "data", "ids", "status"], dict(_INT, status="uint32"),
                                 lambda d: dict(rw=("status",))),
}


def _const(graph, tid):
    t = graph.t(tid)
    return np.asarray(t.data).astype(np.int64).reshape(t.shape) if t.is_const else None


def _plan(node, graph):
    """(data, ids, output, segments computed, run-time length or None)."""
    if len(node.inputs) != (2 if node.op == SORTED else 3):
        raise ValueError(f"has {len(node.inputs)} inputs (LiteRT's kernel takes {2 if node.op == SORTED else 3})")
    x, ids, y = graph.t(node.inputs[0]), graph.t(node.inputs[1]), graph.t(node.outputs[0])
    if x.dtype not in DTYPES or y.dtype != x.dtype:
        raise ValueError(f"data {x.name!r} is {x.dtype} and output {y.dtype} (LiteRT takes float32 or int32, "
                         "the output of the data's dtype)")
    if ids.dtype != "int32":
        raise ValueError(f"segment_ids {ids.name!r} is {ids.dtype} (LiteRT takes int32)")
    if not x.shape:
        raise ValueError(f"data {x.name!r} is a scalar")
    v = _const(graph, ids.id)
    if node.op == SORTED:
        if len(ids.shape) != 1 or ids.shape[0] != x.shape[0]:
            raise ValueError(f"segment_ids {list(ids.shape)} must be 1-D over data's first dim {x.shape[0]}")
        inner = list(x.shape[1:])
        if v is not None:
            if v.size and (v[0] != 0 or np.any(np.diff(v) < 0) or np.any(np.diff(v) > 1)):
                raise ValueError("constant segment_ids must start at 0 and rise by 0 or 1 (LiteRT fails the invoke)")
            nseg = int(v[-1]) + 1 if v.size else 0
        else:
            nseg = int(x.shape[0])
        return x, ids, y, nseg, inner, v is None
    n = graph.t(node.inputs[2])
    if n.dtype != "int32" or n.size != 1 or len(n.shape) > 1:
        raise ValueError(f"num_segments {n.name!r} is {n.dtype} {list(n.shape)} (LiteRT takes one int32)")
    if not n.is_const:
        raise ValueError(f"num_segments {n.name!r} is computed at run time: gpuc takes it constant (it sets the "
                         "output shape)")
    nseg = int(np.asarray(n.data).reshape(-1)[0])
    if nseg < 0:
        raise ValueError(f"num_segments is {nseg}")
    if list(ids.shape) != list(x.shape[:len(ids.shape)]):
        raise ValueError(f"segment_ids {list(ids.shape)} must be a prefix of data's shape {list(x.shape)}")
    if len(ids.shape) == 0 or ids.shape[0] != x.shape[0]:
        raise ValueError(f"segment_ids {list(ids.shape)} and data {list(x.shape)} differ in their first dim")
    if v is not None and v.size and v.max() >= nseg:
        raise ValueError(f"segment id {int(v.max())} >= num_segments {nseg} (LiteRT fails the invoke)")
    return x, ids, y, nseg, list(x.shape[len(ids.shape):]), False


def output_shapes(node, graph) -> list:
    x, ids, y, nseg, inner, runtime = _plan(node, graph)
    return [[nseg] + inner]


def _check(node, graph):
    x, ids, y, nseg, inner, runtime = _plan(node, graph)
    if tuple(y.shape) != tuple([nseg] + inner):
        return f"output {y.name!r} has shape {list(y.shape)}, LiteRT makes it {[nseg] + inner}"
    if y.size == 0 and not ids.is_const and ids.size:
        return (f"output {y.name!r} is empty and segment_ids {ids.name!r} are computed at run time: gpuc cannot "
                "check them as LiteRT does")
    if runtime:
        return declare_length(node, graph, [0], ids.id, rule="last_plus_one", check_only=True)
    return None


@register(SORTED, *UNSORTED, check=checked(_check), dtypes=DTYPES, inputs=(2, 3), shapes=output_shapes,
          summary="LiteRT's sequential fold per output element (bit-exact float sums / products); "
                  "float32/int32; bad ids fail the run; SEGMENT_SUM with run-time ids: rows trimmed per run")
def lower_segment(node, graph):
    x, ids, y, nseg, inner, runtime = _plan(node, graph)
    if runtime:
        declare_length(node, graph, [0], ids.id, rule="last_plus_one")
    nids, n_inner = size(ids.shape), max(size(inner), 1)
    d = dict(NSEG=nseg, NIDS=nids, INNER=n_inner, OP=UNSORTED.get(node.op, 0), FLOATS=int(x.dtype == "float32"),
             SORTED=int(node.op == SORTED))
    if y.size == 0:
        return []
    k = Kernel("segment_reduce", [("out_", y.id), ("data", x.id), ("ids", ids.id)], y.size, d, node.label())
    if not ids.is_const and nids:
        status.index_check(graph, node, k, ids.id, [nseg])
    return status.split(graph, k, in_chunks(k, graph, 2, "NIDS", rw=("out_",)))   # (2: invocation 0 also checks ids)


def _shape(node, vals, graph, need=None):
    x, ids, y, nseg, inner, runtime = _plan(node, graph)
    return [rules.placeholder([nseg] + inner, x.dtype)]


# --- facts (compiler/ops/__init__.py FACT_FIELDS) ---------------------------------------------------
declare(SORTED, *UNSORTED, shape=_shape, exact=SHAPE_ONLY,
        sym_shape=Why("no dynamic-size rule: the segment count is a value"),
        batch=Why("no batch rule: segments gather rows across the first (batch) dim"),
        pieces=Why("computes values"), fp16=NEUTRAL, in_place=False, templates=("segment_reduce",),
        flops=lambda node, graph: graph.t(node.outputs[0]).size * max(graph.t(node.inputs[1]).size, 1),
        cpu=Why("no CPU kernel: the GPU runs every dtype LiteRT takes"))
template("segment_reduce", item_major=False, flat=False)
