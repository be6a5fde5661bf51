"""TILE and BROADCAST_TO through shaders/tile.comp: out[c] = x[c mod in_shape] per dimension.

TILE's index map is not affine (modulo), so it cannot reuse copy_nd; BROADCAST_TO is the special
case where every repeated input dimension is 1 (the input shape is right-aligned and padded with
1s to the output rank, as numpy / LiteRT broadcast).  Multiples / shape must be constants.
"""
from __future__ import annotations

import numpy as np

from gpuc.compiler.codegen.kernel import Kernel
from gpuc.compiler.ops import Why, ALWAYS, NEUTRAL, declare, register, rules, template
from gpuc.compiler.ops.elements import DTYPES, adapt
from gpuc.compiler.ops.util import checked, const_input, size, strides

VARIANTS = {
    "tile": (dict(RANK=3, OUT_SHAPE=[4, 3, 6], IN_SHAPE=[2, 1, 3], IN_STRIDES=[3, 3, 1]), {}, ["out_", "x"]),
}


def _int_vector(node, graph, what):
    v = const_input(node, graph, 1, what)
    if v.dtype not in (np.int32, np.int64) or v.ndim != 1:
        raise ValueError(f"{what} must be a 1-D int32/int64 constant (got {v.dtype} {list(v.shape)})")
    return [int(d) for d in v]


def _shapes(node, graph):
    """(input shape padded to the output rank, output shape)."""
    x, y = graph.t(node.inputs[0]), graph.t(node.outputs[0])
    if node.op == "TILE":
        m = _int_vector(node, graph, "multiples")
        if len(m) != len(x.shape):
            raise ValueError(f"{len(m)} multiples for a rank-{len(x.shape)} input")
        if min(m, default=0) < 0:
            raise ValueError(f"negative multiples {m}")
        exp, xs = [d * k for d, k in zip(x.shape, m)], list(x.shape)
    else:
        exp = _int_vector(node, graph, "shape")
        if len(exp) < len(x.shape):
            raise ValueError(f"shape {exp} has a lower rank than the input {list(x.shape)}")
        xs = [1] * (len(exp) - len(x.shape)) + list(x.shape)
        if any(a != b and a != 1 for a, b in zip(xs, exp)):
            raise ValueError(f"input {list(x.shape)} cannot be broadcast to {exp}")
    if list(y.shape) != exp:
        raise ValueError(f"output {list(y.shape)} differs from the expected {exp}")
    if x.dtype != y.dtype:
        raise ValueError(f"input dtype {x.dtype} differs from output dtype {y.dtype}")
    return xs, exp


@checked
def _check(node, graph):
    _shapes(node, graph)
    return None


@register("TILE", "BROADCAST_TO", check=_check, inputs=(2, 2), dtypes=DTYPES,
          summary="constant multiples / shape, any rank")
def lower_tile(node, graph):
    xs, ys = _shapes(node, graph)
    if not size(ys):
        return []
    defines = dict(RANK=max(len(ys), 1), OUT_SHAPE=ys or [1], IN_SHAPE=xs or [1], IN_STRIDES=strides(xs) or [1])
    return adapt(graph, [Kernel("tile", [("out_", node.outputs[0]), ("x", node.inputs[0])], size(ys), defines,
                                node.label())], graph.t(node.outputs[0]).dtype)


# --- facts (compiler/ops/__init__.py FACT_FIELDS) ---------------------------------------------------
def _tile_shape(node, vals, graph, need=None):
    return [np.tile(np.asarray(vals[0]), rules.ints(vals[1], "multiples"))]


def _broadcast_to_shape(node, vals, graph, need=None):
    return [np.broadcast_to(vals[0], rules.ints(vals[1], "shape"))]


_COMMON = dict(exact=ALWAYS, sym_shape=Why("no dynamic-size rule yet"), fp16=NEUTRAL, in_place=False,
               templates=("tile",), flops=rules.per_output)
declare("TILE", shape=_tile_shape, batch="tile", pieces="tile", cpu="TILE", **_COMMON)
declare("BROADCAST_TO", shape=_broadcast_to_shape, batch="broadcast_to", pieces="broadcast_to", cpu="BROADCAST_TO",
        **_COMMON)
template("tile", item_major=True, flat=True)
