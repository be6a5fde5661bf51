"""Native int8 RESIZE_BILINEAR / RESIZE_NEAREST_NEIGHBOR (INT8_RESIZE_BILINEAR, INT8_RESIZE_NEAREST_NEIGHBOR), as
LiteRT's int8 kernels compute them: on the raw bytes, whatever the input and output grids (LiteRT neither
checks nor uses them, so the float view, which dequantizes and requantizes, differs where they differ).

* RESIZE_BILINEAR (reference_ops::ResizeBilinearInteger, which the optimized kernel calls for int8): 10-bit
  fixed point throughout.  scale_10 = (2^10 * in + out / 2) / out, or (2^10 * (in - 1) + (out - 1) / 2) /
  (out - 1) with align_corners and out > 1; the source coordinate v = o * scale_10 (half_pixel_centers:
  + scale_10 / 2 - 2^9), lo = max(v / 2^10, 0), hi = min((v + 2^10 - 1) / 2^10, in - 1) (C++ division), the
  weights 2^10 - (v - 2^10 lo) and v - 2^10 lo along each axis; the four products summed (at most 2^29: int32),
  + 2^19 by the sum's sign (-2^19 at 0) and divided by 2^20 truncating (LiteRT's double-rounding build: half
  away from zero).  align_corners with half_pixel_centers: LiteRT refuses it (so does the generic check).
* RESIZE_NEAREST_NEIGHBOR (reference_ops::ResizeNearestNeighbor): the bytes at GetNearestNeighbor's source
  indices, computed here in float32 as LiteRT computes them (the float kernel's indices): the same gather, as
  bilinear with weight 0 on `hi`.

Both run shaders/int8_eltwise.comp OP 12 over a table of the source rows and columns (lo, hi, weight of hi)
made here at compile time."""
from __future__ import annotations

import copy
import math

import numpy as np

from gpuc.compiler.codegen.kernel import Kernel
from gpuc.compiler.ops import REGISTRY, register
from gpuc.compiler.ops.int8_facts import declare_int8
from gpuc.compiler.ops.int8_common import int8_activation, native_form, per_tensor
from gpuc.compiler.ops import resize  # noqa: F401 (the generic op's check first)
from gpuc.compiler.ops.math import words
from gpuc.compiler.ops.util import checked, const_input

from gpuc.compiler.ops.int8_common import RESIZE_BILINEAR, RESIZE_NEAREST  # noqa: E402 (the int8 op names)
_SRC = {RESIZE_BILINEAR: "RESIZE_BILINEAR", RESIZE_NEAREST: "RESIZE_NEAREST_NEIGHBOR"}


def _tdiv(a: int, b: int) -> int:
    """C++ integer division (toward zero), b > 0."""
    q = abs(a) // b
    return q if a >= 0 else -q


def bilinear_axis(n_in: int, n_out: int, align_corners: bool, half_pixel: bool) -> np.ndarray:
    """[3, n_out] int32: lo, hi and the weight of hi (of 2^10) along one axis, as ResizeBilinearInteger."""
    if align_corners and n_out > 1:
        s = ((1 << 10) * (n_in - 1) + (n_out - 1) // 2) // (n_out - 1)
    else:
        s = ((1 << 10) * n_in + n_out // 2) // n_out
    t = np.zeros((3, n_out), np.int64)
    for o in range(n_out):
        v = o * s + s // 2 - (1 << 9) if half_pixel else o * s
        lo = min(max(_tdiv(v, 1 << 10), 0), n_in - 1)       # (LiteRT does not clamp lo above: never past the input)
        hi = min(_tdiv(v + (1 << 10) - 1, 1 << 10), n_in - 1)
        t[:, o] = lo, hi, v - (1 << 10) * lo
    return t.astype(np.int32)


def nearest_axis(n_in: int, n_out: int, align_corners: bool, half_pixel: bool) -> np.ndarray:
    """[3, n_out] int32: GetNearestNeighbor's source index (twice) and weight 0, in float32 as LiteRT."""
    f = np.float32
    scale = f(f(n_in - 1) / f(n_out - 1)) if align_corners and n_out > 1 else f(f(n_in) / f(n_out))
    t = np.zeros((3, n_out), np.int64)
    for o in range(n_out):
        v = f(f(f(o) + f(0.5 if half_pixel else 0.0)) * scale)
        i = math.floor(float(v) + 0.5) if align_corners else math.floor(float(v))     # (TfLiteRound: v >= 0)
        i = min(i, n_in - 1)
        if half_pixel:
            i = max(i, 0)
        t[:, o] = i, i, 0
    return t.astype(np.int32)


def _generic(node):
    g = copy.copy(node)
    g.op = _SRC.get(node.op, node.op)
    return g


def _plan(node, graph):
    x, y = graph.t(node.inputs[0]), graph.t(node.outputs[0])
    if not int8_activation(graph, x.id) or y.dtype != "int8" or not per_tensor(y):
        raise ValueError("input and output must be per-tensor quantized int8 activations")
    why = REGISTRY[_SRC[node.op] if node.op in _SRC else node.op].check(_generic(node), graph)
    if why:
        raise ValueError(why)
    const_input(node, graph, 1, "size")
    return x, y


@checked
def _check(node, graph):
    _plan(node, graph)
    return None


@register(RESIZE_BILINEAR, RESIZE_NEAREST, check=_check, dtypes=("int8",), inputs=(2, 2), quantized_io=True,
          summary="internal: native int8 resize on the raw bytes (passes/quant.py native_int8)")
def lower_int8_resize(node, graph):
    x, y = _plan(node, graph)
    n, h, w, c = (int(d) for d in x.shape)
    oh, ow = int(y.shape[1]), int(y.shape[2])
    ac = bool(node.attrs.get("align_corners", False))
    hp = bool(node.attrs.get("half_pixel_centers", False))
    axis = bilinear_axis if node.op == RESIZE_BILINEAR else nearest_axis
    table = np.concatenate([axis(h, oh, ac, hp).reshape(-1), axis(w, ow, ac, hp).reshape(-1)])
    lut = graph.add_const(f"{y.name}#resize_table", table)
    d = dict(NOUT=y.size, OP=12, H=h, W=w, C=c, OH=oh, OW=ow)
    binds = [("out_", words(graph, y.id)), ("a", words(graph, x.id)), ("lut", lut)]
    return [Kernel("int8_eltwise", binds, -(-y.size // 4), d, node.label())]


native_form(("RESIZE_BILINEAR", RESIZE_BILINEAR), ("RESIZE_NEAREST_NEIGHBOR", RESIZE_NEAREST), check=_check)

declare_int8(RESIZE_BILINEAR, RESIZE_NEAREST, templates=("int8_eltwise",), flops=lambda n,
             g: 8 * g.t(n.outputs[0]).size)
