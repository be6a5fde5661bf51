"""An input value -> an array of the input's dtype, as strictly as LiteRT's Interpreter.set_tensor.

* A typed value (a numpy array or scalar, or anything with a dtype) must have the input's dtype:
  anything else is refused (GpucError) naming the input (#position and name) and both dtypes, as LiteRT
  refuses it ("Got value of type INT64 but expected type INT32").  One exception: the right dtype in
  the other byte order is converted exactly (LiteRT takes its bytes as they are: wrong values).
* A python list, tuple or scalar (no dtype of its own) is converted as np.asarray(x, input dtype)
  would, but only where every value fits (below).  LiteRT refuses those whose inferred dtype (int64,
  float64, bool) is not the input's.
* cast=True (the run's opt-in; `--cast` in the CLI) converts a typed value the same checked way.

A value fits when it converts without changing: an integer within the target's range (bool: 0 or 1),
a float into an integer only when finite and integral and in range, an integer into a float only when
exactly representable there, a float into a narrower float when finite values stay finite (rounding to
the nearest representable value is the conversion; NaN and +-Inf are kept).  Complex, string and object
values never convert.  A value that does not fit is refused naming the input, the first offending
element (its index and value) and how many do not fit.
"""
from __future__ import annotations

import numpy as np

from gpuc.errors import GpucError

_UNTYPED = (list, tuple, bool, int, float)


def who(pos: int, name: str) -> str:
    return f"input #{pos} {name!r}"


def convert(pos: int, name: str, value, dtype: np.dtype, cast: bool = False) -> np.ndarray:
    """`value` (the model's input `pos`, `name`) as an array of `dtype`; see the module docstring."""
    typed = isinstance(value, np.generic) or not isinstance(value, _UNTYPED)
    try:
        a = np.asarray(value)
    except (ValueError, TypeError) as e:
        raise GpucError(f"{who(pos, name)}: cannot read the value as an array: {e}") from None
    if a.dtype == dtype:
        return a
    if a.dtype.kind == dtype.kind and a.dtype.itemsize == dtype.itemsize and a.dtype.kind in "biuf":
        return a.astype(dtype)                      # the other byte order: exact
    if typed and not cast:
        raise GpucError(f"{who(pos, name)}: expected dtype {dtype}, got {a.dtype} (LiteRT refuses it too); "
                        f"convert it (x.astype(np.{dtype})), or pass cast=True (CLI: --cast) to convert "
                        "values that fit")
    return checked(pos, name, a, dtype)


def checked(pos: int, name: str, a: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """`a` converted to `dtype` where every value fits, else GpucError naming the first that does not."""
    src, dst = a.dtype, np.dtype(dtype)
    if src.kind not in "biuf" or dst.kind not in "biuf":
        raise GpucError(f"{who(pos, name)}: cannot cast {src} to {dst} (expected dtype {dst})")
    if dst.kind == "f":
        with np.errstate(over="ignore"):
            out = a.astype(dst)
        if src.kind == "f":
            bad = np.isfinite(a) & ~np.isfinite(out)
            why = f"overflows {dst} (largest {np.finfo(dst).max})"
        else:
            bad = ~_exact_ints(out, a)
            why = f"is not exactly a {dst}"
        return _result(pos, name, a, dst, out, bad, why)
    lo, hi = (0, 1) if dst.kind == "b" else (int(np.iinfo(dst).min), int(np.iinfo(dst).max))
    rng = f"outside {dst}'s range {lo}..{hi}" if dst.kind != "b" else "not 0 or 1 (bool)"
    if src.kind == "f":
        a64 = a.astype(np.float64)                                   # exact; compared in float64
        with np.errstate(invalid="ignore"):
            integral = np.isfinite(a64) & (np.floor(a64) == a64)
            inside = (a64 >= float(lo)) & (a64 < float(hi) + 1.0)    # float(hi) + 1: a power of two, exact
        if not integral.all():
            return _result(pos, name, a, dst, None, ~integral, "is not an integer")
        return _result(pos, name, a, dst, None, ~inside, f"is {rng}")
    s_lo, s_hi = (0, 1) if src.kind == "b" else (int(np.iinfo(src).min), int(np.iinfo(src).max))
    if lo <= s_lo and s_hi <= hi:
        return a.astype(dst)
    a_cmp = a.astype(np.int8) if src.kind == "b" else a
    bad = (a_cmp < max(lo, s_lo)) | (a_cmp > min(hi, s_hi))          # bounds within the source's range
    return _result(pos, name, a, dst, None, bad, f"is {rng}")


def _exact_ints(f: np.ndarray, a: np.ndarray) -> np.ndarray:
    """Where float array `f` (converted from integer array `a`) holds exactly a's values."""
    info = None if a.dtype.kind == "b" else np.iinfo(a.dtype)
    if info is None or max(-int(info.min), int(info.max)) <= 2 ** (np.finfo(f.dtype).nmant + 1):
        return np.ones(a.shape, bool)                                # every value of a's dtype is exact
    fd = f.astype(np.float64)
    with np.errstate(invalid="ignore"):
        inside = np.isfinite(fd) & (fd >= float(info.min)) & (fd < float(info.max) + 1.0)
    back = np.where(inside, fd, 0.0).astype(a.dtype)                 # exact: in range and integral
    return inside & (back == a)


def _result(pos, name, a, dst, out, bad, why):
    if not bad.any():
        return a.astype(dst) if out is None else out
    k = int(np.argmax(bad.reshape(-1)))
    where = list(np.unravel_index(k, a.shape)) if a.ndim else []
    shown = repr(a.reshape(-1)[k].item())
    raise GpucError(f"{who(pos, name)}: cannot cast {a.dtype} to {dst}: element {[int(i) for i in where]} = "
                    f"{shown} {why} ({int(bad.sum())} of {a.size} element(s) do not fit)")
