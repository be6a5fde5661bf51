"""MATRIX_DIAG and MATRIX_SET_DIAG (shaders/index_map.comp, modes 1 and 2), as LiteRT's kernels.

MATRIX_DIAG: x [..., n] -> [..., n, n], x on the diagonal of each matrix, zeros elsewhere.
MATRIX_SET_DIAG: x [..., r, c] with d [..., min(r, c)] -> x with its diagonals replaced by d (LiteRT
reads d without checking its shape; gpuc requires it to hold min(r, c) values per matrix).
Every dtype LiteRT's kernels move.
"""
from __future__ import annotations

import numpy as np

from gpuc.compiler.ops import ALWAYS, NEUTRAL, Why, declare, index_map, register, rules
from gpuc.compiler.ops.util import checked

DTYPES = ("float32", "int32", "int64", "int8", "uint8", "int16")
# (LiteRT's kernels move bool and float16 as 4-byte floats: past the end of their tensors)
REJECTS = ("bool", "float16")


def _diag_plan(node, graph):
    x, y = graph.t(node.inputs[0]), graph.t(node.outputs[0])
    if not x.shape:
        raise ValueError("a rank-0 input has no diagonal")
    want = list(x.shape) + [x.shape[-1]]
    if list(y.shape) != want or y.dtype != x.dtype:
        raise ValueError(f"output {y.dtype} {list(y.shape)} differs from the expected {x.dtype} {want}")
    return x, y


def _set_plan(node, graph):
    x, dg, y = graph.t(node.inputs[0]), graph.t(node.inputs[1]), graph.t(node.outputs[0])
    if len(x.shape) < 2:
        raise ValueError(f"input {list(x.shape)} must have rank >= 2")
    r, c = int(x.shape[-2]), int(x.shape[-1])
    if dg.size != x.size // max(r * c, 1) * min(r, c) or dg.dtype != x.dtype:
        raise ValueError(f"diagonal {dg.dtype} {list(dg.shape)} must hold {x.dtype} {list(x.shape[:-2]) + [min(r, c)]}")
    if list(y.shape) != list(x.shape) or y.dtype != x.dtype:
        raise ValueError(f"output {y.dtype} {list(y.shape)} differs from the input {x.dtype} {list(x.shape)}")
    return x, dg, y, r, c


@register("MATRIX_DIAG", check=checked(lambda n, g: _diag_plan(n, g) and None), dtypes=DTYPES, inputs=(1, 1), rejects=REJECTS,
          summary="batched diagonal matrices")
def lower_matrix_diag(node, graph):
    x, y = _diag_plan(node, graph)
    if not y.size:
        return []
    return [index_map.kernel(graph, node, index_map.MATRIX_DIAG, dict(MN=int(x.shape[-1])), x.id)]


@register("MATRIX_SET_DIAG", check=checked(lambda n, g: _set_plan(n, g) and None), dtypes=DTYPES, inputs=(2, 2), rejects=REJECTS,
          summary="batched diagonals replaced, any matrix shape")
def lower_matrix_set_diag(node, graph):
    x, dg, y, r, c = _set_plan(node, graph)
    if not y.size:
        return []
    return [index_map.kernel(graph, node, index_map.MATRIX_SET_DIAG, dict(MR=r, MC=c), x.id, d=dg.id)]


# --- facts (compiler/ops/__init__.py FACT_FIELDS) ---------------------------------------------------
def _diag_shape(node, vals, graph, need=None):
    x = np.asarray(vals[0])
    n = x.shape[-1]
    out = np.zeros(x.shape + (n,), x.dtype)
    idx = np.arange(n)
    out[..., idx, idx] = x
    return [out]


def _set_diag_shape(node, vals, graph, need=None):
    x, dg = np.array(vals[0]), np.asarray(vals[1])
    k = min(x.shape[-2:])
    idx = np.arange(k)
    x[..., idx, idx] = dg.reshape(x.shape[:-2] + (k,))
    return [x]


_COMMON = dict(exact=ALWAYS, sym_shape=Why("no dynamic-size rule yet"),
               batch=Why("no batch rule yet: a rank-2 operand's axis 0 is a matrix axis"),
               pieces=Why("not a movement-folding kind"), fp16=NEUTRAL, in_place=False, templates=("index_map",),
               flops=rules.per_output, cpu=Why("no CPU kernel: the GPU takes every dtype LiteRT does"))
declare("MATRIX_DIAG", shape=_diag_shape, **_COMMON)
declare("MATRIX_SET_DIAG", shape=_set_diag_shape, **_COMMON)
