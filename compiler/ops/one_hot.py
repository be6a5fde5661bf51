"""ONE_HOT: indices -> `on_value` where an index equals its position along the new `axis` (of size
`depth`), `off_value` elsewhere, as LiteRT's one_hot.cc (indices out of [0, depth) give a row of
`off_value`).  The CPU runs it (runtime/cpu_ops.py)."""
from __future__ import annotations

from gpuc.compiler.ops import NEUTRAL, SHAPE_ONLY, Why, declare, rules

declare("ONE_HOT", lower=Why("no GPU kernel: the CPU runs it (runtime/cpu_ops.py)"),
        check=Why("no GPU kernel to check for"), templates=Why("no GPU kernel"),
        shape=Why("no shape rule yet (the model's output shape is kept)"), exact=SHAPE_ONLY,
        sym_shape=Why("no dynamic-size rule yet"),
        batch=Why("no GPU kernel: a --max-batch program with it replicates per item"),
        pieces=Why("computes values"), fp16=NEUTRAL, in_place=False, flops=rules.per_output, cpu="ONE_HOT")
