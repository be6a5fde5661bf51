"""Native int8 BATCH_MATMUL (INT8_BATCH_MATMUL): int8 x int8 -> int8 with both operands activations (attention's
scores and P.V) or either a per-tensor quantized int8 constant, as LiteRT's builtin kernel (batch_matmul.cc
EvalInt8Int8, FullyConnectedParams) computes it: acc = sum (lhs - lhs zero point) * (rhs - rhs zero point)
(both zero points any int8: LiteRT subtracts the RHS's too), requantized by common.h MultiplyByQuantizedMultiplier
(RQ_GEMMLOWP: found by experiment on LiteRT 2.3, RQ_RUY differs on 22 of ~9,000 outputs) with the multiplier of
GetQuantizedConvolutionMultipler (lhs scale x rhs scale in float, then / output scale in double: the double
product differed on 7 of 3 x 65,536 outputs), plus the output zero point, clamped to int8 (no activation).

The rewrite (WIDEN, after native_int8 renamed the op) brings the operands to the layout of the flat int8 conv
kernel's FULLY_CONNECTED geometry (shaders/int8_conv.comp BMM): the LHS as [.., M, K] (adj_x: an INT8_TRANSPOSE
of its last two dims), the RHS as [.., N, K] (not adj_y: an INT8_TRANSPOSE), a constant operand transposed at
compile time; an operand whose batch dims are neither the output's nor all ones is broadcast (INT8_BROADCAST_TO).
The node then reads adj_x False, adj_y True; an operand whose batch dims are all ones is read by every batch
(its batch stride 0).  Where K % 4 == 0 the kernel reads whole words (4-lane dot products, the `int_dot` variant:
packed OpSDot; the zero points folded in through the operands' sums) and where N % 4 == 0 too computes 4 output
columns an invocation (lavapipe, [8, 128, 64] x [8, 64, 128]: 15.7 ms against 72.2 ms for K = 63's byte loop).  passes/quant.py native_int8 makes this op when the whole model runs in int8.
"""
from __future__ import annotations

import numpy as np

from gpuc.compiler.codegen.kernel import Kernel
from gpuc.compiler.ir import Node
from gpuc.compiler.ops import register
from gpuc.compiler.ops.int8_facts import declare_int8
from gpuc.compiler.ops.int8_common import (BYTE_MOVES, RQ_GEMMLOWP, TRANSPOSE, WIDEN, f32, native_form, per_tensor,
                                           quantize_multiplier, scale_zp)
from gpuc.compiler.ops.int8_conv import DOT_VARIANT
from gpuc.compiler.ops.math import words
from gpuc.compiler.ops.util import checked

from gpuc.compiler.ops.int8_common import BATCH_MATMUL  # noqa: E402 (the int8 op name)

MAX_RANK = 5
VARIANTS = {
    "int8_conv:bmm": (dict(N=2, H=5, W=1, CIN=8, OH=5, OW=1, COUT=6, KH=1, KW=1, SH=1, SW=1, DH=1, DW=1, PT=0, PL=0, DM=1,
                           DEPTHWISE=0, VEC4=0, OC4=0, QP0=0, IN_OFF=3, W_OFF=-5, OUT_ZP=-2, ACT_MIN=-128, ACT_MAX=127,
                           NOUT=60, RQ_MODE=RQ_GEMMLOWP, RQ_SPLIT=0, XZ_WORD=0, BMM=1, X_BATCH=40, W_BATCH=48),
                      {"W_BATCH": [0, 48], "VEC4": [0, 1]}, ["out_", "x", "w", "qp"],
                      {"out_": "uint32", "x": "uint32", "w": "uint32", "qp": "int32"}),
}
VARIANTS["int8_conv:bmm4"] = (dict(VARIANTS["int8_conv:bmm"][0], COUT=8, NOUT=80, VEC4=1, OC4=1, W_BATCH=64),
                              {"DOT_EXT": [0, 1]}, *VARIANTS["int8_conv:bmm"][2:])


