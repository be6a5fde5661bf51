"""The index_map template (shaders/index_map.comp): data movement where each output element copies
one element of `x`, one of `d`, or a padding value, for REVERSE_SEQUENCE, MATRIX_DIAG,
MATRIX_SET_DIAG and DILATE (their modules give the mode and its geometry).

Every dtype LiteRT moves: 4-byte elements one per invocation through LD/ST (float32 may be stored as
float16), int64 as (low, high) word pairs and 1- / 2-byte elements packed in words (shaders/elem.glsl),
one output word per invocation.
"""
from __future__ import annotations

import numpy as np

from gpuc.compiler.codegen.kernel import Kernel
from gpuc.compiler.ops import template
from gpuc.compiler.ops.math import words

DTYPES = ("float32", "int32", "bool", "int8", "uint8", "int16", "float16", "int64")
REVERSE_SEQUENCE, MATRIX_DIAG, MATRIX_SET_DIAG, DILATE = 0, 1, 2, 3

_B = ["out_", "x", "d", "pv", "lens"]
_W = {"out_": "uint32", "x": "uint32", "d": "uint32", "pv": "uint32", "lens": "int32"}
_MODES = [dict(MODE=0, SEQ_N=4, SEQ_STRIDE=2, BATCH_N=3, BATCH_STRIDE=8), dict(MODE=1, MN=3),
          dict(MODE=2, MR=3, MC=4), dict(MODE=3, RANK=2, OUT_SHAPE=[5, 7], DIL=[2, 3], IN_STRIDES=[3, 1])]
VARIANTS = {}
for _m in _MODES:
    _k = _m["MODE"]
    VARIANTS[f"index_map:m{_k}"] = (_m, {"HAS_PV": [0, 1], "IDX64": [0, 1]} if _k == 0 else {"HAS_PV": [0, 1]},
                                    _B, {"lens": "int32"})
    VARIANTS[f"index_map:m{_k}w"] = (dict(_m, N=20), {"ELEM": [1, 2, 8]}, _B, _W)


def kernel(graph, node, mode: int, defines: dict, x: int, d: int = -1, pv: int = -1, lens: int = -1) -> Kernel:
    """The kernel of `node` (output 0) in `mode` with its geometry `defines` (element counts, as for
    4-byte elements); d / pv / lens: the optional bindings (-1: none)."""
    out = node.outputs[0]
    y = graph.t(out)
    w = np.dtype(y.dtype).itemsize
    n = y.size
    binds = [("out_", out), ("x", x), ("d", d), ("pv", pv)]
    defs = dict(defines, MODE=mode, HAS_PV=int(pv >= 0))
    if w == 4:
        inv = n
    else:
        binds = [(name, words(graph, t) if t >= 0 else -1) for name, t in binds]
        inv = 2 * n if w == 8 else -(-n // (4 // w))
        defs.update(ELEM=w, N=n)
    if lens >= 0:
        if graph.t(lens).dtype == "int64":
            lens, defs["IDX64"] = words(graph, lens), 1
        binds.append(("lens", lens))
    binds = [(name, t) for name, t in binds if t >= 0]
    return Kernel("index_map", binds, inv, defs, node.label())


template("index_map", item_major=False, flat=True)
