"""Ops gpuc has no GPU kernel for, whose other facts the compiler still needs: shape rules for
shape propagation and constant folding, and the CPU kernel (runtime/cpu_ops.py) that runs them when
a model keeps them (partial delegation).  An op that gets a GPU kernel moves its facts to its module."""
from __future__ import annotations

import numpy as np

from gpuc.compiler.ops import ALWAYS, FROM_SHAPES, NEUTRAL, SHAPE_ONLY, Why, declare, rules

_NO_GPU = Why("no GPU kernel: the CPU runs it (runtime/cpu_ops.py)")
_NO_TEMPLATE = Why("no GPU kernel")
_NO_SYM = Why("no dynamic-size rule yet")
_NO_BATCH = Why("no GPU kernel: a --max-batch program with it replicates per item")
_HOST = dict(lower=_NO_GPU, check=Why("no GPU kernel to check for"), pieces=Why("computes values"),
             fp16=NEUTRAL, in_place=False, templates=_NO_TEMPLATE, flops=rules.per_output, batch=_NO_BATCH)


def _shape_shape(node, vals, graph, need=None):
    return [np.asarray(vals[0].shape, rules.out_dtype(node, graph))]


def _range_shape(node, vals, graph, need=None):
    from gpuc.compiler.passes.fold import litert_range
    if need is not None and not all(need):
        raise ValueError("RANGE needs constant start, limit and delta")
    return [litert_range(vals[0], vals[1], vals[2], rules.out_dtype(node, graph))]


def _ones_like_shape(node, vals, graph, need=None):
    return [np.full(vals[0].shape, 1, rules.out_dtype(node, graph))]


def _rfft2d_shape(node, vals, graph, need=None):
    """The two innermost axes -> [fft_length[0], fft_length[1] // 2 + 1]."""
    x = vals[0]
    m, n = rules.ints(vals[1], "fft_length")
    if x.ndim < 2 or m < 1 or n < 1:
        raise ValueError(f"RFFT2D of {list(x.shape)} with fft_length {[m, n]}")
    return [rules.placeholder(list(x.shape[:-2]) + [m, n // 2 + 1], rules.out_dtype(node, graph))]


declare("SHAPE", shape=_shape_shape, exact=FROM_SHAPES, sym_shape=Why("its value is computed (dynamic._value)"),
        cpu="SHAPE", **_HOST)
declare("RANGE", shape=_range_shape, exact=ALWAYS, sym_shape=_NO_SYM, cpu="RANGE", **_HOST)
declare("ONES_LIKE", shape=_ones_like_shape, exact=ALWAYS, sym_shape="same", cpu="ONES_LIKE", **_HOST)
declare("RFFT2D", shape=_rfft2d_shape, exact=SHAPE_ONLY, sym_shape=_NO_SYM, cpu="RFFT2D", **_HOST)
declare("COMPLEX_ABS", "REAL", "IMAG", shape=rules.same_shape, exact=SHAPE_ONLY, sym_shape="same", **_HOST)
declare("COMPLEX_ABS", cpu="COMPLEX_ABS")
declare("REAL", cpu="REAL")
declare("IMAG", cpu="IMAG")
