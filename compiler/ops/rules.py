"""Shared op facts: the static shape rules and cost rules many ops declare (compiler/ops/__init__.py).

A static shape rule is `rule(node, vals, graph, need_values) -> [arrays]` (None: no rule for this
node): vals holds, per input, its constant value or a zero-stride placeholder of a runtime tensor's
shape (compiler/shapes.py `placeholder`); need_values[k] says whether input k's value is known.  It
raises ValueError (IndexError, KeyError, TypeError) where the op is malformed for these inputs.
The op-specific rules sit in their op's module; these are the families.
"""
from __future__ import annotations

import numpy as np


def placeholder(shape, dtype) -> np.ndarray:
    """A read-only array of `shape` that takes no memory (stands for a runtime tensor; a resource or
    variant handle, which numpy has no dtype for, as an object array)."""
    try:
        dt = np.dtype(dtype)
    except TypeError:
        dt = np.dtype(object)
    return np.broadcast_to(np.zeros((), dt), tuple(shape))


def out_dtype(node, graph) -> str:
    o = node.outputs[0] if node.outputs else -1
    return graph.t(o).dtype if o >= 0 else "float32"


def ints(v, what: str) -> list[int]:
    """An integer array as a flat list of python ints (ValueError when missing or not integers)."""
    if v is None:
        raise ValueError(f"missing {what} input")
    v = np.asarray(v)
    if v.dtype.kind not in "iu":
        raise ValueError(f"{what} has dtype {v.dtype} (integers expected)")
    return [int(a) for a in v.reshape(-1)]


def axis(a: int, rank: int) -> int:
    if not -rank <= a < max(rank, 1):
        raise ValueError(f"axis {a} out of range for rank {rank}")
    return a + rank if a < 0 else a


def same_shape(node, vals, graph, need=None):
    """Output 0 has input 0's shape (values computed on the GPU only)."""
    return [placeholder(vals[0].shape, out_dtype(node, graph))]


def unary(fn):
    """An elementwise rule whose values numpy computes as LiteRT does (exact on integers)."""
    def rule(node, vals, graph, need=None):
        return [np.asarray(fn(vals[0]))]
    return rule


_INT_DIV = ("int_div",)


def binary(fn, divides: bool = False):
    """A broadcasting binary rule computed by numpy; divides: integer division, where a zero divisor
    known at compile time is an error and an unknown one computes with 1 (shape only)."""
    def rule(node, vals, graph, need=None):
        a, b = vals[0], vals[1]
        with np.errstate(all="ignore"):
            if divides and b.dtype.kind in "iu":
                if (np.asarray(b) == 0).any() and need and all(need):
                    raise ValueError(f"{node.op} by zero")
                b = np.where(b == 0, 1, b)
            return [np.asarray(fn(a, b))]
    return rule


def broadcast_shape(node, vals, graph, need=None):
    """A broadcasting binary rule without host values (shape only)."""
    return [placeholder(np.broadcast_shapes(*(v.shape for v in vals if v is not None)), out_dtype(node, graph))]


def reduce(fn):
    """A reduction over the constant axes of input 1 (keep_dims); fn None: MEAN."""
    def rule(node, vals, graph, need=None):
        x = vals[0]
        axes = tuple(axis(d, x.ndim) for d in ints(vals[1], "axes"))
        keep = bool(node.attrs.get("keep_dims", False))
        if not all(need or [False]):
            shape = [1 if d in axes else n for d, n in enumerate(x.shape) if keep or d not in axes]
            return [placeholder(shape, out_dtype(node, graph))]
        return [np.asarray((fn or np.mean)(x, axis=axes, keepdims=keep))]
    return rule


def per_output(node, graph) -> int:
    """Cost: one unit of work per output element (elementwise ops, data movement)."""
    return graph.t(node.outputs[0]).size


def sym_binary(fn):
    """A binary op's `sym_value` fact: fn on the two values (ints and Syms), elementwise with numpy
    broadcasting; None (refused) with a fused activation."""
    def value(node, vals, graph):
        if len(vals) != 2 or node.attrs.get("fused_activation_function"):
            return None
        return np.frompyfunc(fn, 2, 1)(vals[0], vals[1])
    return value