def _plan(node, graph):
    """(lhs, rhs, output, adj_x, adj_y, m, n, k, output batch dims); ValueError where the int8 form does not take
    `node`."""
    if len(node.inputs) != 2 or min(node.inputs) < 0 or len(node.outputs) != 1:
        raise ValueError("expects 2 inputs and 1 output")
    a, b, y = graph.t(node.inputs[0]), graph.t(node.inputs[1]), graph.t(node.outputs[0])
    for t in (a, b, y):
        if t.dtype != "int8" or not per_tensor(t) or (t.is_const and t.data is None):
            raise ValueError(f"tensor {t.name!r} is not a per-tensor quantized int8 tensor")
    if y.is_const or (a.is_const and b.is_const):
        raise ValueError("no int8 activation operand")
    if not (2 <= len(a.shape) <= MAX_RANK and 2 <= len(b.shape) <= MAX_RANK):
        raise ValueError(f"operand ranks {len(a.shape)} and {len(b.shape)} must be 2..{MAX_RANK}")
    adj_x, adj_y = bool(node.attrs.get("adj_x", False)), bool(node.attrs.get("adj_y", False))
    m, k = (a.shape[-1], a.shape[-2]) if adj_x else (a.shape[-2], a.shape[-1])
    kb, n = (b.shape[-1], b.shape[-2]) if adj_y else (b.shape[-2], b.shape[-1])
    if k != kb or k == 0:
        raise ValueError(f"inner dimensions differ: {list(a.shape)} (adj_x={adj_x}) x {list(b.shape)} (adj_y={adj_y})")
    try:
        batch = [int(v) for v in np.broadcast_shapes(tuple(a.shape[:-2]), tuple(b.shape[:-2]))]
    except ValueError:
        raise ValueError(f"batch dims of {list(a.shape)} and {list(b.shape)} do not broadcast") from None
    if list(y.shape) != batch + [m, n]:
        raise ValueError(f"output {y.name!r} has shape {list(y.shape)}, expected {batch + [m, n]}")
    return a, b, y, adj_x, adj_y, int(m), int(n), int(k), batch


@checked
def _check(node, graph):
    _plan(node, graph)
    return None


def _batch_stride(t, batch: list, rows: int) -> int:
    """The element stride between batches of operand `t` ([.., rows, K] in memory): rows x K where its batch
    dims are the output's, 0 where they are all ones (read by every batch)."""
    tb = [int(v) for v in t.shape[:-2]]
    if int(np.prod(tb, dtype=np.int64)) == 1:
        return 0
    return rows * int(t.shape[-1])


def _layout(node, graph) -> None:
    """WIDEN: the LHS as [.., M, K] and the RHS as [.., N, K] (transposed where adj_x / not adj_y; constants at
    compile time, activations by an INT8_TRANSPOSE), broadcast to the output's batch dims where they are neither
    those nor all ones; the node then reads adj_x False, adj_y True."""
    a, b, y, adj_x, adj_y, m, n, k, batch = _plan(node, graph)
    at = graph.nodes.index(node)
    new = []

    def fix(t, swap: bool, rows: int) -> int:
        tb = [int(v) for v in t.shape[:-2]]
        full = [1] * (len(batch) - len(tb)) + tb
        bcast = int(np.prod(tb, dtype=np.int64)) != 1 and full != batch
        shape = (batch if bcast else tb) + [rows, k]
        if not swap and not bcast:
            return t.id
        if t.is_const:
            d = np.asarray(t.data, np.int8)
            d = np.swapaxes(d, -1, -2) if swap else d
            d = np.ascontiguousarray(np.broadcast_to(d, shape))
            return graph.add_tensor(f"{t.name}#int8_bmm", d.shape, "int8", d, quant=t.quant)
        cur = t.id
        if swap:
            perm = list(range(len(t.shape)))
            perm[-1], perm[-2] = perm[-2], perm[-1]
            sw = tb + [rows, k]
            o = graph.add_tensor(f"{t.name}#T", sw, "int8", quant=t.quant)
            pc = graph.add_const(f"{t.name}#T_perm", np.array(perm, np.int32))
            new.append(Node(TRANSPOSE, [cur, pc], [o], index=node.index))
            cur = o
        if bcast:
            o = graph.add_tensor(f"{t.name}#bcast", shape, "int8", quant=t.quant)
            sc = graph.add_const(f"{t.name}#bcast_shape", np.array(shape, np.int32))
            new.append(Node(BYTE_MOVES["BROADCAST_TO"], [cur, sc], [o], index=node.index))
            cur = o
        return cur

    ia = fix(a, adj_x, m)
    ib = fix(b, not adj_y, n)
    graph.nodes[at:at] = new
    node.inputs = [ia, ib]
    node.attrs = dict(node.attrs, adj_x=False, adj_y=True)


