"""pad_conv_channels (--precision fp16): a big convolution over a few input channels that are not a multiple of 4
(an RGB stem: 3) reads its input through a zero PAD of the channels to the next multiple of 4, against weights
with as many zero input channels.  The sums are the same (the added products are 0 x 0); the im2col loads of
the gemm become 4-channel vectors, so the convolution gets the tensor-core kernels (ops/gemm_coopmat.py: an
element-gathered gemm carries them only as measured candidates, and loads its A operand element by element).
The PAD is placed before fold_movement, which folds it into the movement chain the input comes from (a
TRANSPOSE from NCHW and the spatial PAD of a stem: one GATHER_COPY writing four channels instead of three);
elsewhere it is one copy of the input.  Only where the convolution does at least MIN_MACS multiply-adds (an
RGB stem at 224 x 224, batch 1 or more): a smaller one keeps its three channels and the plain kernel.
"""
from __future__ import annotations

import numpy as np

from gpuc.compiler.ir import Graph, Node
from gpuc.compiler.symbolic import is_sym

MAX_CI = 12                 # input channels padded at most (the padded copy is ceil4(CI) / CI times the input)
MIN_MACS = 1 << 23          # 224 x 224 RGB stems: batch 32 3.8G (7x7 stride 2, 64 out), 0.46G (4x4 stride 4, 96 out),
#                             0.35G (3x3 stride 2, 32 out); batch 1: 0.12G (7x7 stride 2; 16x16 stride 16, 768 out),
#                             14.5M (4x4 stride 4, 96 out)
# On the H100 (2026-11-27, batch 32 fp16, benchmarks/archive/channel_pad_ab.py): a bottleneck CNN with a 7x7
# stride-2 stem 3.875 -> 3.735 ms (the stem 288 -> 209 us, the input copy 41 -> 54 us), a basic-block one ~2.06 ->
# 1.99, an inverted-residual one (3x3 stem) 1.611 -> 1.595; a CNN with a 4x4 stride-4 stem 4.35 either way (its
# NCHW transpose, 18 us as copy_nd, becomes a 38 us gather copy; the stem 35 -> 31 us).  At batch 1 (2026-11-28,
# session 19, GPU time of one run with the threshold at 1 << 28 and at 0): a basic-block CNN 0.270 -> 0.258 ms,
# a 16x16-patch vision transformer 1.357 -> 1.340, a 7x7-depthwise CNN 0.674 -> 0.663, a windowed-attention
# transformer 0.909 -> 0.890 (the plain kernel's stems: 19 us for the 7x7 one, 50 us for the 16x16 patches).


def _fits(graph: Graph, node: Node) -> bool:
    if node.op != "CONV_2D" or len(node.inputs) < 2 or min(node.inputs[:2]) < 0 or len(node.outputs) != 1:
        return False
    if node.epilogue.pad is not None:
        return False
    x, w, y = graph.t(node.inputs[0]), graph.t(node.inputs[1]), graph.t(node.outputs[0])
    if not w.is_const or len(x.shape) != 4 or len(w.shape) != 4 or len(y.shape) != 4:
        return False
    if any(t.dtype != "float32" or t.quant is not None or t.fake_quant is not None for t in (x, w, y)):
        return False
    if any(is_sym(d) for d in tuple(x.shape) + tuple(y.shape)):
        return False
    ci = int(x.shape[3])
    if ci % 4 == 0 or ci > MAX_CI or int(w.shape[3]) != ci:
        return False
    n, oh, ow, co = (int(d) for d in y.shape)
    return n * oh * ow * co * int(w.shape[1]) * int(w.shape[2]) * ci >= MIN_MACS


def pad_conv_channels(graph: Graph) -> None:
    """Pad the input channels of each big few-channel CONV_2D to a multiple of 4 (module docstring); fp16 only."""
    if graph.precision != "fp16":
        return
    for node in [n for n in graph.nodes if _fits(graph, n)]:
        x, w = graph.t(node.inputs[0]), graph.t(node.inputs[1])
        ci = int(x.shape[3])
        c4 = -(-ci // 4) * 4
        pads = graph.add_const(f"{x.name}/ch{c4}_pads", np.array([[0, 0], [0, 0], [0, 0], [0, c4 - ci]], np.int32))
        xp = graph.add_tensor(f"{x.name}/ch{c4}", tuple(x.shape[:3]) + (c4,), "float32")
        w4 = np.zeros(tuple(w.shape[:3]) + (c4,), np.float32)
        w4[..., :ci] = np.asarray(w.data, np.float32)
        pad = Node("PAD", [node.inputs[0], pads], [xp], index=node.index)
        graph.nodes.insert(next(i for i, n in enumerate(graph.nodes) if n is node), pad)
        node.inputs[0] = xp
        node.inputs[1] = graph.add_const(f"{w.name}/ch{c4}", w4)
