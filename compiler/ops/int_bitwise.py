"""STABLEHLO_AND on integers and STABLEHLO_SHIFT_LEFT on the GPU (shaders/int_bitwise.comp), as LiteRT
2.3 runs them (two operands and the output of one dtype and shape; compiler/ops/stablehlo.py keeps
these nodes and lowers bool AND to LOGICAL_AND):

  AND: bitwise, every integer dtype LiteRT takes (int8/16/32/64, uint8/16/32).
  SHIFT_LEFT: int8 / int16 / int32 (LiteRT refuses the others): the value shifted in int32 and
    truncated to the dtype (int8: 100 << 8 is 0).  A count outside [0, 31] gives 0 here; LiteRT's
    answer for those depends on which of its code paths (vector or scalar tail) meets the element
    (measured: 0 in vector lanes, the count taken mod 32 in the scalar tail), so gpuc takes the
    vector lanes' answer (StableHLO's own: shifting past the width gives 0).
"""
from __future__ import annotations

import numpy as np

from gpuc.compiler.codegen.kernel import Kernel
from gpuc.compiler.ops import INTEGER, NEUTRAL, Why, declare, register, rules, template
from gpuc.compiler.ops.math import words

AND, SHL = "STABLEHLO_AND", "STABLEHLO_SHIFT_LEFT"
AND_DTYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "bool")
SHL_DTYPES = ("int8", "int16", "int32")
VARIANTS = {
    "int_bitwise": ({}, {"OPK": [0, 1], "ES": [1, 2, 4]}, ["out_", "a", "b"],
                    {"out_": "uint32", "a": "uint32", "b": "uint32"}),
    "int_bitwise:int": (dict(ES=4), {"OPK": [0, 1]}, ["out_", "a", "b"],
                        {"out_": "int32", "a": "int32", "b": "int32"}),
}


def _check(node, graph):
    a, b, y = graph.t(node.inputs[0]), graph.t(node.inputs[1]), graph.t(node.outputs[0])
    if a.dtype != b.dtype or a.dtype != y.dtype or tuple(a.shape) != tuple(b.shape) or tuple(a.shape) != tuple(y.shape):
        return f"operands {a.dtype} {list(a.shape)} / {b.dtype} {list(b.shape)} and output {y.dtype} {list(y.shape)} " \
               "must have one dtype and shape (LiteRT's kernel)"
    return None


def _numpy(node, x, c):
    if node.op == AND:
        return np.bitwise_and(x, c)
    v = np.where((c < 0) | (c > 31), 0, x.astype(np.int64) << np.clip(c.astype(np.int64), 0, 31))
    return (((v + 2 ** 31) % 2 ** 32) - 2 ** 31).astype(np.int64).astype(x.dtype)


@register(AND, check=_check, dtypes=AND_DTYPES, inputs=(2, 2),
          summary="bitwise on integers (bool: LOGICAL_AND), by the 32-bit word")
@register(SHL, check=_check, dtypes=SHL_DTYPES, inputs=(2, 2),
          summary="int32 shift truncated to the dtype; counts outside [0, 31] give 0")
def lower_int_bitwise(node, graph):
    y = graph.t(node.outputs[0])
    n = -(-y.nbytes // 4)
    if n == 0:
        return []
    d = dict(OPK=int(node.op == SHL), ES=np.dtype(y.dtype).itemsize)
    return [Kernel("int_bitwise", [("out_", words(graph, y.id)), ("a", words(graph, node.inputs[0])),
                                   ("b", words(graph, node.inputs[1]))], n, d, node.label())]


def _shape(node, vals, graph, need=None):
    if need is not None and all(need[:2]):
        return [_numpy(node, np.asarray(vals[0]), np.asarray(vals[1]))]
    return [rules.placeholder(graph.t(node.outputs[0]).shape, graph.t(node.outputs[0]).dtype)]


# --- facts (compiler/ops/__init__.py FACT_FIELDS) ---------------------------------------------------
declare(AND, SHL, shape=_shape, exact=INTEGER, sym_shape="same",
        batch=Why("no batch rule: packed lanes of 1- and 2-byte dtypes straddle batch items"),
        pieces=Why("computes values"), fp16=NEUTRAL, in_place=False, templates=("int_bitwise",),
        flops=rules.per_output, cpu=Why("no CPU kernel: the GPU runs every dtype LiteRT takes"))
template("int_bitwise", item_major=False, flat=True)
