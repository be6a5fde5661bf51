"""SVDF (float32) on the GPU: LiteRT's EvalFloatSVDF, one shaders/svdf.comp dispatch (one workgroup
per batch element).

TFLite inputs: 0 x [B,I]; 1 weights_feature [F,I]; 2 weights_time [F,M]; 3 bias [U] (optional);
4 activation state [B, F*M] (a variable tensor, laid out [B][F][M]: updated in place, it persists
across runs).  F = U * rank.  Output [B,U].  Per run: each filter's newest state entry becomes
WF[f] . x, its output WT[f] . state row; unit u is bias[u] + its rank filters' outputs, then the fused
activation (every TFLite code); the state rows shift left by one, zero filled.  Hybrid int8 weights
are refused (compiler/ops/rnn_cell.py says why); an int8 input (the fully quantized SVDF) is refused
by the registry's quantized-tensor check.
"""
from __future__ import annotations

import numpy as np

from gpuc.compiler.codegen.kernel import Kernel
from gpuc.compiler.ops import UNSAFE, SHAPE_ONLY, Why, declare, register, template
from gpuc.compiler.ops import rnn_cell as R
from gpuc.compiler.ops.util import checked, fused_act

NAME = "SVDF"
MAX_FILTERS = 8192                  # one float of shared memory per filter: 32 KiB


def _plan(node, graph):
    x = graph.t(node.inputs[0])
    if len(x.shape) != 2 or min(x.shape) < 1:
        raise ValueError(f"input {x.name!r} must be a non-empty [batch, features], got {list(x.shape)}")
    b, i = x.shape
    rank = int(node.attrs.get("rank", 0) or 0)
    wf = R.weight(node, graph, 1, (graph.t(node.inputs[1]).shape[0], i), "weights_feature")
    f = wf.shape[0]
    if rank < 1 or f % rank:
        raise ValueError(f"rank {rank} does not divide the {f} filters")
    if not 1 <= f <= MAX_FILTERS:
        raise ValueError(f"{f} filters (at most {MAX_FILTERS}: one workgroup's shared memory)")
    u = f // rank
    wt_t = graph.t(node.inputs[2])
    if len(wt_t.shape) != 2 or wt_t.shape[1] < 1:
        raise ValueError(f"weights_time {wt_t.name!r} must be [filters, memory], got {list(wt_t.shape)}")
    wt = R.weight(node, graph, 2, (f, wt_t.shape[1]), "weights_time")
    m = wt.shape[1]
    bias = R.weight(node, graph, 3, (u,), "bias") if R.present(node, 3) else None
    s = R.state(node, graph, 4, (b, f * m), "activation state")
    R.output(graph, node.outputs[0], (b, u), "output")
    R.check_act(node)
    return b, i, f, m, u, rank, wf, wt, bias, s


@register(NAME, check=checked(lambda n, g: _plan(n, g) and None), inputs=(5, 5), outputs=(1, 1), optional=(3,),
          summary="float32; any rank, optional bias, every fused activation; state persists across runs")
def lower_svdf(node, graph):
    b, i, f, m, u, rank, wf, wt, bias, s = _plan(node, graph)
    parts = [wf, wt] + ([bias] if bias is not None else [])
    packed = graph.add_const(f"{graph.t(node.outputs[0]).name}/svdf_weights",
                             np.concatenate([p.reshape(-1) for p in parts]).astype(np.float32))
    local = 32 if f <= 32 else 64 if f <= 64 else 128 if f <= 128 else 256
    d = dict(NB=b, I=i, F=f, M=m, U=u, RANK=rank, OFF_WF=0, OFF_WT=wf.size, OFF_B=wf.size + wt.size,
             SVDF_ACT=fused_act(node), HAS_BIAS=int(bias is not None))
    binds = [("out_", node.outputs[0]), ("x", node.inputs[0]), ("w", packed), ("state", s)]
    return [Kernel("svdf", binds, b * local, d, node.label(), local_x=local, rw=("state",))]


VARIANTS = {
    "svdf": (dict(NB=2, I=5, F=6, M=3, U=3, RANK=2, OFF_WF=0, OFF_WT=30, OFF_B=48),
             {"HAS_BIAS": [0, 1], "SVDF_ACT": list(R.ACTS)}, ["out_", "x", "w", "state"], {},
             lambda d: dict(local_x=32, rw=("state",))),
}


def _flops(node, graph):
    wf, wt = graph.t(node.inputs[1]).shape, graph.t(node.inputs[2]).shape
    return 2 * graph.t(node.inputs[0]).shape[0] * wf[0] * (wf[1] + wt[1])


declare(NAME, shape=Why("no host rule: its state tensor fixes its shapes"), exact=SHAPE_ONLY,
        sym_shape=Why("no dynamic-size rule: one step of fixed size"), batch="lstm", pieces=Why("computes values"),
        fp16=UNSAFE, in_place=False, templates=("svdf",), flops=_flops,
        cpu=Why("no CPU kernel: the GPU runs every float SVDF"))
template("svdf", item_major=False, flat=False)
