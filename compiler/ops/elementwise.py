"""Elementwise ops: ADD SUB MUL (numpy broadcasting, fused activation) and unary activations."""
from __future__ import annotations

from gpuc.compiler.codegen.kernel import Kernel
from gpuc.compiler.ops import register
from gpuc.compiler.ops.util import act_code, check_act, checked, size, strides

BINARY = {"ADD": 0, "SUB": 1, "MUL": 2}
UNARY = {"LOGISTIC": 1, "RELU": 2, "RELU6": 3, "TANH": 4, "RELU_N1_TO_1": 5}


def broadcast_strides(in_shape, out_shape):
    """Element strides of `in_shape` aligned to `out_shape`, 0 on broadcast dims."""
    r = len(out_shape)
    shape = [1] * (r - len(in_shape)) + list(in_shape)
    st = strides(shape)
    return [0 if shape[d] == 1 and out_shape[d] != 1 else st[d] for d in range(r)]


@checked
def _check_binary(node, graph):
    if len(node.inputs) != 2:
        return "needs 2 inputs"
    a, b, y = (graph.t(i) for i in (*node.inputs, node.outputs[0]))
    r = len(y.shape)
    if len(a.shape) > r or len(b.shape) > r:
        return "output rank is lower than an input's"
    for s in (a.shape, b.shape):
        padded = [1] * (r - len(s)) + list(s)
        if any(p != 1 and p != o for p, o in zip(padded, y.shape)):
            return f"shapes {list(a.shape)} and {list(b.shape)} do not broadcast to {list(y.shape)}"
    return check_act(node, graph)


@register(*BINARY, check=_check_binary, inputs=(2, 2), summary="numpy broadcasting, fused activation")
def lower_binary(node, graph):
    a, b, y = (graph.t(i) for i in (*node.inputs, node.outputs[0]))
    same = tuple(a.shape) == tuple(b.shape) == tuple(y.shape)
    defines = dict(OP=BINARY[node.op], ACT=act_code(node), SAME_SHAPE=int(same), RANK=max(len(y.shape), 1),
                   OUT_SHAPE=list(y.shape) or [1], A_STRIDES=broadcast_strides(a.shape, y.shape) or [0],
                   B_STRIDES=broadcast_strides(b.shape, y.shape) or [0])
    binds = [("out_", y.id), ("a", a.id), ("b", b.id)]
    return [Kernel("binary", binds, size(y.shape), defines, node.label())]


@checked
def _check_unary(node, graph):
    if graph.t(node.inputs[0]).size != graph.t(node.outputs[0]).size:
        return "input and output sizes differ"
    return None


@register(*UNARY, check=_check_unary, inputs=(1, 1), summary="elementwise activation")
def lower_unary(node, graph):
    y = graph.t(node.outputs[0])
    binds = [("out_", y.id), ("x", node.inputs[0])]
    return [Kernel("unary", binds, size(y.shape), dict(FN=UNARY[node.op]), node.label())]
