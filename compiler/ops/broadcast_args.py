"""BROADCAST_ARGS: the broadcast of two 1-D int32 / int64 shapes (numpy's rule, as LiteRT's kernel).
Constant shapes fold at compile time (compiler/passes/fold.py); shapes computed at run time go to the
CPU kernel (runtime/cpu_ops.py), which fails the run on shapes that do not broadcast or hold a
negative dimension (LiteRT aborts on them)."""
from __future__ import annotations

import numpy as np

from gpuc.compiler.ops import ALWAYS, NEUTRAL, Why, declare, rules

_NO_GPU = Why("a few integers on the host: folded when constant, else the CPU kernel")


def broadcast_args(a, b) -> list[int]:
    a, b = [int(v) for v in np.asarray(a).reshape(-1)], [int(v) for v in np.asarray(b).reshape(-1)]
    if min(a + b, default=0) < 0:
        raise ValueError(f"BROADCAST_ARGS: negative dimension in {a} / {b}")
    try:
        return list(np.broadcast_shapes(tuple(a), tuple(b)))
    except ValueError:
        raise ValueError(f"BROADCAST_ARGS: shapes {a} and {b} do not broadcast") from None


def _shape(node, vals, graph, need=None):
    a, b = np.asarray(vals[0]), np.asarray(vals[1])
    if a.ndim != 1 or b.ndim != 1 or a.dtype.name not in ("int32", "int64") or a.dtype != b.dtype:
        raise ValueError(f"BROADCAST_ARGS takes two 1-D int32/int64 shapes of one dtype ({a.dtype} {list(a.shape)}, "
                         f"{b.dtype} {list(b.shape)})")
    dt = rules.out_dtype(node, graph)
    if need is not None and not all(need):
        return [rules.placeholder([max(a.size, b.size)], dt)]
    return [np.asarray(broadcast_args(a, b), dt)]


declare("BROADCAST_ARGS", lower=_NO_GPU, check=Why("no GPU kernel to check for"), shape=_shape, exact=ALWAYS,
        sym_shape=Why("no dynamic-size rule yet"), batch=Why("no GPU kernel: a --max-batch program replicates"),
        pieces=Why("computes values"), fp16=NEUTRAL, in_place=False, templates=_NO_GPU, flops=rules.per_output,
        cpu="BROADCAST_ARGS")
