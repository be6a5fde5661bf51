"""BIDIRECTIONAL_SEQUENCE_RNN (float32) on the GPU: a forward and a backward basic RNN cell over one
sequence, one shaders/rnn.comp dispatch per direction (compiler/ops/rnn_cell.py).

TFLite inputs: 0 x [B,T,I] ([T,B,I] when time_major); 1-3 forward input / recurrent weights and bias,
4 forward hidden state [B,Uf] (variable); 5-8 the same for the backward cell; 9 aux input (optional),
10-11 forward / backward aux input weights [U,A] (optional).  Outputs: forward [B,T,Uf] and backward
[B,T,Ub], or with merge_outputs one [B,T,Uf+Ub] (forward units first).  As LiteRT's kernel:
- aux input with aux weights (stacking with cross links): both cells add WA aux.  Time-major, LiteRT
  steps through the aux input with the input's stride (s * I * B; rows of A), which gpuc reproduces;
  where that reads past the aux input's end (A < I) the node is refused.
- aux input without aux weights (stacking without cross links): time-major, the backward cell reads the
  aux input instead of x (as [T,B,I]: its shape must equal x's); batch-major, LiteRT's float kernel
  still reads x for the backward cell (the aux input is ignored), and so does gpuc.
Hybrid int8 weights are refused (rnn_cell.py says why).
"""
from __future__ import annotations

from gpuc.compiler.ops import UNSAFE, SHAPE_ONLY, Why, declare, register
from gpuc.compiler.ops import rnn_cell as R
from gpuc.compiler.ops.util import checked

NAME = "BIDIRECTIONAL_SEQUENCE_RNN"


def _plan(node, graph) -> list[R.Direction]:
    a = node.attrs
    tm, merge = bool(a.get("time_major", False)), bool(a.get("merge_outputs", False))
    if len(node.outputs) != (1 if merge else 2):
        raise ValueError(f"has {len(node.outputs)} outputs; merge_outputs={merge} needs {1 if merge else 2}")
    x = node.inputs[0]
    b, t, i = R.seq_dims(graph, x, tm)
    R.check_act(node)
    cells = []
    for d, base in (("forward", 1), ("backward", 5)):
        w = R.weight(node, graph, base, (graph.t(node.inputs[base]).shape[0], i), f"{d} input weights")
        u = w.shape[0]
        R.units_fit(u, f"{d} units")
        cells.append((w, R.weight(node, graph, base + 1, (u, u), f"{d} recurrent weights"),
                      R.weight(node, graph, base + 2, (u,), f"{d} bias"),
                      R.state(node, graph, base + 3, (b, u), f"{d} hidden state")))
    uf, ub = cells[0][0].shape[0], cells[1][0].shape[0]
    has_aux, wf, wb = (R.present(node, p) for p in (9, 10, 11))
    if wf != wb:
        raise ValueError("aux input weights must be given for both cells or neither")
    if wf and not has_aux:
        raise ValueError("aux input weights without an aux input")
    aux, was, a_strides = -1, (None, None), (0, 0)
    bw_x = x
    if has_aux:
        ax = graph.t(node.inputs[9])
        if ax.dtype != "float32":
            raise ValueError(f"aux input {ax.name!r} has dtype {ax.dtype} (float32 only)")
        if wf:
            ab, at, asz = R.seq_dims(graph, ax.id, tm)
            if (ab, at) != (b, t):
                raise ValueError(f"aux input {ax.name!r} {list(ax.shape)} does not match the input's batch and time")
            was = (R.weight(node, graph, 10, (uf, asz), "forward aux input weights"),
                   R.weight(node, graph, 11, (ub, asz), "backward aux input weights"))
            if tm:      # LiteRT's time-major loop steps the aux input by the input's row size
                if (t - 1) * i * b + b * asz > t * b * asz:
                    raise ValueError(f"time-major aux input {ax.name!r} narrower than the input ({asz} < {i}): "
                                     "LiteRT's kernel steps through it with the input's stride and reads past its end")
                a_strides = (i * b, asz)
            else:
                a_strides = R.seq_strides(b, t, asz, tm)
            aux = ax.id
        elif tm:        # the backward cell's own input
            if tuple(ax.shape) != tuple(graph.t(x).shape):
                raise ValueError(f"aux input {ax.name!r} {list(ax.shape)} (the backward cell's input without aux "
                                 f"weights) must have the input's shape {list(graph.t(x).shape)}")
            bw_x = ax.id
    outs = []
    for k, (d, u, off) in enumerate((("forward", uf, 0), ("backward", ub, uf))):
        tid = node.outputs[0] if merge else node.outputs[k]
        width = uf + ub if merge else u
        R.output(graph, tid, (t, b, width) if tm else (b, t, width), f"{d} output")
        o = R.seq_strides(b, t, width, tm) + (off if merge else 0,)
        outs.append(o)
    return [R.Direction(xx, *cells[k][:3], cells[k][3], node.outputs[0] if merge else node.outputs[k], b, t,
                        R.seq_strides(b, t, i, tm), outs[k], reverse=k == 1,
                        aux=aux, wa=was[k], a_strides=a_strides)
            for k, xx in enumerate((x, bw_x))]


@register(NAME, check=checked(lambda n, g: _plan(n, g) and None), inputs=(12, 12), outputs=(1, 2),
          optional=(9, 10, 11),
          summary="float32; every fused activation, time_major, merge_outputs, aux input (with and without aux "
                  "weights); state persists across runs")
def lower_rnn_bidirectional(node, graph):
    return [k for d, tag in zip(_plan(node, graph), ("fw", "bw")) for k in R.kernel(node, graph, d, tag)]


def _flops(node, graph):
    n = 0
    for base in (1, 5):
        w, r = graph.t(node.inputs[base]).shape, graph.t(node.inputs[base + 1]).shape
        n += 2 * graph.t(node.inputs[base + 3]).size * (w[1] + r[1])
    x = graph.t(node.inputs[0]).shape
    return n * x[0 if node.attrs.get("time_major") else 1]


declare(NAME, shape=Why("no host rule: the model's shapes are checked against its weights"), exact=SHAPE_ONLY,
        sym_shape=Why("no dynamic-size rule: the step count is compiled into the kernels"), batch="lstm",
        pieces=Why("computes values"), fp16=UNSAFE, in_place=False, templates=("rnn",), flops=_flops,
        cpu=Why("no CPU kernel: the GPU runs every float basic RNN"))
