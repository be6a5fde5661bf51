"""BUCKETIZE on the GPU (shaders/bucketize.comp), LiteRT's semantics (tensorflow/lite/kernels/
bucketize.cc): out = the index of the first boundary greater than the value (std::upper_bound; NaN
goes past the last), int32, for float32 and int32 inputs.  The boundaries (the op's attribute) must be
sorted, as LiteRT's Prepare demands.  LiteRT's int64 / float64 inputs run on the CPU (runtime/cpu_ops.py).
"""
from __future__ import annotations

import numpy as np

from gpuc.compiler.codegen.kernel import Kernel
from gpuc.compiler.ops import ALWAYS, NEUTRAL, Why, declare, register, template
from gpuc.compiler.ops.util import checked

OP = "BUCKETIZE"
VARIANTS = {
    "bucketize": (dict(NB=3, FLOATS=1), {}, ["out_", "x", "bnd"], {"out_": "int32"}),
    "bucketize:int": (dict(NB=3, FLOATS=0), {}, ["out_", "x", "bnd"], {"out_": "int32", "x": "int32"}),
}


def boundaries(node) -> np.ndarray:
    b = np.asarray(node.attrs.get("boundaries") or [], np.float32).reshape(-1)
    if b.size and not np.all(b[:-1] <= b[1:]):
        raise ValueError("boundaries are not sorted (LiteRT's Prepare fails: 'Expected sorted boundaries')")
    return b


def _plan(node, graph):
    x, y = graph.t(node.inputs[0]), graph.t(node.outputs[0])
    if y.dtype != "int32" or tuple(y.shape) != tuple(x.shape):
        raise ValueError(f"output {y.name!r} is {y.dtype} {list(y.shape)}, LiteRT makes it int32 {list(x.shape)}")
    return x, y, boundaries(node)


@register(OP, check=checked(lambda n, g: _plan(n, g) and None), dtypes=("float32", "int32"), inputs=(1, 1),
          summary="std::upper_bound per element; float32/int32 on the GPU (int64/float64 on the CPU)")
def lower_bucketize(node, graph):
    x, y, b = _plan(node, graph)
    if y.size == 0:
        return []
    bnd = graph.add_const(f"{node.label()}/boundaries", b if b.size else np.zeros(1, np.float32))
    return [Kernel("bucketize", [("out_", y.id), ("x", x.id), ("bnd", bnd)], y.size,
                   dict(NB=int(b.size), FLOATS=int(x.dtype == "float32")), node.label())]


def values(b, x) -> np.ndarray:
    """LiteRT's result in numpy (C++'s conversions: an integer value becomes float; float64 stays)."""
    x = np.asarray(x)
    v = x.astype(np.float32) if x.dtype.kind in "iub" else x
    return np.searchsorted(b.astype(v.dtype), v, side="right").astype(np.int32)


def _shape(node, vals, graph, need=None):
    return [values(boundaries(node), vals[0])]


# --- facts (compiler/ops/__init__.py FACT_FIELDS) ---------------------------------------------------
declare(OP, shape=_shape, exact=ALWAYS, sym_shape="same", batch="unary", pieces=Why("computes values"), fp16=NEUTRAL, in_place=True,
        templates=("bucketize",), flops=lambda node, graph: graph.t(node.outputs[0]).size * 8, cpu=OP)
template("bucketize", item_major=True, flat=True)
