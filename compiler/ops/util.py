"""Helpers shared by op lowerings."""
from __future__ import annotations

import numpy as np

from gpuc.compiler.ew_table import ACT, ACT_FINITE, ACT_NONE
from gpuc.compiler.ir import Graph, Node
from gpuc.compiler.symbolic import is_sym, prod, smax

# TFLite's ActivationFunctionType, read from a model's fused_activation_function only: gpuc's kernels
# take the activation codes of compiler/ew_table.py (act_code translates)
ACT_NAMES = {0: "NONE", 1: "RELU", 2: "RELU_N1_TO_1", 3: "RELU6", 4: "TANH", 5: "SIGN_BIT"}
PADDING_SAME, PADDING_VALID = 0, 1


def strides(shape) -> list[int]:
    out, s = [], 1
    for d in reversed(shape):
        out.append(s)
        s *= d if is_sym(d) else int(d)
    return out[::-1]


def broadcast_strides(in_shape, out_shape):
    """Element strides of `in_shape` aligned to `out_shape`, 0 on broadcast dims."""
    r = len(out_shape)
    shape = [1] * (r - len(in_shape)) + list(in_shape)
    st = strides(shape)
    return [0 if shape[d] == 1 and out_shape[d] != 1 else st[d] for d in range(r)]


# LiteRT's float kernels differ in what they do with a fused TANH / SIGN_BIT: conv, depthwise,
# pooling and ADD/SUB/MUL compute their clamp range with CalculateActivationRange, which gives
# [-FLT_MAX, FLT_MAX] (the activation is ignored, XNNPACK leaves such ops to the builtin kernels);
# FULLY_CONNECTED rejects them.  We follow: IGNORED_ACTS become ACT_FINITE for the first group
# (+-inf clamped to +-FLT_MAX, NaN kept), and FC reports them unsupported.  A fused NONE leaves +-inf
# as they are, as XNNPACK, LiteRT's default, does (its builtin kernels clamp them too).
IGNORED_ACTS = (4, 5)           # (TFLite's enum)
# the fused activations that are at most a clamp at float16-exact bounds (rounding to float16 commutes with them)
CLAMP_ACTS = tuple(c for c, n in ACT_NAMES.items() if n in ("NONE", "RELU", "RELU_N1_TO_1", "RELU6"))
# their float bounds (low, high; None: open), by name: the int8 kernels' output range (int8_common.act_range) and
# the workgroup-scope gemm's per-element clamps (gemm_cm2.ACTS)
ACT_BOUNDS = {"RELU": (0.0, None), "RELU_N1_TO_1": (-1.0, 1.0), "RELU6": (0.0, 6.0)}


def fused_act(node: Node) -> int:
    return int(node.attrs.get("fused_activation_function", 0) or 0)


def act_code(node: Node, ignore=IGNORED_ACTS) -> int:
    """The ACT define (an activation code of compiler/ew_table.py) for the node's epilogue: its own
    fused activation (TFLite's enum translated: those in `ignore`, SIGN_BIT, which has no formula,
    and unknown codes, which the op's check rejects, become ACT_FINITE), or the code a fusion pass
    put in node.epilogue.act."""
    if node.epilogue.act is not None:
        return node.epilogue.act
    a = fused_act(node)
    name = ACT_NAMES.get(a)
    if a in ignore or name not in ACT and name != "NONE":
        return ACT_FINITE
    return ACT.get(name, ACT_NONE)


def epilogue(node: Node, binds: list, ignore=IGNORED_ACTS) -> dict:
    """Defines for a fused epilogue (activation, then optional residual add + activation);
    appends the residual binding."""
    res = node.epilogue.residual
    if res is not None:
        binds.append(("res", res))
    return dict(ACT=act_code(node, ignore), RESIDUAL=int(res is not None), ACT2=node.epilogue.act2)


def check_act(node: Node, graph: Graph, allowed=(0, 1, 2, 3, 4, 5)) -> str | None:
    a = fused_act(node)
    if a not in allowed:
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


def scalar_axis(node: Node, graph: Graph, i: int, x) -> int:
    """The constant one-integer axis input `i` of `node`, normalized against tensor x's rank."""
    a = const_input(node, graph, i, "axis")
    if a is None:
        raise ValueError("missing axis input")
    a = np.asarray(a)
    if a.size != 1 or a.dtype.kind not in "iu":
        raise ValueError(f"axis must be one integer (got {a.dtype} {list(a.shape)})")
    if not x.shape:
        raise ValueError("input must have rank >= 1")
    return norm_axis(int(a.reshape(-1)[0]), len(x.shape))


def norm_axis(axis: int, rank: int) -> int:
    if not -rank <= axis < max(rank, 1):
        raise ValueError(f"axis {axis} out of range for rank {rank}")
    return axis % max(rank, 1)


def same_padding(in_size, k, stride, dil, out_size, padding) -> int:
    """Leading pad, as TFLite computes it (SAME: half of the total, rounded down)."""
    if padding != PADDING_SAME:
        return 0
    eff = (k - 1) * dil + 1
    total = smax((out_size - 1) * stride + eff - in_size, 0)     # (an expression for a dynamic size)
    return total // 2


def checked(fn):
    """Wrap a check so that ValueErrors from helpers become reasons."""
    def wrapper(node, graph):
        try:
            return fn(node, graph)
        except ValueError as e:
            return str(e)
        except (IndexError, KeyError, TypeError, ZeroDivisionError) as e:
            return f"malformed operator ({type(e).__name__}: {e})"
    return wrapper


def known_ints(values) -> bool:
    """Whether every value is a plain integer (no --dynamic size: compiler/symbolic.py), as the vector and
    tiled kernel forms that fix their geometry at compile time need."""
    return all(isinstance(v, (int, np.integer)) for v in values)


def size(shape) -> int:
    if any(is_sym(d) for d in shape):
        return prod(shape)                 # (a dynamic dim: compiler/symbolic.py)
    return int(np.prod(shape, dtype=np.int64)) if len(shape) else 1
