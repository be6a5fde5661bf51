"""Native int8: what full-integer quantized models compute in int8 arithmetic, and LiteRT's integer
parameters for it.

passes/quant.py native_int8 rewrites each op of a full-integer int8 model into its int8 form (FORMS:
source op -> the int8 op, registered by ops/int8_conv.py and ops/int8_eltwise.py) when every op that
touches a quantized activation has one; int8 tensors then stay int8 in device buffers (4 per 32-bit
word) and int8 weights stay int8 in the bundle.  A model with any other op touching a quantized
activation runs as before: a float program with simulated quantization.

The reference is LiteRT's interpreter with its builtin kernels (BUILTIN_WITHOUT_DEFAULT_DELEGATES, as
the tests use): requantization as LiteRT's x86 build computes it, checked bit for bit by
tests/ops/test_int8_*.py:
- CONV_2D / FULLY_CONNECTED (ruy's x86 gemm epilogue): RQ_RUY, a double rounding with both steps
  rounding half up: r = (x * 2^ls * m + 2^30) >> 31, then (r + 2^(rs-1)) >> rs;
- DEPTHWISE_CONV_2D (the optimized depthwise kernel): output channels in whole blocks of 8 RQ_UPWARD
  (RQ_GEMMLOWP's first step, a half-up shift), the channels past the last block of 8 RQ_GEMMLOWP
  (found by experiment on LiteRT 2.3: channel depths 2-16, depth multipliers 1-2);
- ADD / SUB / MEAN / MUL / RELU, RELU6, RELU_N1_TO_1, LEAKY_RELU (common.h MultiplyByQuantizedMultiplier,
  gemmlowp's): RQ_GEMMLOWP, SaturatingRoundingDoublingHighMul then RoundingDivideByPOT, both rounding half away
  from zero.
The multipliers are QuantizeMultiplier's (frexp, round half away, 31-bit fixed point).
"""
from __future__ import annotations

import math

import numpy as np

# the native int8 ops' names (one place: the int8 modules and passes/quant.py read each other's)
CONV, DEPTHWISE, FC = "INT8_CONV_2D", "INT8_DEPTHWISE_CONV_2D", "INT8_FULLY_CONNECTED"
TRANSPOSE, PAD, CONCAT = "INT8_TRANSPOSE", "INT8_PAD", "INT8_CONCATENATION"
ADD, MEAN, SOFTMAX, AVG_POOL, MAX_POOL = "INT8_ADD", "INT8_MEAN", "INT8_SOFTMAX", "INT8_AVERAGE_POOL_2D", "INT8_MAX_POOL_2D"
RELU, RELU6, RELU_N1_TO_1 = "INT8_RELU", "INT8_RELU6", "INT8_RELU_N1_TO_1"
MUL, LOGISTIC, TANH, SUB = "INT8_MUL", "INT8_LOGISTIC", "INT8_TANH", "INT8_SUB"
LEAKY_RELU, HARD_SWISH = "INT8_LEAKY_RELU", "INT8_HARD_SWISH"
MAXIMUM, MINIMUM = "INT8_MAXIMUM", "INT8_MINIMUM"
RESIZE_BILINEAR, RESIZE_NEAREST = "INT8_RESIZE_BILINEAR", "INT8_RESIZE_NEAREST_NEIGHBOR"
REDUCE_MAX, REDUCE_MIN, ARG_MAX, ARG_MIN = "INT8_REDUCE_MAX", "INT8_REDUCE_MIN", "INT8_ARG_MAX", "INT8_ARG_MIN"
SQUARED_DIFFERENCE, PRELU, EXP = "INT8_SQUARED_DIFFERENCE", "INT8_PRELU", "INT8_EXP"
LOG_SOFTMAX, L2_NORMALIZATION = "INT8_LOG_SOFTMAX", "INT8_L2_NORMALIZATION"
ABS, NEG, ELU, LOG = "INT8_ABS", "INT8_NEG", "INT8_ELU", "INT8_LOG"
DIV = "INT8_DIV"
BATCH_MATMUL, TRANSPOSE_CONV = "INT8_BATCH_MATMUL", "INT8_TRANSPOSE_CONV"
# data-movement ops whose LiteRT int8 kernels copy bytes (no requantization): TFLite op -> its int8 form
BYTE_MOVES = {op: "INT8_" + op for op in ("SLICE", "STRIDED_SLICE", "GATHER", "GATHER_ND", "SPACE_TO_DEPTH",
                                          "DEPTH_TO_SPACE", "TILE", "SPLIT", "SPLIT_V", "PACK", "UNPACK",
                                          "MIRROR_PAD", "REVERSE_V2", "BATCH_TO_SPACE_ND", "SPACE_TO_BATCH_ND",
                                          "BROADCAST_TO")}

RQ_GEMMLOWP, RQ_RUY, RQ_UPWARD = 0, 1, 2
QMIN, QMAX = -128, 127
FORMS: dict[str, str] = {}          # TFLite op -> its int8 op (each int8 module adds its own)
CHECKS: dict[str, object] = {}      # int8 op -> (node, graph) -> None | reason (the source op's node)
BOUNDARY: dict[str, object] = {}    # ops that take int8 tensors as they are (QUANTIZE ...) -> check
WIDEN: dict[str, object] = {}       # int8 op -> (node, graph) -> None: reshapes it for faster kernels (after the rewrite)
MOVES: dict[str, object] = {}       # data-movement ops -> (node, graph) -> None | reason; rewrite (ops/int8_move.py)
FOLDS: list = []                    # graph -> None: folds after the rewrite (ops/int8_move.py fold_pads)
REFUSALS: dict[str, object] = {}    # TFLite op -> (node, graph) -> None | reason: int8 rules LiteRT's kernels enforce,
#                                     checked before quantization is simulated (a reason refuses the model)


