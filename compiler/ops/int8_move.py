"""Native int8 TRANSPOSE / PAD / PADV2 / CONCATENATION (INT8_TRANSPOSE, INT8_PAD, INT8_CONCATENATION): data
movement between int8 activations moves bytes, as LiteRT's kernels do (no requantization), with the generic
GPU kernels (copy_nd, pad) on packed int8 lanes.  PAD pads with the output zero point, PADV2 with its
constant's raw int8 value (LiteRT's pad.cc); both become INT8_PAD with an unquantized int8 constant of that
value.  CONCATENATION: LiteRT's int8 kernel requires every input on the output's grid (same scale and zero
point) and no fused activation; so does this form (a constant input: its int8 bytes, unquantized).
The other byte moves (int8_common.BYTE_MOVES: slices, gathers, tiles, splits, packs, space/depth and
space/batch moves, mirror pads, reversals, broadcasts) become INT8_<op>: the generic op's kernels on the int8
bytes, as LiteRT's int8 kernels copy them.
passes/quant.py native_int8 makes these ops (int8_common.MOVES) when the whole model runs in int8.
"""
from __future__ import annotations

import copy

import numpy as np

from gpuc.compiler.ops import ANY_COUNT, REGISTRY, declare, fact, register, rules
from gpuc.compiler.ops.int8_facts import declare_int8
from gpuc.compiler.ops.int8_common import BYTE_MOVES, FOLDS, MOVES, REFUSALS, per_tensor, scale_zp
from gpuc.compiler.ops import gather, movement, strided_slice, tile  # noqa: F401,E402 (the moves' own ops first)
from gpuc.compiler.ops.util import checked

from gpuc.compiler.ops.int8_common import CONCAT, CONV, DEPTHWISE, MAX_POOL, PAD, TRANSPOSE  # noqa: E402 (int8 op names)
_SRC = {TRANSPOSE: "TRANSPOSE", PAD: "PADV2", CONCAT: "CONCATENATION", **{v: k for k, v in BYTE_MOVES.items()}}


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


def _eligible_concat(node, graph):
    """None when CONCATENATION `node` joins int8 activations on its output's grid without an activation."""
    if len(node.outputs) != 1 or not node.inputs or min(node.inputs) < 0:
        return "no input"
    y = graph.t(node.outputs[0])
    if y.dtype != "int8" or not per_tensor(y):
        return "not an int8 activation"
    if node.attrs.get("fused_activation_function", 0):
        return "a fused activation"
    for i in node.inputs:
        x = graph.t(i)
        if x.dtype != "int8" or not per_tensor(x) or scale_zp(x) != scale_zp(y) or (x.is_const and x.data is None):
            return f"input {x.name!r} is not int8 on the output's grid"
    return REGISTRY[node.op].check(node, graph)


def _consts_as_bytes(node, graph) -> None:
    """Each constant int8 input of `node` becomes an unquantized int8 copy of its bytes (so that no pass
    dequantizes what the native form reads as bytes)."""
    node.inputs = [graph.add_const(f"{graph.t(i).name}#int8", np.asarray(graph.t(i).data, np.int8).copy())
                   if i >= 0 and graph.t(i).is_const and graph.t(i).dtype == "int8" else i for i in node.inputs]


def _concat_to_int8(node, graph) -> None:
    node.op = CONCAT
    _consts_as_bytes(node, graph)


MOVES["CONCATENATION"] = (_eligible_concat, _concat_to_int8)


def _concat_grids(node, graph):
    """LiteRT's int8 CONCATENATION refuses inputs on another grid than its output (concatenation.cc: "no
    re-scaling needed for Int8 quantized kernel"): None, or the reason naming the first such input."""
    if len(node.outputs) != 1 or node.outputs[0] < 0:
        return None
    y = graph.t(node.outputs[0])
    if y.dtype != "int8" or not per_tensor(y):
        return None
    for i in node.inputs:
        x = graph.t(i) if i >= 0 else None
        if x is not None and x.dtype == "int8" and per_tensor(x) and scale_zp(x) != scale_zp(y):
            (sx, zx), (sy, zy) = scale_zp(x), scale_zp(y)
            return (f"int8 input {x.name!r} (scale {sx:.9g}, zero point {zx}) is on another grid than the output "
                    f"(scale {sy:.9g}, zero point {zy}), which LiteRT's int8 kernel refuses")
    return None


