"""DILATE (shaders/index_map.comp, mode 3): interior padding, as LiteRT's kernel.  x [s0..sn] with
dilations [d0..dn] -> [(s0 - 1) d0 + 1, ...]; element c is x[c / d] where every c % d is 0, else the
padding value (input 2: a scalar of x's dtype, constant or computed at run time).  The dilations must
be a constant int32 vector of values >= 1 (LiteRT's output is dynamic-sized otherwise).  Every dtype.
"""
from __future__ import annotations

import numpy as np

from gpuc.compiler.ops import ALWAYS, NEUTRAL, Why, declare, index_map, register, rules
from gpuc.compiler.ops.util import checked, const_input, strides

DTYPES = ("float32", "int32", "int64", "int8", "uint8", "int16", "bool", "float16")


def _dilations(node, graph):
    x = graph.t(node.inputs[0])
    dl = const_input(node, graph, 1, "dilations")
    if dl is None or dl.dtype != np.int32 or dl.ndim != 1 or dl.size != len(x.shape):
        raise ValueError(f"dilations must be a constant 1-D int32 of {len(x.shape)} values")
    if (dl < 1).any():
        raise ValueError(f"dilations {dl.tolist()} must be >= 1")
    return [int(v) for v in dl]


def _plan(node, graph):
    x, pv, y = graph.t(node.inputs[0]), graph.t(node.inputs[2]), graph.t(node.outputs[0])
    if not x.shape:
        raise ValueError("a rank-0 input cannot be dilated")
    dl = _dilations(node, graph)
    want = [(s - 1) * d + 1 for s, d in zip(x.shape, dl)]
    if pv.dtype != x.dtype or pv.size != 1:
        raise ValueError(f"padding value {pv.dtype} {list(pv.shape)} must be one {x.dtype} value")
    if list(y.shape) != want or y.dtype != x.dtype:
        raise ValueError(f"output {y.dtype} {list(y.shape)} differs from the expected {x.dtype} {want}")
    return x, pv, y, dl


@register("DILATE", check=checked(lambda n, g: _plan(n, g) and None), dtypes=DTYPES, inputs=(3, 3),
          summary="constant dilations, padding value constant or run time, every dtype")
def lower_dilate(node, graph):
    x, pv, y, dl = _plan(node, graph)
    if not y.size:
        return []
    d = dict(RANK=len(dl), OUT_SHAPE=list(y.shape), DIL=dl, IN_STRIDES=strides(x.shape))
    return [index_map.kernel(graph, node, index_map.DILATE, d, x.id, pv=pv.id)]


def _dilate_shape(node, vals, graph, need=None):
    x, pv = np.asarray(vals[0]), np.asarray(vals[2])
    dl = rules.ints(vals[1], "dilations")
    if len(dl) != x.ndim or min(dl, default=1) < 1:
        raise ValueError(f"dilations {dl} for a rank-{x.ndim} input")
    shape = [(s - 1) * d + 1 for s, d in zip(x.shape, dl)]
    if need is not None and not all(need):
        return [rules.placeholder(shape, x.dtype)]
    out = np.full([(s - 1) * d + 1 for s, d in zip(x.shape, dl)], pv.reshape(-1)[0], x.dtype)
    out[tuple(slice(None, None, d) for d in dl)] = x
    return [out]


declare("DILATE", shape=_dilate_shape, exact=ALWAYS, sym_shape=Why("no dynamic-size rule yet"),
        batch=Why("no batch rule yet: axis 0 may be dilated"), pieces=Why("not a movement-folding kind"),
        fp16=NEUTRAL, in_place=False, templates=("index_map",), flops=rules.per_output,
        cpu=Why("no CPU kernel: the GPU takes every dtype"))