def bmm_multiplier(a, b, y) -> tuple[int, int]:
    """GetQuantizedConvolutionMultipler: (lhs scale x rhs scale in float) / output scale in double."""
    (sa, _), (sb, _), (so, _) = scale_zp(a), scale_zp(b), scale_zp(y)
    return quantize_multiplier(f32(np.float32(sa) * np.float32(sb)) / so)


@register(BATCH_MATMUL, check=_check, dtypes=("int8",), inputs=(2, 2), quantized_io=True,
          summary="internal: native int8 batch matmul (passes/quant.py native_int8)")
def lower_int8_batch_matmul(node, graph):
    a, b, y, adj_x, adj_y, m, n, k, batch = _plan(node, graph)
    if adj_x or not adj_y:
        raise ValueError(f"{node.label()}: operands not laid out by the int8 rewrite")
    (_, za), (_, zb), (_, zo) = scale_zp(a), scale_zp(b), scale_zp(y)
    mult, shift = bmm_multiplier(a, b, y)
    nb = int(np.prod(batch, dtype=np.int64))
    vec4 = k % 4 == 0           # (whole words: batch strides are multiples of K)
    qp = np.zeros((4, n), np.int32)        # (bias 0, multiplier, shift, weight sums 0: shaders/int8_conv.comp bmm_at)
    qp[1], qp[2] = mult, shift
    qpt = graph.add_const(f"{y.name}#int8_qp", qp)
    d = dict(N=nb, H=m, W=1, CIN=k, OH=m, OW=1, COUT=n, KH=1, KW=1, SH=1, SW=1, DH=1, DW=1, PT=0, PL=0, DM=1,
             DEPTHWISE=0, VEC4=int(vec4), OC4=int(vec4 and n % 4 == 0), QP0=0, IN_OFF=-za, W_OFF=-zb, OUT_ZP=zo, ACT_MIN=-128, ACT_MAX=127,
             NOUT=y.size, RQ_MODE=RQ_GEMMLOWP, RQ_SPLIT=0, XZ_WORD=0, BMM=1, X_BATCH=_batch_stride(a, batch, m),
             W_BATCH=_batch_stride(b, batch, n))
    binds = [("out_", words(graph, y.id)), ("x", words(graph, a.id)), ("w", words(graph, b.id)), ("qp", qpt)]
    kern = Kernel("int8_conv", binds, -(-y.size // 4), d, node.label(), flops=2 * y.size * k)
    if vec4:
        kern.variants.append(DOT_VARIANT)
    return [kern]


WIDEN[BATCH_MATMUL] = _layout
native_form(("BATCH_MATMUL", BATCH_MATMUL), check=_check)

declare_int8(BATCH_MATMUL, templates=("int8_conv",), flops=lambda nd,
             g: 2 * g.t(nd.outputs[0]).size * g.t(nd.inputs[0]).shape[-1])
