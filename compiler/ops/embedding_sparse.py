"""EMBEDDING_LOOKUP_SPARSE on the GPU (shaders/embedding_sparse.comp), LiteRT's semantics (tensorflow/
lite/kernels/embedding_lookup_sparse.cc):

  inputs  ids [N] int32, indices [N, R] int32, dense_shape [R] int32 (constant here: it sets the
          output shape), weights [N] float32, value [rows, ...] float32 (rank >= 2);
  output  float32 dense_shape[:-1] + value.shape[1:]: lookup i adds value[ids[i]] * weights[i] into
          the row indices[i][:-1] names; combiner SUM, MEAN (/ total weight) or SQRTN (/ sqrt of the
          squared weights), applied per run of consecutive lookups into one row, as LiteRT does (a row
          met in separate runs is divided once per run).

An id outside [0, rows) fails the run, as LiteRT's invoke fails; an index outside dense_shape fails it
too (LiteRT 2.3 does not check those and writes out of bounds).  Both through the status words
(compiler/status.py): the compute kernel checks ids, a one-invocation kernel checks indices.
"""
from __future__ import annotations

import numpy as np

from gpuc.compiler import status
from gpuc.compiler.codegen.kernel import Kernel
from gpuc.compiler.ops import NEUTRAL, SHAPE_ONLY, Why, declare, register, rules, template
from gpuc.compiler.ops.util import checked, size

OP = "EMBEDDING_LOOKUP_SPARSE"
COMBINERS = {"SUM": 0, "MEAN": 1, "SQRTN": 2}
BIG = 2 ** 31 - 1            # the bound of indices' last column (LiteRT never reads it)
_BINDS = ["out_", "ids", "ind", "wts", "val"]
_CHECK = dict(CHECK=1, CHECK_WORD=0, STATUS_ROW=4, ITEMS=1, ITEM_OUT=0)
VARIANTS = {
    "embedding_sparse": (dict(N=4, R=2, E=3, NROWS=5, DS=[3, 4], MODE=0), {"COMB": [0, 1, 2]}, _BINDS,
                         {"ids": "int32", "ind": "int32"}),
    "embedding_sparse:check": (dict(_CHECK, N=4, R=2, E=3, NROWS=5, DS=[3, 4], COMB=1), {"MODE": [0, 1]},
                               _BINDS + ["status"], {"ids": "int32", "ind": "int32", "status": "uint32"},
                               lambda d: dict(rw=("status",))),
}


def _combiner(node) -> int:
    c = node.attrs.get("combiner", 0)
    c = COMBINERS.get(c, c) if isinstance(c, str) else int(c or 0)
    if c not in COMBINERS.values():
        raise ValueError(f"combiner {c!r} is not SUM, MEAN or SQRTN")
    return c


def _plan(node, graph):
    ids, ind, ds, w, v = (graph.t(i) for i in node.inputs)
    y = graph.t(node.outputs[0])
    for t, dt, rank in ((ids, "int32", 1), (ind, "int32", 2), (ds, "int32", 1), (w, "float32", 1)):
        if t.dtype != dt or len(t.shape) != rank:
            raise ValueError(f"{t.name!r} is {t.dtype} {list(t.shape)} (LiteRT takes {dt} of rank {rank})")
    if v.dtype != "float32" or len(v.shape) < 2:
        raise ValueError(f"value {v.name!r} is {v.dtype} {list(v.shape)} (LiteRT takes float32 of rank >= 2)")
    n, r = ind.shape
    if ids.shape[0] != n or w.shape[0] != n:
        raise ValueError(f"ids {list(ids.shape)}, indices {list(ind.shape)} and weights {list(w.shape)} differ in N")
    if not ds.is_const:
        raise ValueError(f"dense_shape {ds.name!r} is computed at run time: gpuc takes it constant (it sets the "
                         "output shape)")
    dense = [int(a) for a in np.asarray(ds.data).reshape(-1)]
    if len(dense) != r:
        raise ValueError(f"dense_shape has {len(dense)} values for indices of {r} columns (LiteRT fails the invoke)")
    if any(d < 0 for d in dense):
        raise ValueError(f"dense_shape {dense} is negative")
    out = dense[:-1] + list(v.shape[1:])
    return dict(n=n, r=r, dense=dense, out=out, e=size(v.shape[1:]), rows=int(v.shape[0]), comb=_combiner(node))


def _check(node, graph):
    p = _plan(node, graph)
    y = graph.t(node.outputs[0])
    if y.dtype != "float32" or list(y.shape) != p["out"]:
        return f"output {y.name!r} is {y.dtype} {list(y.shape)}, LiteRT makes it float32 {p['out']}"
    return None


@register(OP, check=checked(_check), dtypes=("float32", "int32"), inputs=(5, 5),
          shapes=lambda n, g: [_plan(n, g)["out"]],
          summary="SUM/MEAN/SQRTN per run of lookups, as LiteRT; bad ids or indices fail the run")
def lower_embedding_sparse(node, graph):
    p = _plan(node, graph)
    y = graph.t(node.outputs[0])
    if y.size == 0:
        return []
    ids, ind, ds, w, v = node.inputs
    binds = [("ids", ids), ("ind", ind), ("wts", w), ("val", v)]
    d = dict(N=p["n"], R=p["r"], E=p["e"], NROWS=p["rows"], COMB=p["comb"], DS=p["dense"])
    k = Kernel("embedding_sparse", [("out_", y.id)] + binds, y.size, dict(d, MODE=0), node.label())
    kernels = [k]
    if p["n"]:
        if not graph.t(ids).is_const or np.any((np.asarray(graph.t(ids).data) < 0) |
                                               (np.asarray(graph.t(ids).data) >= p["rows"])):
            status.index_check(graph, node, k, ids, [p["rows"]])
        if p["r"] > 1:
            flag = graph.add_tensor(f"{node.label()}/checked", [1], "int32")
            c = Kernel("embedding_sparse", [("out_", flag)] + binds, 1, dict(d, MODE=1), node.label() + " (indices)")
            status.index_check(graph, node, c, ind, p["dense"][:-1] + [BIG])
            kernels.insert(0, c)
    return kernels


def _shape(node, vals, graph, need=None):
    return [rules.placeholder(_plan(node, graph)["out"], "float32")]


# --- facts (compiler/ops/__init__.py FACT_FIELDS) ---------------------------------------------------
declare(OP, shape=_shape, exact=SHAPE_ONLY, sym_shape=Why("no dynamic-size rule: dense_shape is a value"),
        batch=Why("no batch rule: lookups land in rows that indices name"), pieces=Why("computes values"),
        fp16=NEUTRAL, in_place=False, templates=("embedding_sparse",),
        flops=lambda node, graph: graph.t(node.outputs[0]).size * max(graph.t(node.inputs[0]).size, 1) * 4,
        cpu=Why("no CPU kernel: the GPU runs every dtype LiteRT takes"))
template("embedding_sparse", item_major=False, flat=False)