def native_form(*pairs, check):
    """Declare `source op -> int8 op` pairs whose eligibility is `check(node, graph)`."""
    for src, dst in pairs:
        FORMS[src] = dst
        CHECKS[dst] = check


def quantize_multiplier(d: float) -> tuple[int, int]:
    """LiteRT's QuantizeMultiplier: d = m * 2^(shift - 31), m in [2^30, 2^31)."""
    if d == 0.0:
        return 0, 0
    q, shift = math.frexp(d)
    qf = int(math.floor(abs(q) * (1 << 31) + 0.5)) * (1 if q >= 0 else -1)
    if qf == (1 << 31):
        qf //= 2
        shift += 1
    if shift < -31:
        return 0, 0
    return qf, shift


def f32(v) -> float:
    return float(np.float32(v))


def per_tensor(t) -> bool:
    return (t.dtype == "int8" and t.quant is not None and t.quant.scale.size == 1 and float(t.quant.scale[0]) > 0
            and (t.quant.zero_point.size <= 1))


def scale_zp(t) -> tuple[float, int]:
    return f32(t.quant.scale[0]), int(t.quant.zero_point[0]) if t.quant.zero_point.size else 0


def act_range(act: int, out) -> tuple[int, int]:
    """CalculateActivationRangeQuantized: TFLite's fused activation on the output grid."""
    s, zp = scale_zp(out)

    def q(f):
        v = np.float32(f) / np.float32(s)
        r = math.floor(abs(float(v)) + 0.5) * (1 if v >= 0 else -1)
        if not -2.0 ** 31 <= r <= 2.0 ** 31:       # LiteRT's Quantize fails the model (no_integer_overflow_from_quantization)
            from gpuc.errors import UnsupportedError
            raise UnsupportedError(f"tensor {out.name!r}: its scale {s:g} puts the fused activation bound {f:g} "
                                   "outside int32 (LiteRT refuses the model)")
        return zp + int(r)
    from gpuc.compiler.ops.util import ACT_BOUNDS, ACT_NAMES
    bounds = ACT_BOUNDS.get(ACT_NAMES.get(act))
    if bounds is None:
        return QMIN, QMAX
    lo, hi = bounds
    return max(QMIN, q(lo)), QMAX if hi is None else min(QMAX, q(hi))


def int8_activation(graph, tid: int) -> bool:
    t = graph.t(tid)
    return not t.is_const and per_tensor(t)


def srdhm(a, b) -> np.ndarray:
    """gemmlowp's SaturatingRoundingDoublingHighMul of int32 values (numpy int64 arrays in and out)."""
    a, b = np.asarray(a, np.int64), np.asarray(b, np.int64)
    ab = a * b
    x = ab + np.where(ab >= 0, 1 << 30, 1 - (1 << 30))
    q = np.where(x >= 0, x >> 31, -((-x) >> 31))                    # (C++'s division truncates)
    return np.where((a == -2 ** 31) & (b == -2 ** 31), 2 ** 31 - 1, q)


def rounding_divide_by_pot(x, e: int) -> np.ndarray:
    """gemmlowp's RoundingDivideByPOT: x / 2^e rounded half away from zero."""
    x = np.asarray(x, np.int64)
    mask = (1 << e) - 1
    return (x >> e) + ((x & mask) > (mask >> 1) + (x < 0)).astype(np.int64)


def multiply_by_quantized_multiplier(x, m: int, shift: int) -> np.ndarray:
    """common.h MultiplyByQuantizedMultiplier (RQ_GEMMLOWP) of int32 values."""
    return rounding_divide_by_pot(srdhm(np.asarray(x, np.int64) * (1 << max(shift, 0)), m), max(-shift, 0))


def _c_int32(v: np.float32) -> int:
    """LUTPopulate's float -> int32 conversion and clamp as LiteRT 2.3's x86 build computes them: truncation,
    saturating past int32 (found by experiment: +inf and values past 2^31 give 127, not INT_MIN's -128)."""
    f = float(v)
    if math.isnan(f):
        return -2 ** 31
    return int(f) if -2.0 ** 31 <= f < 2.0 ** 31 else 2 ** 31 - 1 if f > 0 else -2 ** 31


def lut_populate(x_grid: tuple, y_grid: tuple, transform) -> np.ndarray:
    """LiteRT's LUTPopulate<int8_t> (common.h) with `transform` (float32 -> float32): the table by input byte
    + 128."""
    (si, zi), (so, zo) = x_grid, y_grid
    inv = np.float32(1) / np.float32(so)
    out = []
    with np.errstate(all="ignore"):
        for v in range(QMIN, QMAX + 1):
            t = np.float32(transform(np.float32(si) * np.float32(v - zi)))
            r = float(t * inv)
            rounded = np.float32(math.copysign(math.floor(abs(r) + 0.5), r) if math.isfinite(r) else r)  # TfLiteRound
            out.append(min(QMAX, max(QMIN, _c_int32(rounded + np.float32(zo)))))
    return np.array(out, np.int32)