REFUSALS["CONCATENATION"] = _concat_grids


def _eligible_bytes(node, graph):
    """None when byte-move `node` reads and writes int8 tensors with per-tensor quantization only (its other
    inputs: indices, sizes ...) and the generic op takes it."""
    if not node.outputs or min(node.outputs) < 0:
        return "no output"
    for o in node.outputs:
        y = graph.t(o)
        if y.dtype != "int8" or not per_tensor(y):
            return f"output {y.name!r} is not a per-tensor quantized int8 tensor"
    for i in node.inputs:
        x = graph.t(i) if i >= 0 else None
        if x is not None and x.dtype == "int8" and (not per_tensor(x) or (x.is_const and x.data is None)):
            return f"input {x.name!r} is not a per-tensor quantized int8 tensor"
    return REGISTRY[node.op].check(node, graph)


def _bytes_to_int8(node, graph) -> None:
    node.op = BYTE_MOVES[node.op]
    _consts_as_bytes(node, graph)


for _op in BYTE_MOVES:
    MOVES[_op] = (_eligible_bytes, _bytes_to_int8)


def fold_pads(graph) -> None:
    """An INT8_PAD of H and W only whose value is its input's zero point (input and output on one grid),
    read only by a native int8 convolution as its input (or -128, read only by an int8 MAX_POOL_2D),
    becomes that op's extra padding
    (Epilogue.pad, which ops/conv.py window takes): its taps outside the input read the zero point
    there too, so the sums are unchanged and the padded tensor is never built."""
    users = graph.consumers()
    for pad in [n for n in graph.nodes if n.op == PAD]:
        x, y = graph.t(pad.inputs[0]), graph.t(pad.outputs[0])
        amounts, value = graph.t(pad.inputs[1]), graph.t(pad.inputs[2])
        readers = users.get(y.id, [])
        if len(readers) != 1 or readers[0].op not in (CONV, DEPTHWISE, MAX_POOL) or readers[0].inputs[0] != y.id \
                or readers[0].epilogue.pad is not None or y.id in graph.outputs or y.id in graph.aliases.values():
            continue
        p = np.asarray(amounts.data)
        v = int(np.asarray(value.data).reshape(-1)[0])
        # (a max pool's window skips cells outside its input, which is what padding with -128 gives)
        if len(x.shape) != 4 or p.size != 8 or (p < 0).any() or p.reshape(4, 2)[[0, 3]].any() \
                or not per_tensor(x) or scale_zp(x) != scale_zp(y) \
                or v != (-128 if readers[0].op == MAX_POOL else scale_zp(x)[1]):
            continue
        p = p.reshape(4, 2)
        conv = readers[0]
        conv.epilogue.pad = (int(p[1, 0]), int(p[1, 1]), int(p[2, 0]), int(p[2, 1]))
        conv.inputs[0] = x.id
        conv.attrs["fused"] = ["PAD"] + conv.attrs.get("fused", [])
        graph.nodes.remove(pad)


FOLDS.append(fold_pads)


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


register(CONCAT, check=_check, dtypes=("int8",), inputs=(1, ANY_COUNT), quantized_io=True,
         summary="internal: native int8 concatenation, bytes moved (passes/quant.py native_int8)")(lower_int8_move)
for _src, _dst in BYTE_MOVES.items():
    _d = REGISTRY[_src]
    register(_dst, check=_check, dtypes=("int8", "int32", "int64"), inputs=_d.inputs, outputs=_d.outputs,
             optional=_d.optional, quantized_io=True,
             summary=f"internal: native int8 {_src.lower()}, bytes moved (passes/quant.py native_int8)")(lower_int8_move)


declare_int8(TRANSPOSE, PAD, CONCAT, pieces="not folded yet", flops=rules.per_output)
declare_int8(*BYTE_MOVES.values(), pieces="not folded yet", flops=rules.per_output)
for _src, _dst in BYTE_MOVES.items():
    declare(_dst, templates=fact(_src, "templates", ()))
declare(TRANSPOSE, CONCAT, templates=("copy_nd",))
declare(PAD, templates=("pad",))
