"""LiteRT's int8 HARD_SWISH (activations.cc HardSwishPrepare, reference_ops::HardSwish), emulated bit for bit in
numpy over the 256 input bytes: the native int8 form (ops/int8_eltwise.py) runs the resulting table.

The kernel works in 16-bit fixed point: the input minus its zero point, times 2^7 ("high-res input scale",
input scale / 128); that value rescaled to the output scale by a 16-bit multiplier (rounding doubling high
multiply), and separately to the scale on which 3.0 is 2^15 (the "relu-ish" value: a saturating left shift
where the exponent is positive, the 16-bit multiply, then a rounding right shift where it is negative),
mapped from [-1, 1] to [0, 1] ((v + 2^15) >> 1); the two multiplied (doubling high multiply, truncating),
shifted right by the output exponent (rounding half away from zero), plus the output zero point, clamped.
The multipliers are computed in float32 as LiteRT computes them, quantized to 32 bits (QuantizeMultiplier)
and then to 16 (DownScaleInt32ToInt16Multiplier: + 2^15, >> 16, saturating)."""
from __future__ import annotations

import numpy as np

from gpuc.compiler.ops.int8_common import QMAX, QMIN, quantize_multiplier

I16_MIN, I16_MAX = -(1 << 15), (1 << 15) - 1


def _to16(m32: int) -> int:
    return I16_MAX if m32 >= (1 << 31) - 1 - (1 << 15) else (m32 + (1 << 15)) >> 16


def _trunc_div(x: np.ndarray, d: int) -> np.ndarray:
    """C++ integer division (toward zero) of int64 values by a positive d."""
    q = np.abs(x) // d
    return np.where(x < 0, -q, q)


def _rounding_high_mul16(a: np.ndarray, b: int) -> np.ndarray:
    """gemmlowp's SaturatingRoundingDoublingHighMul on int16 values."""
    ab = a.astype(np.int64) * b
    nudge = np.where(ab >= 0, 1 << 14, 1 - (1 << 14))
    r = _trunc_div(ab + nudge, 1 << 15)
    return np.where((a == I16_MIN) & (b == I16_MIN), I16_MAX, r)


def _high_mul16(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """SaturatingDoublingHighMul (no rounding) on int16 values."""
    r = _trunc_div(a.astype(np.int64) * b.astype(np.int64), 1 << 15)
    return np.where((a == I16_MIN) & (b == I16_MIN), I16_MAX, r)


def _rounding_shift_right(x: np.ndarray, e: int) -> np.ndarray:
    """gemmlowp's RoundingDivideByPOT: half away from zero."""
    if e <= 0:
        return x
    mask = (1 << e) - 1
    return (x >> e) + ((x & mask) > ((mask >> 1) + (x < 0))).astype(np.int64)


def _saturating_left_shift16(x: np.ndarray, e: int) -> np.ndarray:
    return np.clip(x * (1 << e), I16_MIN, I16_MAX)


def hard_swish_table(x_grid: tuple, y_grid: tuple) -> np.ndarray:
    """int8 outputs for the inputs -128..127 (index = input + 128) on input grid x_grid and output grid y_grid
    ((scale, zero point) each).  ValueError where LiteRT's Prepare fails (an output exponent above 0)."""
    f = np.float32
    (si, zi), (so, zo) = x_grid, y_grid
    hires = f(f(1.0 / 128.0) * f(si))
    m_out, e_out = quantize_multiplier(float(f(hires / f(so))))
    if e_out > 0:
        raise ValueError("HARD_SWISH: the output scale is too small for LiteRT's kernel (its exponent above 0)")
    m_rel, e_rel = quantize_multiplier(float(f(hires / f(f(3.0) / f(32768.0)))))
    m_out16, m_rel16 = _to16(m_out), _to16(m_rel)
    v = np.arange(QMIN, QMAX + 1, dtype=np.int64) - zi
    hi = np.clip(v * 128, I16_MIN, I16_MAX)                   # (|v| <= 255: fits)
    on_out = _rounding_high_mul16(hi, m_out16)
    rel = hi
    if e_rel > 0:
        rel = _saturating_left_shift16(rel, e_rel - 1)
    rel = _rounding_high_mul16(rel, m_rel16)
    if e_rel > 0:
        rel = _saturating_left_shift16(rel, 1)
    if e_rel < 0:
        rel = _rounding_shift_right(rel, -e_rel)
    rel = (rel + (1 << 15)) >> 1
    out = _rounding_shift_right(_high_mul16(rel, on_out), -e_out) + zo
    return np.clip(out, QMIN, QMAX)
