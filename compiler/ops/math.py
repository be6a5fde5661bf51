"""Elementwise math with LiteRT semantics (shaders/unary_math.comp, shaders/binary_math.comp).

Unary (float32): ABS NEG SQUARE SQRT RSQRT EXP LOG SIN COS FLOOR CEIL ROUND SIGN ELU HARD_SWISH GELU
LEAKY_RELU RELU_0_TO_1; int32 too for ABS NEG SIGN (the int32 unary ops LiteRT has).
Binary with numpy broadcasting (float32 and int32): DIV POW SQUARED_DIFFERENCE MAXIMUM MINIMUM
FLOOR_DIV FLOOR_MOD, PRELU (float32), and the int32 forms of ADD SUB MUL (float32 ADD/SUB/MUL stay
with elementwise.py: this module wraps their registry entries and only takes the int32 case).

Integer semantics follow LiteRT on x86: ADD/SUB/MUL/SQUARED_DIFFERENCE wrap, DIV truncates
(INT_MIN / -1 -> INT_MAX), FLOOR_DIV is floor(double(a) / double(b)) converted back (INT_MIN / -1 ->
INT_MIN), FLOOR_MOD takes the divisor's sign, POW is std::pow in double converted back (out of range
-> INT_MIN).  LiteRT rejects zero divisors (DIV/FLOOR_DIV/FLOOR_MOD int32, FLOOR_DIV float32) and
negative int32 exponents at run time: with constant operands gpuc reports them at compile time; with
runtime operands the result for those elements is unspecified (LiteRT fails the whole invocation).

Also the shared helpers of the typed elementwise ops (compare.py): dtype kinds, broadcast checks
and word views of 1-byte tensors.
"""
from __future__ import annotations

import numpy as np

from gpuc.compiler.codegen.kernel import Kernel
from gpuc.compiler.ops import REGISTRY, register
from gpuc.compiler.ops.elementwise import broadcast_strides
from gpuc.compiler.ops.util import ACT_FINITE, act_code, check_act, checked, size

# dtype -> kind code used by the typed templates (1-byte kinds are packed 4 per 32-bit word)
KIND = {"float32": 0, "int32": 1, "bool": 2, "uint8": 3, "int8": 4}
BYTE_DTYPES = ("bool", "uint8", "int8")


