"""The elementwise ops: one row of facts per op, the only place that lists them.

Every elementwise list of the compiler is derived from TABLE: the ops math.py registers and lowers
(shaders/unary_math.comp, binary_math.comp), the steps FUSED_ELEMENTWISE may fuse (ew_fused.py,
passes/ew_fusion.py), the activation codes of every epilogue (the ACT / ACT2 defines; common.glsl's
gpuc_apply, whose cases codegen/glsl.py renders with act_glsl), the activations fuse_activation folds
(passes/fusion.py), the in-place ops (passes/inplace.py), the fp16 classes (passes/precision.py) and
the shader variants `make shaders` compiles.  Every field of a row is required:
tests/compiler/test_ew_table.py fails on a row whose facts do not check out.

Adding an elementwise op: one row here, its GLSL function in shaders/ew_math.glsl (an int overload
for int32), a test parameter in tests/helpers/catalogue.py (BINARY or UNARY_VARIANTS).

It sits beside the IR rather than in ops/ (whose package imports every op module) and imports
nothing of gpuc: codegen/glsl.py reads it too.
"""
from __future__ import annotations

from dataclasses import dataclass

F32, I32 = ("float32",), ("int32",)
FI = ("float32", "int32")

UNSAFE, BOUNDED, NEUTRAL = "unsafe", "bounded", "neutral"


@dataclass(frozen=True)
class Ew:
    """The facts of one elementwise op (no field has a default: each row decides every one)."""
    name: str              # the TFLite builtin
    arity: int             # operands: 1 (unary) or 2 (binary)
    broadcast: bool        # binary: the operands broadcast (numpy rules) as in LiteRT; else equal shapes
    glsl: str              # its function in shaders/ew_math.glsl (activations: common.glsl), the one
    #                        formula of the op: an overload per dtype it computes in
    params: tuple          # node attributes passed to that function after the operands: (name, type)
    dtypes: tuple          # dtypes its GPU kernel computes in (other dtypes: CPU, runtime/cpu_ops.py)
    act: int | None        # activation code (ACT / ACT2 defines, gpuc_apply) when the op can be another
    #                        op's fused activation (epilogue); None: it cannot
    act_dtypes: tuple      # the results that activation clamps as an epilogue (() when act is None)
    fused_act: bool        # the op has a fused_activation_function, applied by its kernel
    act_host: bool         # a following activation op folds into its kernel (fusion.fuse_activation)
    in_place: bool         # out[i] depends on the inputs' element i only: the output may take an input's bytes
    fp16: str              # UNSAFE: may leave fp16's range although its inputs fit; BOUNDED: its output
    #                        range is bounded whatever its inputs; NEUTRAL: neither (precision.py)
    fusible: bool          # can be a step of FUSED_ELEMENTWISE (float32; passes/ew_fusion.py)
    costly: bool           # its formula calls a transcendental builtin (exp, log, tanh, pow ...), itself or
    #                        through the ew_ functions it calls: tens of instructions per element (a
    #                        cooperative-matrix gemm does not take it into its epilogue, passes/gemm_epilogue.py)


