"""The FULLY_CONNECTED layer the gemm benchmarks time (gemm_speed.py, gemm_plan_sweep.py,
coopmat_sweep.py, fp16_plain_ab.py): the model input x goes through ADD(x, x) first, so the gemm reads a
device-computed tensor as inside a network (an input may sit in host-visible memory, and under fp16 it
stays fp32), then FULLY_CONNECTED with weights ~ N(0, 1/sqrt(K)) and an optional bias."""
from __future__ import annotations

import numpy as np


def add_fc(mb, in_shape, out_shape, N: int, K: int, rng, bias_std: float | None = 0.1):
    """Add input "x" of `in_shape`, x2 = ADD(x, x) and y = FULLY_CONNECTED(x2, w, b) of `out_shape` to
    ModelBuilder `mb`; w [N, K] is drawn from `rng` first, then b [N] (None when `bias_std` is None).
    Returns (y, w, b)."""
    x = mb.input("x", list(in_shape))
    x2 = mb.tensor("x2", list(in_shape))
    mb.op("ADD", [x, x], [x2])
    w = rng.normal(0, 1 / np.sqrt(K), (N, K)).astype(np.float32)
    b = None if bias_std is None else rng.normal(0, bias_std, (N,)).astype(np.float32)
    y = mb.tensor("y", list(out_shape))
    mb.op("FULLY_CONNECTED", [x2, mb.const("w", w), -1 if b is None else mb.const("b", b)], [y])
    return y, w, b
