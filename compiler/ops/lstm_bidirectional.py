"""BIDIRECTIONAL_SEQUENCE_LSTM (float32) on the GPU: a forward and a backward LSTM over one sequence,
each one shaders/lstm.comp dispatch as UNIDIRECTIONAL_SEQUENCE_LSTM runs it (compiler/ops/lstm.py
checks and lowers each direction on a view of the node), the backward one stepping last to first.

TFLite inputs: 0 x [T,B,I] ([B,T,I] unless time_major, which defaults to true here); 1-17 the forward
LSTM's weights as UNIDIRECTIONAL_SEQUENCE_LSTM's 1-17 (gate weights, peephole, biases, projection);
18-34 the backward one's; 35-36 forward output / cell state, 37-38 backward (variable tensors: they
persist across runs); 39 aux input; 40-43 forward aux input weights (i, f, c, o gates, [C,A]); 44-47
backward.  Outputs: forward [.., Of] and backward [.., Ob], or with merge_outputs one [.., Of+Ob]
(forward first).  As LiteRT's kernel: an aux input with aux weights adds WA aux to both directions'
gates; an aux input without aux weights is the backward direction's input (stacking without cross
links).  Batch-major merged outputs: LiteRT's kernel leaves parts of the batch rows past the first
unwritten (its values there vary from run to run); gpuc writes every row, as the unmerged outputs
concatenated.  Both directions must have one cell size (LiteRT checks the backward weights against
the forward cell size).  CIFG, peephole, projection and the clips as lstm.py takes them; hybrid int8 weights are
refused (compiler/ops/rnn_cell.py says why).
"""
from __future__ import annotations

import numpy as np

from gpuc.compiler.ir import Node
from gpuc.compiler.ops import NEUTRAL, SHAPE_ONLY, Why, declare, register
from gpuc.compiler.ops import rnn_cell as R
from gpuc.compiler.ops.lstm import CELL_ACTS, in_chunks, lstm_check as _check_seq, lstm_kernel
from gpuc.compiler.ops.lstm_basic import SeqView
from gpuc.compiler.ops.util import checked

NAME = "BIDIRECTIONAL_SEQUENCE_LSTM"
FW, BW = (1, 35, 40), (18, 37, 44)     # first weight, first state, first aux weight input of each direction


def _time_major(node) -> bool:
    return bool(node.attrs.get("time_major", True))


def _dir_node(node, d, x_id, y_id) -> Node:
    w0, s0, _ = d
    attrs = {k: node.attrs[k] for k in ("fused_activation_function", "cell_clip", "proj_clip") if k in node.attrs}
    ins = [x_id] + list(node.inputs[w0:w0 + 17]) + list(node.inputs[s0:s0 + 2])
    return Node("UNIDIRECTIONAL_SEQUENCE_LSTM", ins, [y_id], dict(attrs, time_major=_time_major(node)),
                node.version, node.index)


def _plan(node, graph):
    """[(direction node, the graph view its check sees, output column offset, aux weights or None)] x 2,
    the output row width, the aux input (or -1)."""
    tm, merge = _time_major(node), bool(node.attrs.get("merge_outputs", False))
    if len(node.outputs) != (1 if merge else 2):
        raise ValueError(f"has {len(node.outputs)} outputs; merge_outputs={merge} needs {1 if merge else 2}")
    if int(node.attrs.get("fused_activation_function", 0) or 0) not in CELL_ACTS:
        raise ValueError("cell activation must be RELU, RELU6 or TANH (LiteRT leaves NONE's result undefined)")
    x = node.inputs[0]
    b, t, i = R.seq_dims(graph, x, tm)
    outs = [graph.t(node.inputs[w0 + 16]).shape[0] if R.present(node, w0 + 16) else graph.t(node.inputs[w0 + 3]).shape[0]
            for w0, _, _ in (FW, BW)]
    width = sum(outs) if merge else None
    cells = [graph.t(node.inputs[w0 + 1]).shape[0] for w0, _, _ in (FW, BW)]
    if cells[0] != cells[1]:
        raise ValueError(f"backward cell size {cells[1]} differs from the forward {cells[0]} (LiteRT's kernel checks "
                         "both directions' weights against the forward cell size)")
    has_aux = R.present(node, 39)
    aux_w = [any(R.present(node, a0 + g) for g in range(4)) for _, _, a0 in (FW, BW)]
    if aux_w[0] != aux_w[1]:
        raise ValueError("aux input weights must be given for both directions or neither")
    if aux_w[0] and not has_aux:
        raise ValueError("aux input weights without an aux input")
    aux, asz = -1, 0
    if has_aux:
        ax = graph.t(node.inputs[39])
        ab, at, asz = R.seq_dims(graph, ax.id, tm)
        if (ab, at) != (b, t) or ax.dtype != "float32":
            raise ValueError(f"aux input {ax.name!r} ({ax.dtype} {list(ax.shape)}) must be float32 with the "
                             "input's batch and time")
        aux = ax.id
    plans = []
    for k, d in enumerate((FW, BW)):
        xin = aux if (k == 1 and has_aux and not aux_w[0]) else x
        if xin != x and asz != i:
            raise ValueError(f"the aux input (the backward input without aux weights) has {asz} features, "
                             f"the input {i}")
        y = node.outputs[0] if merge else node.outputs[k]
        o = outs[k]
        R.output(graph, y, (t, b, width or o) if tm else (b, t, width or o), "merged output" if merge else
                 ("forward output", "backward output")[k])
        dn = _dir_node(node, d, xin, y)
        view = SeqView(graph, {y: (t, b, o) if tm else (b, t, o)})
        wa = None
        if aux_w[0]:
            c = graph.t(node.inputs[d[0] + 1]).shape[0]
            wa = np.zeros((4, c, asz), np.float32)
            cifg = not R.present(node, d[0])
            for g in range(4):
                if g == 0 and cifg and not R.present(node, d[2]):
                    continue
                wa[g] = R.weight(node, graph, d[2] + g, (c, asz), "aux input weights")
        plans.append((dn, view, 0 if not merge or k == 0 else outs[0], wa))
    return plans, width, aux


