"""The elementwise ops of compiler/ew_table.py, with LiteRT semantics: one lowering for every row
(shaders/unary_math.comp, shaders/binary_math.comp; each op's formula: its function in
shaders/ew_math.glsl, or common.glsl for the activations).

Unary ops keep the shape; binary ops broadcast (numpy rules) where LiteRT does; the dtypes and the
fused activation are the row's.

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

import operator

import numpy as np

from gpuc.compiler.codegen.kernel import Kernel
from gpuc.compiler.ew_table import ACT_NAME, ACT_NONE, ACTS, INT_ACTS, TABLE
from gpuc.compiler.glsl_literal import literal
from gpuc.compiler.ops import INTEGER, SHAPE_ONLY, Why, register, rules, template
from gpuc.compiler.ops.ew_vector import binding_strides, vector_form
from gpuc.compiler.ops.util import act_code, broadcast_strides, check_act, checked, size
from gpuc.compiler.symbolic import smax, smin

# dtype -> kind code used by the typed templates (1-byte kinds are packed 4 per 32-bit word)
KIND = {"float32": 0, "int32": 1, "bool": 2, "uint8": 3, "int8": 4}
BYTE_DTYPES = ("bool", "uint8", "int8")


def words(graph, tid: int) -> int:
    """The tensor a shader binds for `tid`: itself for 4-byte dtypes; for 1- and 2-byte dtypes a
    uint32 tensor of ceil(nbytes / 4) words over the same bytes (a view of runtime tensors, a
    zero-padded copy of constants), so the descriptor range covers the whole last word.  Shaders that
    write such a tensor write whole words (or single lanes atomically); the padding bytes lie inside
    the tensor's 256-byte-aligned slot.  8-byte dtypes (int64) are viewed the same way, as 2 words per
    element (low, high)."""
    t = graph.t(tid)
    if np.dtype(t.dtype).itemsize == 4:
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
# the ops of compiler/ew_table.py

def _param(typ, v):
    return bool(v) if typ is bool else float(np.float32(v or 0.0))


def params(node) -> dict:
    """The node's values of its op's GLSL parameters (ew_table row `params`: float32 or bool)."""
    return {name: _param(typ, node.attrs.get(name)) for name, typ in TABLE[node.op].params}


def call(op: str, args, values: dict) -> str:
    """GLSL of op's function (ew_table row `glsl`) on the GLSL operands `args`, then its parameters
    from `values` (a node's params() or a fused step; absent: false / 0.0)."""
    extra = [("true" if v else "false") if typ is bool else literal(v)
             for name, typ in TABLE[op].params for v in [_param(typ, values.get(name))]]
    return f"{TABLE[op].glsl}({', '.join(list(args) + extra)})"


# LiteRT fails the invocation on a zero divisor for these (op -> dtypes)
_ZERO_DIVISOR = {"DIV": ("int32",), "FLOOR_DIV": ("int32", "float32"), "FLOOR_MOD": ("int32",)}


@checked
def _check(node, graph):
    row = TABLE[node.op]
    ins, y = [graph.t(i) for i in node.inputs], graph.t(node.outputs[0])
    bad = dtype_reason(ins + [y], row.dtypes)
    if bad:
        return bad
    if row.arity == 1:
        x = ins[0]
        if x.dtype != y.dtype:
            return f"input dtype {x.dtype} differs from output dtype {y.dtype}"
        if x.size != y.size:
            return f"input has {x.size} elements, output {y.size}"
        return None
    a, b = ins
    if not a.dtype == b.dtype == y.dtype:
        return f"mixed dtypes: {a.dtype} and {b.dtype} -> {y.dtype}"
    if node.op == "PRELU" and tuple(a.shape) != tuple(y.shape):
        return f"output shape {list(y.shape)} differs from the input's {list(a.shape)}"
    if not row.broadcast and not tuple(a.shape) == tuple(b.shape) == tuple(y.shape):
        return f"operand shapes {list(a.shape)} and {list(b.shape)} differ (LiteRT's {node.op} does not broadcast)"
    bad = broadcast_reason([a.shape, b.shape], y.shape)
    if bad:
        return bad
    if row.fused_act and y.dtype == "int32":
        code = act_code(node)
        if code not in INT_ACTS:
            return f"fused activation {ACT_NAME.get(code, code)} on int32 not supported"
    elif row.fused_act:
        bad = check_act(node, graph)
        if bad:
            return bad
    if b.is_const:
        if y.dtype in _ZERO_DIVISOR.get(node.op, ()) and (np.asarray(b.data) == 0).any():
            return f"constant divisor {b.name!r} has zeros (LiteRT rejects division by 0)"
        if node.op == "POW" and y.dtype == "int32" and (np.asarray(b.data) < 0).any():
            return f"constant exponent {b.name!r} has negative values (LiteRT rejects them for int32)"
    return None


def lower(node, graph):
    row = TABLE[node.op]
    ins, y = [graph.t(i) for i in node.inputs], graph.t(node.outputs[0])
    defines = dict(EW_EXPR=call(node.op, [f"v{k}" for k in range(row.arity)], params(node)),
                   IS_INT=int(y.dtype == "int32"))
    if row.arity == 1:
        n = size(y.shape)
        vec = y.dtype == "float32" and isinstance(n, int) and n % 4 == 0      # (a dynamic size: scalar)
        return [Kernel("unary_math", [("out_", y.id), ("x", ins[0].id)], n // 4 if vec else n, dict(defines, VEC=int(vec)),
                       node.label(), vec4=("out_", "x") if vec else ())]
    a, b = ins
    same = tuple(a.shape) == tuple(b.shape) == tuple(y.shape)
    defines.update(ACT=act_code(node) if row.fused_act else ACT_NONE, SAME_SHAPE=int(same),
                   **geometry([a.shape, b.shape], y.shape, ["A", "B"]))
    binds = [("out_", y.id), ("a", a.id), ("b", b.id)]
    form = vector_form(ins, y.shape, most=1) if y.dtype == "float32" else None
    if not form:
        return [Kernel("binary_math", binds, size(y.shape), defines, node.label())]
    grid = list(y.shape[:-1]) + [y.shape[-1] // 4]       # (vector_form: the innermost extent a multiple of 4)
    defines.update(VEC=1, OUT_SHAPE=grid, A_STRIDES=binding_strides(a.shape, y.shape, form, 0),
                   B_STRIDES=binding_strides(b.shape, y.shape, form, 1))
    vec4 = ("out_",) + tuple(n for n, on in zip(("a", "b"), form[1]) if on)
    return [Kernel("binary_math", binds, size(y.shape) // 4, defines, node.label(), vec4=vec4)]


def _summary(row) -> str:
    return ", ".join(["numpy broadcasting" if row.broadcast else "elementwise", " and ".join(row.dtypes)]
                     + ["fused activation"] * row.fused_act + [f"attribute {n}" for n, _ in row.params])


# LiteRT's values on the host (constant folding: exact on integers); the other rows get shape-only rules
NUMPY = {
    "ADD": np.add, "SUB": np.subtract, "MUL": np.multiply, "MAXIMUM": np.maximum, "MINIMUM": np.minimum,
    "SQUARED_DIFFERENCE": lambda a, b: (a - b) * (a - b), "POW": np.power,
    "BITWISE_XOR": np.bitwise_xor, "RIGHT_SHIFT": np.right_shift,
    "FLOOR_DIV": lambda a, b: np.floor_divide(a, b) if a.dtype.kind in "iu" else np.floor(a / b),
    "FLOOR_MOD": np.mod,
    "DIV": lambda a, b: (np.trunc(a.astype(np.float64) / b).astype(a.dtype) if a.dtype.kind in "iu" else a / b),
    "NEG": np.negative, "ABS": np.abs,
}
DIVIDES = ("DIV", "FLOOR_DIV", "FLOOR_MOD")
# the rows that compute on sizes known only at run time (--dynamic shape arithmetic: the sym_value fact)
SYM_VALUE = {"ADD": operator.add, "SUB": operator.sub, "MUL": operator.mul, "FLOOR_DIV": operator.floordiv,
             "FLOOR_MOD": operator.mod, "MAXIMUM": smax, "MINIMUM": smin}
# the rows runtime/cpu_ops.py has a kernel for (by the same name): it runs them in dtypes the GPU does not take
CPU = ("ABS", "ADD", "CEIL", "COS", "DIV", "EXP", "FLOOR", "FLOOR_DIV", "FLOOR_MOD", "LOG", "MAXIMUM", "MINIMUM",
       "MUL", "NEG", "POW", "SIGN", "SIN", "SQRT", "SQUARE", "SQUARED_DIFFERENCE", "SUB")


def _facts(row) -> dict:
    """Every fact of a TABLE row (compiler/ops/__init__.py FACT_FIELDS), derived from its columns."""
    fn = NUMPY.get(row.name)
    if row.arity == 1:
        shape = rules.unary(fn) if fn else rules.same_shape
    else:
        shape = rules.binary(fn, row.name in DIVIDES) if fn else rules.broadcast_shape
    sym = {"sym_value": rules.sym_binary(SYM_VALUE[row.name])} if row.name in SYM_VALUE else {}
    return dict(shape=shape, exact=INTEGER if fn else SHAPE_ONLY, **sym,
                sym_shape="same" if row.arity == 1 else "broadcast",
                batch="unary" if row.arity == 1 else "elementwise",
                pieces=Why("computes values"), fp16=row.fp16, in_place=row.in_place,
                templates=("unary_math",) if row.arity == 1 else ("binary_math",), flops=rules.per_output,
                cpu=row.name if row.name in CPU else Why("no CPU kernel: the GPU kernel takes every dtype LiteRT "
                                                         "has for it that gpuc runs"))


for _row in TABLE.values():
    register(_row.name, check=_check, dtypes=_row.dtypes, inputs=(_row.arity, _row.arity),
             summary=_summary(_row), **_facts(_row))(lower)
template("unary_math", item_major=True, flat=True, in_place=None)
template("binary_math", item_major=True, flat=True, in_place=None)


def _samples(arity: int, dtype: str) -> list:
    """EW_EXPR of every op of `arity` computing in `dtype` (for `make shaders`)."""
    return [call(r.name, [f"v{k}" for k in range(arity)], {"alpha": 0.2})
            for r in TABLE.values() if r.arity == arity and dtype in r.dtypes]


_FQ = dict(FQ_SCALE=0.0235, FQ_ZP=-5, FQ_MIN=-128, FQ_MAX=127)
_BCAST = dict(RANK=3, OUT_SHAPE=[2, 3, 4], A_STRIDES=[12, 4, 1], B_STRIDES=[0, 0, 1], **_FQ)
_FLOAT_ACT = next(r.name for r in TABLE.values() if r.fused_act and "float32" in r.dtypes)
_INT_ACT = next(r.name for r in TABLE.values() if r.fused_act and "int32" in r.dtypes)
VARIANTS = {   # every op once per dtype; the epilogue switches (ACT, FQ) with one op (and a copy)
    "unary_math": ({}, {"EW_EXPR": _samples(1, "float32")}, ["out_", "x"]),
    "unary_math:vec": ({"VEC": 1}, {"EW_EXPR": _samples(1, "float32")}, ["out_", "x"], {},
                       lambda d: dict(vec4=("out_", "x"))),
    "unary_math:copy": (_FQ, {"ACT": ACTS, "FQ": [0, 1], "VEC": [0, 1]}, ["out_", "x"], {},
                        lambda d: dict(vec4=("out_", "x") if d["VEC"] else ())),
    "unary_math:int": ({}, {"EW_EXPR": _samples(1, "int32"), "IS_INT": [1]}, ["out_", "x"]),
    "binary_math": (_BCAST, {"EW_EXPR": _samples(2, "float32"), "SAME_SHAPE": [0, 1]}, ["out_", "a", "b"]),
    "binary_math:vec": (dict(_BCAST, VEC=1, OUT_SHAPE=[2, 3, 1], A_STRIDES=[3, 1, 1], B_STRIDES=[0, 0, 0]),
                        {"EW_EXPR": _samples(2, "float32"), "SAME_SHAPE": [0, 1]}, ["out_", "a", "b"], {},
                        lambda d: dict(vec4=("out_", "a"))),
    "binary_math:vec_act": (dict(_BCAST, VEC=1, OUT_SHAPE=[2, 3, 1], A_STRIDES=[3, 1, 1], B_STRIDES=[3, 1, 1]),
                            {"EW_EXPR": [call(_FLOAT_ACT, ["v0", "v1"], {})], "ACT": ACTS, "FQ": [0, 1]},
                            ["out_", "a", "b"], {}, lambda d: dict(vec4=("out_", "a", "b"))),
    "binary_math:act": (_BCAST, {"EW_EXPR": [call(_FLOAT_ACT, ["v0", "v1"], {})], "ACT": ACTS, "FQ": [0, 1]},
                        ["out_", "a", "b"]),
    "binary_math:int": (_BCAST, {"EW_EXPR": _samples(2, "int32"), "IS_INT": [1], "SAME_SHAPE": [0, 1]},
                        ["out_", "a", "b"]),
    "binary_math:int_act": (_BCAST, {"EW_EXPR": [call(_INT_ACT, ["v0", "v1"], {})], "IS_INT": [1], "ACT": INT_ACTS},
                            ["out_", "a", "b"]),
}
