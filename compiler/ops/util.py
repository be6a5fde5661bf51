"""Helpers shared by op lowerings."""
from __future__ import annotations

import numpy as np

from gpuc.compiler.ir import Graph, Node

ACT_NAMES = {0: "NONE", 1: "RELU", 2: "RELU_N1_TO_1", 3: "RELU6", 4: "TANH", 5: "SIGN_BIT"}
PADDING_SAME, PADDING_VALID = 0, 1


def strides(shape) -> list[int]:
    out, s = [], 1
    for d in reversed(shape):
        out.append(s)
        s *= int(d)
    return out[::-1]


def check_act(node: Node, graph: Graph) -> str | None:
    a = int(node.attrs.get("fused_activation_function", 0) or 0)
    if a not in (0, 1, 2, 3, 4):
        return f"fused activation {ACT_NAMES.get(a, a)} not supported"
    return None


def const_input(node: Node, graph: Graph, i: int, what: str):
    """The constant numpy value of input i, or raise ValueError naming it."""
    if i >= len(node.inputs) or node.inputs[i] < 0:
        return None
    t = graph.t(node.inputs[i])
    if not t.is_const:
        raise ValueError(f"{what} (tensor {t.name!r}) must be a constant")
    return t.data


def norm_axis(axis: int, rank: int) -> int:
    if not -rank <= axis < max(rank, 1):
        raise ValueError(f"axis {axis} out of range for rank {rank}")
    return axis % max(rank, 1)


def same_padding(in_size, k, stride, dil, out_size, padding) -> int:
    """Leading pad, as TFLite computes it (SAME: half of the total, rounded down)."""
    if padding != PADDING_SAME:
        return 0
    eff = (k - 1) * dil + 1
    total = max((out_size - 1) * stride + eff - in_size, 0)
    return total // 2


def checked(fn):
    """Wrap a check so that ValueErrors from helpers become reasons."""
    def wrapper(node, graph):
        try:
            return fn(node, graph)
        except ValueError as e:
            return str(e)
    return wrapper


def size(shape) -> int:
    return int(np.prod(shape, dtype=np.int64)) if len(shape) else 1
