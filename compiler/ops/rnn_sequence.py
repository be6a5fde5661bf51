"""UNIDIRECTIONAL_SEQUENCE_RNN (float32) on the GPU: LiteRT's basic RNN cell over a sequence, one
shaders/rnn.comp dispatch (compiler/ops/rnn_cell.py).

TFLite inputs: 0 x [B,T,I] ([T,B,I] when time_major); 1 input weights [U,I]; 2 recurrent weights
[U,U]; 3 bias [U]; 4 hidden state [B,U] (a variable tensor: updated in place, it persists across
runs).  Output [B,T,U] ([T,B,U]).  Every fused activation (NONE, RELU, RELU_N1_TO_1, RELU6, TANH,
SIGN_BIT) as LiteRT applies it; hybrid int8 weights are refused (rnn_cell.py says why).
"""
from __future__ import annotations

from gpuc.compiler.ops import UNSAFE, SHAPE_ONLY, Why, declare, register
from gpuc.compiler.ops import rnn_cell as R
from gpuc.compiler.ops.util import checked

NAME = "UNIDIRECTIONAL_SEQUENCE_RNN"


def _plan(node, graph) -> R.Direction:
    tm = bool(node.attrs.get("time_major", False))
    b, t, i = R.seq_dims(graph, node.inputs[0], tm)
    w, r, bias, h, u = R.cell(node, graph, b, i)
    R.output(graph, node.outputs[0], (t, b, u) if tm else (b, t, u), "output")
    R.check_act(node)
    return R.Direction(node.inputs[0], w, r, bias, h, node.outputs[0], b, t, R.seq_strides(b, t, i, tm),
                       R.seq_strides(b, t, u, tm) + (0,))


@register(NAME, check=checked(lambda n, g: _plan(n, g) and None), inputs=(5, 5), outputs=(1, 1),
          summary="float32; every fused activation, time_major; state persists across runs")
def lower_rnn_sequence(node, graph):
    return R.kernel(node, graph, _plan(node, graph))


declare(NAME, shape=Why("no host rule: the model's shapes are checked against its weights"), exact=SHAPE_ONLY,
        sym_shape=Why("no dynamic-size rule: the step count is compiled into the kernel"), batch="lstm",
        pieces=Why("computes values"), fp16=UNSAFE, in_place=False, templates=("rnn",), flops=R.flops,
        cpu=Why("no CPU kernel: the GPU runs every float basic RNN"))