def words(graph, tid: int) -> int:
    """The tensor a shader binds for `tid`: itself for 4-byte dtypes; for 1-byte dtypes a uint32
    tensor of ceil(n / 4) words over the same bytes (a view of runtime tensors, a zero-padded copy
    of constants), so the descriptor range covers the whole last word.  Shaders that write such a
    tensor write whole words; the padding bytes lie inside the tensor's 256-byte-aligned slot.
    8-byte dtypes (int64) are viewed the same way, as 2 words per element (low, high)."""
    t = graph.t(tid)
    if t.dtype not in BYTE_DTYPES and np.dtype(t.dtype).itemsize != 8:
        return tid
    cache = graph.memo.word_views
    if tid not in cache:
        n = -(-t.nbytes // 4)
        if t.is_const:
            raw = np.zeros(n * 4, np.uint8)
            raw[:t.nbytes] = np.ascontiguousarray(t.data).view(np.uint8).reshape(-1)
            cache[tid] = graph.add_const(f"{t.name}#words", raw.view("<u4"))
        else:
            v = graph.add_tensor(f"{t.name}#words", (n,), "uint32")
            graph.aliases[v] = tid
            cache[tid] = v
    return cache[tid]


def broadcast_reason(shapes, out_shape) -> str | None:
    """None if every shape broadcasts (numpy rules) to exactly out_shape."""
    r = len(out_shape)
    for s in shapes:
        if len(s) > r:
            return f"input shape {list(s)} has a higher rank than the output {list(out_shape)}"
        padded = [1] * (r - len(s)) + list(s)
        if any(p != 1 and p != o for p, o in zip(padded, out_shape)):
            return f"input shapes {[list(x) for x in shapes]} do not broadcast to {list(out_shape)}"
    pads = [[1] * (r - len(s)) + list(s) for s in shapes]
    expect = [next((p[d] for p in pads if p[d] != 1), 1) for d in range(r)]
    if expect != list(out_shape):
        return f"output shape {list(out_shape)} is not the broadcast of {[list(x) for x in shapes]}"
    return None


def geometry(shapes, out_shape, names) -> dict:
    """RANK, OUT_SHAPE and one <NAME>_STRIDES array per input shape (0 on broadcast dims)."""
    d = dict(RANK=max(len(out_shape), 1), OUT_SHAPE=list(out_shape) or [1])
    for name, s in zip(names, shapes):
        d[f"{name}_STRIDES"] = broadcast_strides(s, out_shape) or [0]
    return d


def dtype_reason(tensors, allowed) -> str | None:
    for t in tensors:
        if t.dtype not in allowed:
            return f"tensor {t.name!r} has dtype {t.dtype} (supported: {', '.join(allowed)})"
    return None


# ------------------------------------------------------------------------------------------------
# unary

UNARY_FN = {"ABS": 0, "NEG": 1, "SQUARE": 2, "SQRT": 3, "RSQRT": 4, "EXP": 5, "LOG": 6, "SIN": 7, "COS": 8,
            "FLOOR": 9, "CEIL": 10, "ROUND": 11, "SIGN": 12, "ELU": 13, "HARD_SWISH": 14, "GELU": 15,
            "LEAKY_RELU": 17, "RELU_0_TO_1": 18}
INT_UNARY = ("ABS", "NEG", "SIGN")


@checked
def _check_unary(node, graph):
    x, y = graph.t(node.inputs[0]), graph.t(node.outputs[0])
    allowed = ("float32", "int32") if node.op in INT_UNARY else ("float32",)
    bad = dtype_reason([x, y], allowed)
    if bad:
        return bad
    if x.dtype != y.dtype:
        return f"input dtype {x.dtype} differs from output dtype {y.dtype}"
    if tuple(x.shape) != tuple(y.shape):
        return f"input shape {list(x.shape)} differs from output shape {list(y.shape)}"
    return None


def _unary(node, graph):
    x, y = graph.t(node.inputs[0]), graph.t(node.outputs[0])
    fn = UNARY_FN[node.op]
    if node.op == "GELU" and not node.attrs.get("approximate", False):
        fn = 16
    defines = dict(FN=fn, IS_INT=int(y.dtype == "int32"))
    if node.op == "LEAKY_RELU":
        defines["ALPHA"] = float(np.float32(node.attrs.get("alpha", 0.0) or 0.0))
    return [Kernel("unary_math", [("out_", y.id), ("x", x.id)], size(y.shape), defines, node.label())]


register(*INT_UNARY, check=_check_unary, dtypes=("float32", "int32"), inputs=(1, 1),
         summary="elementwise; float32 and int32")(_unary)
register(*(op for op in UNARY_FN if op not in INT_UNARY), check=_check_unary, inputs=(1, 1),
         summary="elementwise math (GELU: tanh or erf form; LEAKY_RELU: alpha)")(_unary)


# ------------------------------------------------------------------------------------------------
# binary

BINARY_OP = {"ADD": 0, "SUB": 1, "MUL": 2, "DIV": 3, "POW": 4, "SQUARED_DIFFERENCE": 5, "MAXIMUM": 6,
             "MINIMUM": 7, "FLOOR_DIV": 8, "FLOOR_MOD": 9, "PRELU": 10}
# LiteRT fails the invocation on a zero divisor for these (op -> dtypes)
_ZERO_DIVISOR = {"DIV": ("int32",), "FLOOR_DIV": ("int32", "float32"), "FLOOR_MOD": ("int32",)}


@checked
def _check_binary_math(node, graph):
    a, b, y = (graph.t(i) for i in (*node.inputs, node.outputs[0]))
    allowed = ("float32",) if node.op == "PRELU" else ("float32", "int32")
    bad = dtype_reason([a, b, y], allowed)
    if bad:
        return bad
    if not a.dtype == b.dtype == y.dtype:
        return f"mixed dtypes: {a.dtype} and {b.dtype} -> {y.dtype}"
    if node.op == "PRELU":
        if tuple(a.shape) != tuple(y.shape):
            return f"output shape {list(y.shape)} differs from the input's {list(a.shape)}"
    bad = broadcast_reason([a.shape, b.shape], y.shape)
    if bad:
        return bad
    if y.dtype == "int32":
        code = act_code(node)
        if code not in (0, 1, 2, 3, ACT_FINITE):       # (ACT_FINITE: an ignored TANH, nothing to clamp)
            name = {1: "RELU", 2: "RELU_N1_TO_1", 3: "RELU6", 4: "TANH", 5: "LOGISTIC"}.get(code, code)
            return f"fused activation {name} on int32 not supported"
    else:
        bad = check_act(node, graph)
        if bad:
            return bad
    if b.is_const:
        if y.dtype in _ZERO_DIVISOR.get(node.op, ()) and (np.asarray(b.data) == 0).any():
            return f"constant divisor {b.name!r} has zeros (LiteRT rejects division by 0)"
        if node.op == "POW" and y.dtype == "int32" and (np.asarray(b.data) < 0).any():
            return f"constant exponent {b.name!r} has negative values (LiteRT rejects them for int32)"
    return None


def _binary(node, graph):
    a, b, y = (graph.t(i) for i in (*node.inputs, node.outputs[0]))
    same = tuple(a.shape) == tuple(b.shape) == tuple(y.shape)
    defines = dict(OP=BINARY_OP[node.op], IS_INT=int(y.dtype == "int32"), ACT=act_code(node), SAME_SHAPE=int(same),
                   **geometry([a.shape, b.shape], y.shape, ["A", "B"]))
    binds = [("out_", y.id), ("a", a.id), ("b", b.id)]
    return [Kernel("binary_math", binds, size(y.shape), defines, node.label())]


register("DIV", "POW", "SQUARED_DIFFERENCE", "MAXIMUM", "MINIMUM", "FLOOR_DIV", "FLOOR_MOD",
         check=_check_binary_math, dtypes=("float32", "int32"), inputs=(2, 2),
         summary="numpy broadcasting, float32 and int32 (DIV: fused activation)")(_binary)
register("PRELU", check=_check_binary_math, inputs=(2, 2), summary="alpha broadcast against the input")(_binary)


# ADD / SUB / MUL: elementwise.py lowers float32; the int32 case is added here around its entries
# (importing broadcast_strides above has loaded elementwise.py, so its entries are registered).
_ARITH_BASE = {op: REGISTRY[op] for op in ("ADD", "SUB", "MUL")}


def _int_case(node, graph) -> bool:
    return any(graph.t(t).dtype == "int32" for t in list(node.inputs) + list(node.outputs) if t >= 0)


@checked
def _check_arith(node, graph):
    if _int_case(node, graph):
        return _check_binary_math(node, graph)
    base = _ARITH_BASE[node.op]
    return base.check(node, graph) if base.check else None


def _arith(node, graph):
    if _int_case(node, graph):
        return _binary(node, graph)
    return _ARITH_BASE[node.op].lower(node, graph)


for _op, _base in _ARITH_BASE.items():
    register(_op, check=_check_arith, dtypes=_base.dtypes | {"int32"}, max_version=_base.max_version,
             summary=f"{_base.summary}; int32 wraps on overflow", inputs=_base.inputs, outputs=_base.outputs,
             optional=_base.optional)(_arith)


_BCAST = dict(RANK=3, OUT_SHAPE=[2, 3, 4], A_STRIDES=[12, 4, 1], B_STRIDES=[0, 0, 1])
VARIANTS = {
    "unary_math": (dict(ALPHA=0.2), {"FN": list(range(19)), "IS_INT": [0, 1]}, ["out_", "x"]),
    "binary_math": (_BCAST, {"OP": list(range(11)), "IS_INT": [0, 1], "ACT": [0, 1, 2, 3, 4, 5, 7],
                             "SAME_SHAPE": [0, 1]}, ["out_", "a", "b"]),
}