_ALPHA, _APPROX = (("alpha", float),), (("approximate", bool),)
# name  arity  broadcast  glsl  params  dtypes  act  act_dtypes  fused_act  act_host  in_place  fp16  fusible  costly
TABLE = {r.name: r for r in [
    Ew("ABS", 1, False, "ew_abs", (), FI, None, (), False, False, True, NEUTRAL, True, False),
    Ew("NEG", 1, False, "ew_neg", (), FI, None, (), False, False, True, NEUTRAL, True, False),
    Ew("SQUARE", 1, False, "ew_square", (), F32, None, (), False, False, True, UNSAFE, True, False),
    Ew("SQRT", 1, False, "ew_sqrt", (), F32, None, (), False, False, True, NEUTRAL, True, False),
    Ew("RSQRT", 1, False, "ew_rsqrt", (), F32, None, (), False, False, True, UNSAFE, True, False),
    Ew("EXP", 1, False, "ew_exp", (), F32, None, (), False, False, True, UNSAFE, True, True),
    Ew("LOG", 1, False, "ew_log", (), F32, None, (), False, False, True, BOUNDED, True, True),
    Ew("SIN", 1, False, "ew_sin", (), F32, None, (), False, False, True, BOUNDED, True, False),
    Ew("COS", 1, False, "ew_cos", (), F32, None, (), False, False, True, BOUNDED, True, False),
    Ew("FLOOR", 1, False, "ew_floor", (), F32, None, (), False, False, True, NEUTRAL, True, False),
    Ew("CEIL", 1, False, "ew_ceil", (), F32, None, (), False, False, True, NEUTRAL, True, False),
    Ew("ROUND", 1, False, "ew_round", (), F32, None, (), False, False, True, NEUTRAL, True, False),
    Ew("SIGN", 1, False, "ew_sign", (), FI, None, (), False, False, True, BOUNDED, True, False),
    Ew("ELU", 1, False, "ew_elu", (), F32, None, (), False, False, True, NEUTRAL, True, True),
    Ew("GELU", 1, False, "ew_gelu", _APPROX, F32, None, (), False, False, True, NEUTRAL, True, True),
    Ew("LEAKY_RELU", 1, False, "ew_leaky_relu", _ALPHA, F32, None, (), False, False, True, NEUTRAL, True, False),
    Ew("RELU_0_TO_1", 1, False, "ew_relu_0_to_1", (), F32, None, (), False, False, True, BOUNDED, True, False),
    Ew("RELU", 1, False, "ew_relu", (), F32, 1, FI, False, False, True, NEUTRAL, True, False),
    Ew("RELU_N1_TO_1", 1, False, "ew_relu_n1_to_1", (), F32, 2, FI, False, False, True, BOUNDED, True, False),
    Ew("RELU6", 1, False, "ew_relu6", (), F32, 3, FI, False, False, True, BOUNDED, True, False),
    Ew("TANH", 1, False, "ew_tanh", (), F32, 4, F32, False, False, True, BOUNDED, True, True),
    Ew("LOGISTIC", 1, False, "ew_logistic", (), F32, 5, F32, False, False, True, BOUNDED, True, True),
    Ew("HARD_SWISH", 1, False, "ew_hard_swish", (), F32, 6, F32, False, False, True, NEUTRAL, True, False),
    Ew("ADD", 2, True, "ew_add", (), FI, None, (), True, True, True, NEUTRAL, True, False),
    Ew("SUB", 2, True, "ew_sub", (), FI, None, (), True, True, True, NEUTRAL, True, False),
    Ew("MUL", 2, True, "ew_mul", (), FI, None, (), True, True, True, NEUTRAL, True, False),
    Ew("DIV", 2, True, "ew_div", (), FI, None, (), True, False, True, UNSAFE, True, False),
    Ew("POW", 2, True, "ew_pow", (), FI, None, (), False, False, True, UNSAFE, True, True),
    Ew("SQUARED_DIFFERENCE", 2, True, "ew_squared_difference", (), FI, None, (), False, False, True, UNSAFE, True, False),
    Ew("MAXIMUM", 2, True, "ew_maximum", (), FI, None, (), False, False, True, NEUTRAL, True, False),
    Ew("MINIMUM", 2, True, "ew_minimum", (), FI, None, (), False, False, True, NEUTRAL, True, False),
    Ew("FLOOR_DIV", 2, True, "ew_floor_div", (), FI, None, (), False, False, True, UNSAFE, True, False),
    Ew("FLOOR_MOD", 2, True, "ew_floor_mod", (), FI, None, (), False, False, True, NEUTRAL, True, False),
    Ew("PRELU", 2, True, "ew_prelu", (), F32, None, (), False, False, True, NEUTRAL, True, False),
    Ew("ATAN2", 2, False, "ew_atan2", (), F32, None, (), False, False, True, BOUNDED, True, False),
    Ew("BITWISE_XOR", 2, True, "ew_bitwise_xor", (), I32, None, (), False, False, True, NEUTRAL, False, False),
    Ew("RIGHT_SHIFT", 2, True, "ew_right_shift", (), I32, None, (), False, False, True, NEUTRAL, False, False),
]}

# ---- activation codes: the one numbering of fused activations (TFLite's enum is only read, ops/util.py)
ACT_NONE = 0
ACT_FINITE = 7          # +-inf to +-FLT_MAX, NaN kept: a fused activation LiteRT ignores (ops/util.py)
ACT = {r.name: r.act for r in TABLE.values() if r.act is not None}          # activation op -> code
ACT_NAME = {**{c: n for n, c in ACT.items()}, ACT_NONE: "NONE", ACT_FINITE: "FINITE"}
ACTS = sorted(ACT_NAME)                                                       # every code, for variants
INT_ACTS = sorted({ACT_NONE, ACT_FINITE} | {r.act for r in TABLE.values() if "int32" in r.act_dtypes})


def act_glsl(dtype: str = "float32") -> str:
    """The cases of common.glsl's gpuc_apply(v, code) for results of `dtype`: one `if` per code,
    calling the activation's function (gpuc_finite for ACT_FINITE; other codes return v)."""
    cases = [(r.act, r.glsl) for r in TABLE.values() if r.act is not None and dtype in r.act_dtypes]
    if dtype == "float32":
        cases.append((ACT_FINITE, "gpuc_finite"))
    return " ".join(f"if (code == {c}) return {f}(v);" for c, f in sorted(cases))


# ---- derived lists
UNARY = [r.name for r in TABLE.values() if r.arity == 1]
BINARY = [r.name for r in TABLE.values() if r.arity == 2]
FUSIBLE = frozenset(r.name for r in TABLE.values() if r.fusible)
COSTLY = frozenset(r.name for r in TABLE.values() if r.costly)
IN_PLACE = frozenset(r.name for r in TABLE.values() if r.in_place)
FP16_UNSAFE = frozenset(r.name for r in TABLE.values() if r.fp16 == UNSAFE)
FP16_BOUNDED = frozenset(r.name for r in TABLE.values() if r.fp16 == BOUNDED)
BOUNDED_ACTS = frozenset(r.act for r in TABLE.values() if r.act is not None and r.fp16 == BOUNDED)
ACT_HOSTS = frozenset(r.name for r in TABLE.values() if r.act_host)
