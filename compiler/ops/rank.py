"""RANK: the input's rank, an int32 scalar.  gpuc's shapes have a static rank, so it always folds to a
constant at compile time (exact FROM_SHAPES: compiler/passes/fold.py); the CPU kernel stands behind it."""
from __future__ import annotations

import numpy as np

from gpuc.compiler.ops import FROM_SHAPES, NEUTRAL, Why, declare, rules

_NO_GPU = Why("folded at compile time: the rank of every gpuc tensor is static")


def _rank_shape(node, vals, graph, need=None):
    return [np.asarray(np.ndim(vals[0]), rules.out_dtype(node, graph))]


declare("RANK", lower=_NO_GPU, check=Why("folded: nothing to check"), shape=_rank_shape, exact=FROM_SHAPES,
        sym_shape=Why("its value is the static rank"), batch=Why("folded at compile time"),
        pieces=Why("computes a value"), fp16=NEUTRAL, in_place=False, templates=_NO_GPU,
        flops=rules.per_output, cpu="RANK")
