"""Every dtype through the data-movement kernels (copy_nd, tile, pad, mirror_pad, gather).

Their lowerings describe a kernel in elements, as for float32 / int32 (one element per 32-bit word);
`adapt` rewrites it for the moved tensor's dtype (shaders/elem.glsl):

* 4 bytes (float32, int32): unchanged (float32 may still be stored as float16 under --precision fp16).
* 8 bytes (int64): the tensors are bound as uint32 word views (math.words), and the geometry gains
  a last dimension of 2 (the low and high word of each element): strides and offsets double.
* 1 byte (bool, int8, uint8) and 2 bytes (int16, float16): word views; ELEM tells the template, which
  packs EL_PER elements per word.  Templates that write their whole output in order (tile, pad,
  mirror_pad, gather) run one invocation per output word; copy_nd writes a run of words
  (COPY_WORDS, edge words lane by lane, atomically) or, for any other region (CONCATENATION's box,
  PACK's planes), one element per invocation, atomically.

A value the template writes itself (PAD_VALUE) arrives in the dtype and leaves as the element's bits.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from gpuc.compiler.ops import copy_tile
from gpuc.compiler.ops.ew_vector import vectors
from gpuc.compiler.ops.math import words
from gpuc.compiler.ops.util import known_ints, strides

# the dtypes a data-movement kernel moves (what LiteRT takes for each op: its registry row's `rejects`)
DTYPES = ("float32", "int32", "bool", "int8", "uint8", "int16", "float16", "int64")
DATA = ("out_", "x")            # the bindings holding moved elements (gather's idx is left alone)

_W = {"out_": "uint32", "x": "uint32"}
_ND = dict(RANK=3, SHAPE=[2, 3, 4], SRC_STRIDES=[12, 4, 1], DST_STRIDES=[24, 8, 1], SRC_OFFSET=1, DST_OFFSET=5, N=24)
_PAD = dict(RANK=2, OUT_SHAPE=[4, 5], IN_SHAPE=[2, 3], IN_STRIDES=[3, 1], PAD_LO=[1, 1], N=20)
VARIANTS = {      # the packed and word-pair paths of the templates `adapt` rewrites
    "copy_nd:packed": (_ND, {"ELEM": [1, 2], "COPY_WORDS": [0, 1], "CONTIGUOUS": [0, 1]}, ["out_", "x"], _W,
                       lambda d: dict(rw=("out_",))),
    "tile:packed": (dict(RANK=3, OUT_SHAPE=[4, 3, 6], IN_SHAPE=[2, 1, 3], IN_STRIDES=[3, 3, 1], N=72), {"ELEM": [1, 2]},
                    ["out_", "x"], _W),
    "pad:packed": (dict(_PAD, PAD_VALUE=-3, PAD_HI=-1), {"ELEM": [1, 2, 8]}, ["out_", "x"], _W),
    "mirror_pad:packed": (dict(_PAD, OFFSET=1), {"ELEM": [1, 2]}, ["out_", "x"], _W),
    "gather:packed": (dict(INNER=3, COORD=2, OUTER=2, AXIS=4, K=2, X_DIMS=[4, 3], X_STRIDES=[3, 1], N=12),
                      {"ND": [0, 1], "IDX64": [0, 1], "ELEM": [1, 2]}, ["out_", "x", "idx"], dict(_W, idx="int32")),
}


def width(dtype: str) -> int:
    return np.dtype(dtype).itemsize


def element_bits(value, dtype: str) -> tuple[int, int]:
    """`value` as an element of `dtype`: its (low, high) 32-bit words as signed ints (high: 8-byte
    dtypes only), or for 4-byte float / int the value itself (a literal of the template's type)."""
    v = np.array([value]).astype(dtype)
    if width(dtype) == 4:
        return (float(v[0]) if v.dtype.kind == "f" else int(v[0])), 0
    raw = np.zeros(8, np.uint8)
    raw[:v.itemsize] = v.view(np.uint8)
    lo, hi = (int(w) for w in raw.view("<i4"))
    return lo, hi


def adapt(graph, kernels: list, dtype: str) -> list:
    """`kernels` (written for 4-byte elements) rewritten to move elements of `dtype`; float32 copies take
    their vector form where it fits (copy_vector)."""
    if dtype == "float32":      # the vector form, else the tiled transpose as a measured candidate
        return [copy_tile.offer(copy_vector(k)) if k.template == "copy_nd" else k for k in kernels]
    if width(dtype) == 4:
        return kernels
    return [_ADAPT[k.template](graph, k, dtype) for k in kernels]


def copy_vector(k):
    """A float32 copy_nd kernel in its vector form (shaders/copy_nd.comp VEC: out_ and x vec4 views, 4
    elements per invocation), or `k` where the form does not fit: sizes not all known, or the innermost
    dim not 4-element runs contiguous on both sides (its extent a multiple of 4, stride 1 on both, every
    other stride and both offsets multiples of 4).  ops/ew_vector.vectors() 0 (CompileOptions.ew_vectors)
    keeps the scalar form.  A transpose that keeps the channels innermost (window partitions, head
    splits) and a channel concatenation of multiples of 4 fit."""
    d = k.defines
    shape, src, dst = list(d["SHAPE"]), list(d["SRC_STRIDES"]), list(d["DST_STRIDES"])
    offs = [d["SRC_OFFSET"], d["DST_OFFSET"]]
    if vectors() < 1 or not known_ints(shape + src + dst + offs):
        return k
    if shape[-1] % 4 or src[-1] != 1 or dst[-1] != 1 or any(v % 4 for v in src[:-1] + dst[:-1] + offs):
        return k
    return replace(k, invocations=k.invocations // 4, vec4=("out_", "x"),
                   defines=dict(d, VEC=1, SHAPE=shape[:-1] + [shape[-1] // 4], SRC_STRIDES=[v // 4 for v in src[:-1]] + [1],
                                DST_STRIDES=[v // 4 for v in dst[:-1]] + [1], SRC_OFFSET=offs[0] // 4,
                                DST_OFFSET=offs[1] // 4))


def _bind_words(graph, k):
    return [(n, words(graph, t) if n in DATA else t) for n, t in k.bindings]


def _pairs(d: dict, shapes=(), stride_keys=(), zero_keys=(), offset_keys=()) -> dict:
    """Geometry defines of 8-byte elements as word pairs: a last dim of 2 (shape 2, stride 1, pad 0)."""
    d = dict(d, RANK=d["RANK"] + 1)
    for key in shapes:
        d[key] = list(d[key]) + [2]
    for key in stride_keys:
        d[key] = [2 * s for s in d[key]] + [1]
    for key in zero_keys:
        d[key] = list(d[key]) + [0]
    for key in offset_keys:
        d[key] = 2 * d[key]
    return d


def _packed(graph, k, w, **extra):
    """A template writing its whole output in order: one invocation per output word."""
    n = k.invocations
    return replace(k, bindings=_bind_words(graph, k), invocations=-(-n // (4 // w)),
                   defines=dict(k.defines, ELEM=w, N=n, **extra))


def _copy_nd(graph, k, dtype):
    w = width(dtype)
    d = k.defines
    if d.get("ACT") or d.get("FQ"):
        raise ValueError(f"{k.label}: a fused activation on a copy of {w}-byte elements")
    if w == 8:
        return replace(k, bindings=_bind_words(graph, k), invocations=2 * k.invocations,
                       defines=_pairs(d, ("SHAPE",), ("SRC_STRIDES", "DST_STRIDES"), (),
                                      ("SRC_OFFSET", "DST_OFFSET")))
    n, per = k.invocations, 4 // w
    run = list(d["DST_STRIDES"]) == strides(d["SHAPE"])            # the region is one run of out_
    first, end = d["DST_OFFSET"] // per, -(-(d["DST_OFFSET"] + n) // per)
    return replace(k, bindings=_bind_words(graph, k), invocations=end - first if run else n, rw=("out_",),
                   defines=dict(d, ELEM=w, N=n, COPY_WORDS=int(run)))


def _tile(graph, k, dtype):
    w = width(dtype)
    if w == 8:
        return replace(k, bindings=_bind_words(graph, k), invocations=2 * k.invocations,
                       defines=_pairs(k.defines, ("OUT_SHAPE", "IN_SHAPE"), ("IN_STRIDES",)))
    return _packed(graph, k, w)


def _mirror_pad(graph, k, dtype):
    w = width(dtype)
    if w == 8:
        return replace(k, bindings=_bind_words(graph, k), invocations=2 * k.invocations,
                       defines=_pairs(k.defines, ("OUT_SHAPE", "IN_SHAPE"), ("IN_STRIDES",), ("PAD_LO",)))
    return _packed(graph, k, w)


def _pad(graph, k, dtype):
    """PAD_VALUE: the lowering's value, of the moved dtype."""
    w, (lo, hi) = width(dtype), element_bits(k.defines["PAD_VALUE"], dtype)
    if w == 8:
        d = _pairs(k.defines, ("OUT_SHAPE", "IN_SHAPE"), ("IN_STRIDES",), ("PAD_LO",))
        return replace(k, bindings=_bind_words(graph, k), invocations=2 * k.invocations,
                       defines=dict(d, ELEM=8, PAD_VALUE=lo, PAD_HI=hi))
    return _packed(graph, k, w, PAD_VALUE=lo)


def _gather(graph, k, dtype):
    w = width(dtype)
    d = dict(k.defines)
    if w == 8:
        d["INNER"] *= 2
        if d.get("ND"):
            d["X_STRIDES"] = [2 * s for s in d["X_STRIDES"]]
        return replace(k, bindings=_bind_words(graph, k), invocations=2 * k.invocations, defines=d)
    return _packed(graph, k, w)


_ADAPT = {"copy_nd": _copy_nd, "tile": _tile, "pad": _pad, "mirror_pad": _mirror_pad, "gather": _gather}
