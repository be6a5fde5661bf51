"""FULLY_CONNECTED over blockwise-quantized weights (litert-torch's dynamic_int4_block32 / _block128 exports;
the weights made float32 at import, compiler/frontend/blockwise.py) computed as LiteRT's default CPU path
(XNNPACK's qd8-f32-qb4w kernels) computes it: each activation row quantized to int8 on the fly, as
shaders/gemm_q8.comp does for int8 weights (rmin = min(0, min x), rmax = max(0, max x), s = 255 / (rmax -
rmin) (1 when equal), zp = round_even(clamp(-128 - rmin*s or 127 - rmax*s, whichever the rounding errors
favour, -128, 127)), q = clamp(round_even(x * s) + zp, -128, 127)), then (q - zp) . W / s + bias.

`rewrite(g, node)` gives the plain ops that do this (REDUCE_MIN / REDUCE_MAX over the last axis, the
elementwise steps, the FC over the exact integers q - zp, the scale and the bias after), or None where the FC
is not of that form (fused activation, non-float32 input, runtime weights).  Against a float FC this moves
the logits of a tiny int4 Llama from 2e-2 to ~1e-6 of LiteRT's range.
"""
from __future__ import annotations

import numpy as np

from gpuc.compiler.ir import Graph, Node

FC = "FULLY_CONNECTED"


def rewrite(g: Graph, n: Node, memo: dict | None = None) -> list[Node] | None:
    """`memo` (input tensor -> its quantized row and 1 / scale) lets FCs of one input (q/k/v, gate/up)
    share the quantization: the first of them makes it."""
    if n.op != FC or len(n.inputs) < 2 or n.attrs.get("fused_activation_function", 0) != 0 or len(n.outputs) != 1:
        return None
    x, w, y = g.t(n.inputs[0]), g.t(n.inputs[1]), g.t(n.outputs[0])
    if x.dtype != "float32" or y.dtype != "float32" or w.data is None or not x.shape:
        return None
    bias = n.inputs[2] if len(n.inputs) > 2 else -1
    nodes: list[Node] = []
    row = tuple(x.shape[:-1]) + (1,)
    name = f"{y.name}/qd8"

    def t(shape, dtype="float32"):
        return g.add_tensor(f"{name}/{len(nodes)}", shape, dtype)

    def c(v):
        return g.add_const(f"{name}/c{len(g.tensors)}", np.array(v, np.float32))

    def op(kind, ins, shape, dtype="float32", **attrs):
        out = t(shape, dtype)
        nodes.append(Node(kind, list(ins), [out], attrs, 1, n.index))
        return out

    def ew(kind, a, b, shape=row):
        return op(kind, [a, b], shape, fused_activation_function=0) if kind in ("ADD", "SUB", "MUL", "DIV") \
            else op(kind, [a, b], shape)

    memo = {} if memo is None else memo
    if n.inputs[0] in memo:
        xq, inv = memo[n.inputs[0]]
    else:
        xq, inv = _quantized(g, n, x, row, op, ew, c)
        memo[n.inputs[0]] = (xq, inv)
    return _fc(g, n, y, row, xq, inv, bias, nodes, op, ew, name)


def _quantized(g, n, x, row, op, ew, c):
    """(q - zp, 1 / s) of each row of the FC's input."""
    name = f"{g.t(n.outputs[0]).name}/qd8"
    axis = g.add_const(f"{name}/axis", np.array([len(x.shape) - 1], np.int32))
    zero = c(0.0)
    rmin = ew("MINIMUM", op("REDUCE_MIN", [n.inputs[0], axis], row, keep_dims=True), zero)
    rmax = ew("MAXIMUM", op("REDUCE_MAX", [n.inputs[0], axis], row, keep_dims=True), zero)
    same = op("EQUAL", [rmin, rmax], row, "bool")
    sc = op("SELECT_V2", [same, c(1.0), ew("DIV", c(255.0), ew("SUB", rmax, rmin))], row)
    a, b = ew("MUL", rmin, sc), ew("MUL", rmax, sc)
    low = ew("ADD", ew("ADD", c(-128.0), a), ew("ADD", c(127.0), b))
    pick = op("GREATER", [low, zero], row, "bool")
    zf = op("SELECT_V2", [pick, ew("SUB", c(-128.0), a), ew("SUB", c(127.0), b)], row)
    zp = op("ROUND", [ew("MINIMUM", ew("MAXIMUM", zf, c(-128.0)), c(127.0))], row)
    full = tuple(x.shape)
    q = ew("ADD", op("ROUND", [ew("MUL", n.inputs[0], sc, full)], full), zp, full)
    q = ew("MINIMUM", ew("MAXIMUM", q, c(-128.0), full), c(127.0), full)
    return ew("SUB", q, zp, full), ew("DIV", c(1.0), sc)


def _fc(g, n, y, row, xq, inv, bias, nodes, op, ew, name):
    acc = op(FC, [xq, n.inputs[1], -1], tuple(y.shape), **dict(n.attrs))
    yrow = tuple(y.shape[:-1]) + (1,)
    if yrow != row:
        inv = op("RESHAPE", [inv, g.add_const(f"{name}/shape", np.array(yrow, np.int32))], yrow, new_shape=list(yrow))
    out = n.outputs[0]
    if bias < 0:
        nodes.append(Node("MUL", [acc, inv], [out], {"fused_activation_function": 0}, 1, n.index))
    else:
        scaled = ew("MUL", acc, inv, tuple(y.shape))
        nodes.append(Node("ADD", [scaled, bias], [out], {"fused_activation_function": 0}, 1, n.index))
    return nodes
