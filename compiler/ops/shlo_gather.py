"""STABLEHLO_GATHER on the GPU (shaders/shlo_gather.comp), LiteRT's semantics (tensorflow/lite/kernels/
stablehlo_gather.cc, the StableHLO spec's gather): offset_dims, collapsed_slice_dims, start_index_map,
index_vector_dim and slice_sizes; start indices int32 or int64, clipped so each slice fits in the
operand (never out of range); the operand of any dtype LiteRT takes (1-, 2-, 4- and 8-byte elements).
The output shape is the model's (LiteRT's Prepare recomputes it: gpuc checks they agree).
index_vector_dim must name a dim of the indices (LiteRT reads past their shape otherwise).
"""
from __future__ import annotations

import numpy as np

from gpuc.compiler.codegen.kernel import Kernel
from gpuc.compiler.ops import NEUTRAL, SHAPE_ONLY, Why, declare, register, rules, template
from gpuc.compiler.ops.math import words
from gpuc.compiler.ops.util import checked, size

OP = "STABLEHLO_GATHER"
DTYPES = ("float32", "float16", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
          "uint64", "bool")
_ARR = dict(OSHAPE=[2, 3], ISOFF=[0, 1], OPDIM=[0, 1], ISTR=[1, 1], BPOS=[0], SMAP=[0], SLICE=[1, 3],
            OPSHAPE=[4, 3], OPSTR=[3, 1], IVD=1)
VARIANTS = {
    "shlo_gather": (dict(_ARR, RR=2, OR_=2, IR=2, NIV=1, NE=6), {"ES": [1, 2, 4, 8], "IDX64": [0, 1]},
                    ["out_", "x", "idx"], {"out_": "uint32", "x": "uint32", "idx": "uint32"}),
}


def attr_ints(node, name) -> list[int]:
    """A StableHLO dims attribute as python ints (absent: none)."""
    v = node.attrs.get(name)
    return [int(a) for a in (v if v is not None else [])]


def index_vector_dim(node, irank: int) -> int:
    """The gather / scatter's index_vector_dim, checked to name a dim of the rank-`irank` indices."""
    ivd = int(node.attrs.get("index_vector_dim") or 0)
    if not 0 <= ivd < irank:
        raise ValueError(f"index_vector_dim {ivd} is not a dim of the rank-{irank} indices (LiteRT reads past "
                         "their shape)")
    return ivd


def _plan(node, graph):
    if len(node.inputs) != 2 or len(node.outputs) != 1:
        raise ValueError(f"has {len(node.inputs)} inputs and {len(node.outputs)} outputs (LiteRT takes 2 and 1)")
    x, ix, y = graph.t(node.inputs[0]), graph.t(node.inputs[1]), graph.t(node.outputs[0])
    if ix.dtype not in ("int32", "int64"):
        raise ValueError(f"start indices {ix.name!r} are {ix.dtype} (LiteRT takes int32 or int64)")
    if y.dtype != x.dtype:
        raise ValueError(f"output {y.name!r} is {y.dtype}, the operand {x.dtype}")
    off, col, smap, sl = (attr_ints(node, n) for n in ("offset_dims", "collapsed_slice_dims", "start_index_map",
                                                        "slice_sizes"))
    orank, irank, rrank = len(x.shape), len(ix.shape), len(y.shape)
    ivd = index_vector_dim(node, irank)
    if len(sl) != orank or any(not 0 <= s <= d for s, d in zip(sl, x.shape)):
        raise ValueError(f"slice_sizes {sl} do not fit the operand {list(x.shape)}")
    niv = int(ix.shape[ivd])
    if len(smap) != niv or any(not 0 <= m < orank for m in smap) or len(set(smap)) != len(smap):
        raise ValueError(f"start_index_map {smap} must name {niv} distinct operand dims")
    if any(not 0 <= c < orank for c in col) or len(set(col)) != len(col) or any(sl[c] > 1 for c in col):
        raise ValueError(f"collapsed_slice_dims {col} must be distinct operand dims of slice size <= 1")
    if sorted(off) != off or any(not 0 <= d < rrank for d in off) or len(off) != orank - len(col):
        raise ValueError(f"offset_dims {off} must be sorted output dims, one per uncollapsed operand dim")
    kept = [d for d in range(orank) if d not in col]
    bdims = [d for d in range(irank) if d != ivd]
    if rrank - len(off) != len(bdims):
        raise ValueError(f"output rank {rrank} is not {len(off)} offset dims + {len(bdims)} batch dims")
    want, b, o = [], 0, 0
    for d in range(rrank):
        if d in off:
            want.append(sl[kept[o]])
            o += 1
        else:
            want.append(int(ix.shape[bdims[b]]))
            b += 1
    if list(y.shape) != want:
        raise ValueError(f"output {y.name!r} has shape {list(y.shape)}, LiteRT makes it {want}")
    opdim, o = [], 0
    for d in range(rrank):
        opdim.append(kept[o] if d in off else 0)
        o += d in off
    return dict(x=x, ix=ix, y=y, off=off, sl=sl, smap=smap, ivd=ivd, bdims=bdims, opdim=opdim, niv=niv)


@register(OP, check=checked(lambda n, g: _plan(n, g) and None), dtypes=DTYPES, inputs=(2, 2),
          summary="general gather (offset / collapsed dims, start_index_map, slice sizes), starts clipped; "
                  "every dtype by the word")
def lower_shlo_gather(node, graph):
    p = _plan(node, graph)
    x, ix, y = p["x"], p["ix"], p["y"]
    if y.size == 0:
        return []
    es = np.dtype(x.dtype).itemsize
    rr = len(y.shape)
    d = dict(RR=rr, OR_=len(x.shape), IR=len(ix.shape), NIV=p["niv"], ES=es, IDX64=int(ix.dtype == "int64"),
             NE=y.size, OSHAPE=list(y.shape), ISOFF=[int(k in p["off"]) for k in range(rr)], OPDIM=p["opdim"],
             ISTR=[size(ix.shape[k + 1:]) for k in range(len(ix.shape))], BPOS=p["bdims"] or [0],
             SMAP=p["smap"] or [0], SLICE=p["sl"], OPSHAPE=list(x.shape),
             OPSTR=[size(x.shape[k + 1:]) for k in range(len(x.shape))], IVD=p["ivd"])
    return [Kernel("shlo_gather", [("out_", words(graph, y.id)), ("x", words(graph, x.id)),
                                   ("idx", words(graph, ix.id))], -(-y.nbytes // 4), d, node.label())]


def _shape(node, vals, graph, need=None):
    y = _plan(node, graph)["y"]
    return [rules.placeholder(y.shape, y.dtype)]


# --- facts (compiler/ops/__init__.py FACT_FIELDS) ---------------------------------------------------
declare(OP, shape=_shape, exact=SHAPE_ONLY, sym_shape=Why("no dynamic-size rule yet"),
        batch=Why("no batch rule: the dimension numbers name any dims"), pieces=Why("computes values"),
        fp16=NEUTRAL, in_place=False, templates=("shlo_gather",), flops=rules.per_output,
        cpu=Why("no CPU kernel: the GPU runs every dtype LiteRT takes"))
template("shlo_gather", item_major=False, flat=True)