@checked
def lstm_check(node, graph):
    plans, _, _ = _plan(node, graph)
    for k, (dn, view, _, _) in enumerate(plans):
        for p in range(1, 18):
            if R.present(dn, p):
                R.weight(dn, graph, p, graph.t(dn.inputs[p]).shape, "weights")    # (hybrid int8: refused)
        why = _check_seq(dn, view)
        if why:
            return f"{('forward', 'backward')[k]} direction: {why}"
    return None


@register(NAME, check=lstm_check, inputs=(39, 48), outputs=(1, 2),
          optional=tuple(p for p in range(48) if p not in (0, 2, 3, 4, 6, 7, 8, 13, 14, 15, 19, 20, 21, 23, 24, 25,
                                                             30, 31, 32, 35, 36, 37, 38)),
          summary="float32; CIFG, peephole, projection, clips, time_major, merge_outputs, aux input (with and "
                  "without aux weights); state persists across runs")
def lower_lstm_bidirectional(node, graph):
    plans, width, aux = _plan(node, graph)
    kernels = []
    for k, (dn, _, off, wa) in enumerate(plans):
        kern = lstm_kernel(dn, graph)
        o = kern.defines["O"]
        kern.defines.update(REVERSE=k, OUT_STEP=width or o, OUT_OFF=off, AUX=int(wa is not None))
        if wa is not None:
            kern.defines["AUX_I"] = wa.shape[2]
            packed = graph.add_const(f"{graph.t(dn.outputs[0]).name}/{('fw', 'bw')[k]}_aux_weights", wa.reshape(-1))
            kern.bindings += [("ax", aux), ("wa", packed)]
        kern.label = f"{node.label()} ({('fw', 'bw')[k]})"
        kernels += in_chunks(kern, graph)            # (a long sequence: chunks of steps, lstm.py)
    return kernels


VARIANTS = {
    "lstm:bidirectional": (dict(NB=2, T=3, I=5, C=4, O=4, OFF_WX=0, OFF_WH=80, OFF_B=144, OFF_P=160, OFF_PW=172,
                                OFF_PB=188, CELL_CLIP=3.0, PROJ_CLIP=2.0, OUT_STEP=7, OUT_OFF=3, AUX_I=3, CELL_ACT=4),
                           {"TIME_MAJOR": [0, 1], "REVERSE": [0, 1], "AUX": [0, 1], "CIFG": [0, 1], "PROJ": [0, 1]},
                           ["out_", "x", "w", "h_state", "c_state", "ax", "wa"], {},
                           lambda d: dict(local_x=32, rw=("h_state", "c_state"))),
}


def _flops(node, graph):
    n = 0
    for w0, _, _ in (FW, BW):
        c, i = graph.t(node.inputs[w0 + 1]).shape
        o = graph.t(node.inputs[w0 + 5]).shape[1]
        n += 2 * 4 * c * (i + o)
    x = graph.t(node.inputs[0]).shape
    return n * x[0] * x[1]


declare(NAME, shape=Why("no host rule: the model's shapes are checked against its weights"), exact=SHAPE_ONLY,
        sym_shape=Why("no dynamic-size rule: the step count is compiled into the kernels"), batch="lstm",
        pieces=Why("computes values"), fp16=NEUTRAL, in_place=False, templates=("lstm",), flops=_flops,
        cpu=Why("no CPU kernel: the GPU runs every float LSTM"))
