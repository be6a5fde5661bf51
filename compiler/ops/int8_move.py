"""Native int8 TRANSPOSE / PAD / PADV2 (INT8_TRANSPOSE, INT8_PAD): data movement between int8 activations
moves bytes, as LiteRT's kernels do (no requantization), with the generic GPU kernels (copy_nd, pad) on
packed int8 lanes.  PAD pads with the output zero point, PADV2 with its constant's raw int8 value
(LiteRT's pad.cc); both become INT8_PAD with an unquantized int8 constant of that value.
passes/quant.py native_int8 makes these ops (int8_common.MOVES) when the whole model runs in int8.
"""
from __future__ import annotations

import copy

import numpy as np

from gpuc.compiler.ops import NEUTRAL, REGISTRY, Why, declare, register, rules
from gpuc.compiler.ops.int8_common import MOVES, per_tensor, scale_zp
from gpuc.compiler.ops.util import checked

TRANSPOSE, PAD = "INT8_TRANSPOSE", "INT8_PAD"
_SRC = {TRANSPOSE: "TRANSPOSE", PAD: "PADV2"}


def _eligible(node, graph):
    """None when `node` (TRANSPOSE / PAD / PADV2) between int8 activations can move bytes in int8."""
    if len(node.outputs) != 1 or not node.inputs or node.inputs[0] < 0:
        return "no input"
    x, y = graph.t(node.inputs[0]), graph.t(node.outputs[0])
    if x.is_const or x.dtype != "int8" or y.dtype != "int8" or not per_tensor(y):
        return "not an int8 activation"
    if node.op == "PADV2" and len(node.inputs) > 2 and node.inputs[2] >= 0:
        v = graph.t(node.inputs[2])
        if not v.is_const or v.dtype != "int8" or v.size != 1:
            return f"pad value {v.name!r} is not one constant int8"
    return REGISTRY[node.op].check(node, graph)


def _to_int8(node, graph) -> None:
    if node.op in ("PAD", "PADV2"):
        if node.op == "PADV2" and len(node.inputs) > 2 and node.inputs[2] >= 0:
            v = int(np.asarray(graph.t(node.inputs[2]).data).reshape(-1)[0])
        else:
            v = scale_zp(graph.t(node.outputs[0]))[1]
        c = graph.add_const(f"{graph.t(node.outputs[0]).name}#pad_value", np.array([v], np.int8))
        node.inputs = list(node.inputs[:2]) + [c]
        node.op = PAD
    else:
        node.op = TRANSPOSE


for _op in ("TRANSPOSE", "PAD", "PADV2"):
    MOVES[_op] = (_eligible, _to_int8)


def _generic(node):
    g = copy.copy(node)
    g.op = _SRC[node.op]
    return g


@checked
def _check(node, graph):
    return REGISTRY[_SRC[node.op]].check(_generic(node), graph)


@register(TRANSPOSE, PAD, check=_check, dtypes=("int8",), inputs=(2, 3), optional=(2,), quantized_io=True,
          summary="internal: native int8 transpose / pad, bytes moved (passes/quant.py native_int8)")
def lower_int8_move(node, graph):
    return REGISTRY[_SRC[node.op]].lower(_generic(node), graph)


_MADE = Why("an internal op passes/quant.py native_int8 makes after shapes are propagated")
declare(TRANSPOSE, PAD, shape=_MADE, exact=_MADE, sym_shape=_MADE, batch=_MADE, pieces=Why("not folded yet"),
        fp16=NEUTRAL, in_place=False, flops=rules.per_output,
        cpu=Why("internal op: no CPU kernel (a model whose ops lack int8 kernels runs as a float program)"))
declare(TRANSPOSE, templates=("copy_nd",))
declare(PAD, templates=("pad",))
