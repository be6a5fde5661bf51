"""RNN (the single-step basic RNN builtin, float32) on the GPU: h = act(bias + W x + R h), the output
is the new h (shaders/rnn.comp with one step; compiler/ops/rnn_cell.py).

TFLite inputs: 0 x [B,I]; 1 input weights [U,I]; 2 recurrent weights [U,U]; 3 bias [U]; 4 hidden
state [B,U] (a variable tensor: updated in place, it persists across runs).  Output [B,U].  Every
fused activation; hybrid int8 weights are refused (rnn_cell.py says why).
"""
from __future__ import annotations

from gpuc.compiler.ops import UNSAFE, SHAPE_ONLY, Why, declare, register
from gpuc.compiler.ops import rnn_cell as R
from gpuc.compiler.ops.util import checked

NAME = "RNN"


def _plan(node, graph) -> R.Direction:
    x = graph.t(node.inputs[0])
    if len(x.shape) != 2 or min(x.shape) < 1:
        raise ValueError(f"input {x.name!r} must be a non-empty [batch, features], got {list(x.shape)}")
    b, i = x.shape
    w, r, bias, h, u = R.cell(node, graph, b, i)
    R.output(graph, node.outputs[0], (b, u), "output")
    R.check_act(node)
    return R.Direction(x.id, w, r, bias, h, node.outputs[0], b, 1, (0, i), (0, u, 0))


@register(NAME, check=checked(lambda n, g: _plan(n, g) and None), inputs=(5, 5), outputs=(1, 1),
          summary="float32 single step; every fused activation; state persists across runs")
def lower_rnn(node, graph):
    return R.kernel(node, graph, _plan(node, graph))


declare(NAME, shape=Why("no host rule: its state tensor fixes its shapes"), exact=SHAPE_ONLY,
        sym_shape=Why("no dynamic-size rule: one step of fixed size"), batch="lstm", pieces=Why("computes values"),
        fp16=UNSAFE, in_place=False, templates=("rnn",), flops=R.flops,
        cpu=Why("no CPU kernel: the GPU runs every float basic RNN"))
