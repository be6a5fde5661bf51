"""LSTM (the non-sequence builtin, float32, full kernel): one time step of
UNIDIRECTIONAL_SEQUENCE_LSTM, which is how LiteRT evaluates it too (the same EvalFloat on a
length-1 sequence).  The node is checked and lowered by compiler/ops/lstm.py on a T=1 view:
x [B, I] as [B, 1, I] and the output [B, O] as [B, 1, O] (views of the same memory).  Inputs as
there (0 x, 1-8 gate weights, 9-11 peephole, 12-15 biases, 16-17 projection, 18-19 variable
state, 20-23 layer norm); LiteRT's 4-output BASIC kernel (kernel_type 1) is not supported."""
from __future__ import annotations

import dataclasses

from gpuc.compiler.ir import Node
from gpuc.compiler.ops import NEUTRAL, SHAPE_ONLY, Why, declare, register, rules
from gpuc.compiler.ops.lstm import OPTIONAL, lstm_check as _check_seq, lower_lstm
from gpuc.compiler.ops.util import checked


class SeqView:
    """The graph, with some tensors seen under another shape (for checking without adding views)."""

    def __init__(self, graph, shapes: dict):
        self._graph, self._shapes = graph, shapes

    def t(self, tid):
        t = self._graph.t(tid)
        return dataclasses.replace(t, shape=self._shapes[tid]) if tid in self._shapes else t

    def __getattr__(self, name):
        return getattr(self._graph, name)


def _seq_node(node, x_id, y_id) -> Node:
    attrs = {k: node.attrs[k] for k in ("fused_activation_function", "cell_clip", "proj_clip") if k in node.attrs}
    return Node("UNIDIRECTIONAL_SEQUENCE_LSTM", [x_id] + list(node.inputs[1:]), [y_id], dict(attrs, time_major=False),
                node.version, node.index)


def _shapes(node, graph):
    x, y = graph.t(node.inputs[0]), graph.t(node.outputs[0])
    if len(x.shape) != 2 or len(y.shape) != 2:
        raise ValueError(f"input and output must be 2-D [batch, features] (got {list(x.shape)} -> {list(y.shape)})")
    if int(node.attrs.get("kernel_type", 0) or 0) != 0:
        raise ValueError("the BASIC LSTM kernel (kernel_type 1) is not supported")
    return (x.shape[0], 1, x.shape[1]), (y.shape[0], 1, y.shape[1])


@checked
def lstm_check(node, graph):
    xs, ys = _shapes(node, graph)
    return _check_seq(_seq_node(node, node.inputs[0], node.outputs[0]),
                      SeqView(graph, {node.inputs[0]: xs, node.outputs[0]: ys}))


@register("LSTM", check=lstm_check, inputs=(20, 24), optional=OPTIONAL,
          summary="float32 full kernel (one step of the sequence LSTM); CIFG, peephole, projection, clips; "
                  "state persists across runs")
def lower_lstm_step(node, graph):
    xs, ys = _shapes(node, graph)
    views = []
    for tid, shape in ((node.inputs[0], xs), (node.outputs[0], ys)):
        t = graph.t(tid)
        v = graph.add_tensor(f"{t.name}/seq1", shape, t.dtype)
        graph.aliases[v] = tid
        views.append(v)
    return lower_lstm(_seq_node(node, *views), graph)


# --- facts (compiler/ops/__init__.py FACT_FIELDS) ---------------------------------------------------
declare("LSTM", shape=Why("no shape rule: its state tensors fix its shapes"), exact=SHAPE_ONLY,
        sym_shape=Why("no dynamic-size rule: one step of fixed size"), batch="lstm", pieces=Why("computes values"),
        fp16=NEUTRAL, in_place=False, templates=("lstm",), flops=rules.per_output,
        cpu=Why("no CPU kernel: the GPU runs every float LSTM"))
