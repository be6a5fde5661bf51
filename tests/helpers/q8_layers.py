"""Layers of int8-weight (dynamic-range) models as litert-torch writes them, for the gemm_q8 tests and
benchmarks/q8_gemv_bench.py: a FULLY_CONNECTED of int8 weights with per-channel scales, and the MLP's
gate / up pair silu(gate) * up (LOGISTIC, MUL, MUL), which fuse_q8_gemv makes one gemm_q8 GLU dispatch."""
from __future__ import annotations


def q8_fc(mb, x: int, name: str, q, scales, bias=None, **options) -> int:
    """y [1, N] = FULLY_CONNECTED(x [1, K]) by int8 weights q [N, K] with per-channel scales [N] (constants
    w<name>, b<name>; bias None: none); the output tensor is `name`."""
    y = mb.tensor(name, [1, q.shape[0]])
    mb.op("FULLY_CONNECTED", [x, mb.const(f"w{name}", q, quant=(scales, 0, 0)),
                              -1 if bias is None else mb.const(f"b{name}", bias)], [y], **options)
    return y


def silu_gate(mb, gate: int, up: int, n: int, pre: str = "") -> int:
    """silu(gate) * up of two [1, n] tensors: gate * LOGISTIC(gate) * up (tensors <pre>lg, sg, y2)."""
    lg, sg, y = mb.tensor(pre + "lg", [1, n]), mb.tensor(pre + "sg", [1, n]), mb.tensor(pre + "y2", [1, n])
    mb.op("LOGISTIC", [gate], [lg])
    mb.op("MUL", [gate, lg], [sg])
    mb.op("MUL", [sg, up], [y])
    return y
