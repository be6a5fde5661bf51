"""Kernels in chunks of steps (CHUNKED: the recurrent kernels, and every fold over a long input: CUMSUM, the segment
and scatter folds, REDUCE_WINDOW, L2_POOL_2D, BATCH_MATMUL's K, the int8 row statistics), and the block size of
the blocked sorts (TOPK_V2, UNIQUE).

A recurrent kernel walks every time step of a sequence in one dispatch, each invocation looping over its units'
products in every step.  lavapipe's llvmpipe ends a shader's loops after 65,535 passes in all
(LP_MAX_TGSI_LOOP_ITERATIONS) and runs on: one dispatch over 200 steps of a 40-input, 64-unit LSTM gave NaN there.
Where an invocation would pass its loops more than LOOP_BUDGET times, the sequence runs as one dispatch a chunk of
steps: each reads the state the one before left in the state tensors, runs the steps its constant binding `steps`
holds ([first, count]: every chunk the same shader) and writes the state back.  A fold runs the same way, each
chunk resuming from what the one before left in its output (or in a float32 scratch tensor, `scratch`).
"""
from __future__ import annotations

import dataclasses

import numpy as np

LOOP_BUDGET = 32768             # loop passes one invocation may make in one dispatch (half llvmpipe's limit)


def in_chunks(k, graph, per_step: int, length: str = "T", rw: tuple = (), tag: str = "", unit: int = 1,
              scratch: tuple | None = None) -> list:
    """Kernel `k` over all its steps (its define `length`), or one kernel a chunk of steps (CHUNKED) where
    `per_step` loop passes an invocation a step would pass LOOP_BUDGET in one dispatch.  A sequence of dynamic
    length stays one dispatch.  `rw`: bindings the chunks read back (declared read-write only when chunked);
    `tag`: in the names of the chunks' step constants (kernels that chunk over one output tensor); `unit`: a step is
    that many of the length's elements (chunks start on its multiples); `scratch` (binding, shape): a float32
    tensor the chunks carry their partial results in (bound read-write after `steps`, only when chunked)."""
    t = k.defines[length]
    if not isinstance(t, int):
        return [k]
    per = max(1, LOOP_BUDGET // max(1, per_step)) * unit
    if per >= t:
        return [k]
    extra = []
    if scratch is not None:
        extra = [(scratch[0], graph.add_fp32_scratch(f"{k.label}/{scratch[0]}", scratch[1]))]
        rw = tuple(rw) + (scratch[0],)
    out = []
    for j, first in enumerate(range(0, t, per)):
        n = min(per, t - first)
        name = f"{graph.t(k.bindings[0][1]).name}/steps{tag}{'_reverse' if k.defines.get('REVERSE') else ''}{j}"
        steps = graph.add_const(name, np.array([first, n], np.int32))
        out.append(dataclasses.replace(k, bindings=list(k.bindings) + [("steps", steps)] + extra,
                                       defines=dict(k.defines, CHUNKED=1),
                                       rw=tuple(k.rw) + tuple(b for b in rw if b not in k.rw),
                                       label=f"{k.label}: steps {first}..{first + n - 1}"))
    return out


def sorted_block(n: int) -> int | None:
    """The block size S (a power of two) of a row of n sorted in blocks, then searched by binary searches (ops/topk.py,
    ops/unique.py): the least work an element (S + NB (log2 S + 2) loop passes) that keeps each of the two
    dispatches within LOOP_BUDGET passes an invocation; None if none does."""
    best = None
    for b in range(6, 16):
        s, search = 1 << b, -(-n // (1 << b)) * (b + 2)         # (the sort's passes, the searches')
        if max(s, search) <= LOOP_BUDGET and (best is None or s + search < best[0]):
            best = (s + search, s)
    return None if best is None else best[1]
