"""The tiled form of a float copy_nd transpose (shaders/copy_tile.comp): where the destination is contiguous
along the innermost dim and the source along another, copy_nd's invocations read (or write) 32 elements a
stride apart; a workgroup of the tiled form moves a 32 x 32 tile through shared memory, reading and writing
consecutive addresses.  A transpose that moves the channels (NCHW <-> NHWC, MaxViT's grid partitions:
[B, C, H, W] views to [B, h, w, 7, 7, C]) is one.  Offered beside the copy as a `measured` candidate
(runtime/tuning.py times both at first load on the device), for copies of at least MIN_ELEMENTS whose
destination-contiguous dim is at least MIN_SIDE long and source-contiguous one MIN_SOURCE_RUN.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from gpuc.compiler.codegen.kernel import KernelVariant
from gpuc.compiler.ops import template
from gpuc.compiler.ops.util import known_ints

TILE, LOCAL = 32, 256            # a 32 x 32 tile, 256 invocations (32 x 8, 4 elements each)
MIN_SIDE = 8                     # the destination-contiguous dim at least this long ...
MIN_SOURCE_RUN = 4               # ... and the source-contiguous one this (MaxViT's windows: 7)
MIN_ELEMENTS = 1 << 16           # smaller copies are not worth a measurement


def _dims(d: dict):
    """(AXA, AXB) of a copy_nd kernel's defines that the tiled form takes, or None."""
    shape, src, dst = list(d["SHAPE"]), list(d["SRC_STRIDES"]), list(d["DST_STRIDES"])
    vals = shape + src + dst + [d["SRC_OFFSET"], d["DST_OFFSET"]]
    if d.get("VEC") or d.get("ELEM") or d.get("CONTIGUOUS") or not known_ints(vals):
        return None
    a = len(shape) - 1
    if a < 1 or dst[a] != 1 or src[a] == 1 or shape[a] < MIN_SIDE:
        return None
    b = next((i for i in range(a) if src[i] == 1 and shape[i] >= MIN_SOURCE_RUN), None)
    if b is None or int(np.prod(shape)) < MIN_ELEMENTS:
        return None
    return a, b


def _tile_kernel(k):
    d = k.defines
    dims = _dims(d)
    if dims is None:
        return None
    a, b = dims
    shape = list(d["SHAPE"])
    ta, tb = -(-shape[a] // TILE), -(-shape[b] // TILE)
    others = int(np.prod([n for i, n in enumerate(shape) if i not in (a, b)]))
    nwg = ta * tb * others
    # a batch's items are consecutive workgroups when dim 0 (the items, item-major) is neither tiled dim
    inner = 1 if 0 not in (a, b) else 0
    return dataclasses.replace(k, template="copy_tile", defines=dict(d, AXA=a, AXB=b, TA=ta, TB=tb, NWG=nwg),
                               invocations=nwg * LOCAL, local_x=LOCAL, variants=[], item_inner=inner)


TILE_VARIANT = KernelVariant("tile", {}, _tile_kernel, measured=True)


def offer(k):
    """Kernel `k` (a float32 copy_nd) with the tiled form among its variants where it fits."""
    if _dims(k.defines) is not None:
        k.variants.append(TILE_VARIANT)
    return k


template("copy_tile", item_major=False, flat=False)

_T = dict(RANK=3, SHAPE=[3, 40, 36], SRC_STRIDES=[1440, 1, 40], DST_STRIDES=[1440, 36, 1], SRC_OFFSET=0,
          DST_OFFSET=0, AXA=2, AXB=1, TA=2, TB=2, NWG=12, FQ_SCALE=0.0235, FQ_ZP=-5, FQ_MIN=-128, FQ_MAX=127)
VARIANTS = {     # `make shaders`
    "copy_tile": (_T, {"ACT": [0, 1, 3], "FQ": [0, 1]}, ["out_", "x"], {}, lambda d: dict(local_x=LOCAL)),
}
