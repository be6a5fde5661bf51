"""A reduction model: op over `axes` of an input of `shape`, optionally of x * sigmoid(x) (a fused prologue)."""
import numpy as np

from helpers.builder import ModelBuilder


def reduce_model(op, shape, axes, keep_dims, swish=False):
    mb = ModelBuilder()
    x = mb.input("x", list(shape))
    src = x
    if swish:                                  # x * sigmoid(x): fused into the reduction as its prologue
        s, m = mb.tensor("s", list(shape)), mb.tensor("m", list(shape))
        mb.op("LOGISTIC", [x], [s])
        mb.op("MUL", [x, s], [m])
        src = m
    out = [1 if i in axes else d for i, d in enumerate(shape)] if keep_dims else \
        [d for i, d in enumerate(shape) if i not in axes]
    y = mb.tensor("y", out)
    mb.op(op, [src, mb.const("axes", np.array(axes, np.int32))], [y], keep_dims=keep_dims)
    mb.output(y)
    return mb.finish()
