"""Non-finite values (NaN, +Inf, -Inf): counts for the summaries of `gpuc run` and `gpuc verify`, and a
class per element for comparisons (two elements match in finiteness when their classes are equal)."""
from __future__ import annotations

import numpy as np

LABELS = {"nan": "NaN", "posinf": "+Inf", "neginf": "-Inf"}


def counts(a) -> dict | None:
    """{"nan": n, "posinf": n, "neginf": n} for a float array; None for any other dtype."""
    a = np.asarray(a)
    if a.dtype.kind != "f":
        return None
    return {"nan": int(np.isnan(a).sum()), "posinf": int(np.isposinf(a).sum()), "neginf": int(np.isneginf(a).sum())}


def describe(c: dict) -> str:
    """'2 NaN, 1 +Inf, 0 -Inf'."""
    return ", ".join(f"{c[k]} {label}" for k, label in LABELS.items())


def total(c: dict | None) -> int:
    return sum(c.values()) if c else 0


def classes(a) -> np.ndarray:
    """Per element: 0 finite, 1 NaN, 2 +Inf, 3 -Inf; a complex element combines its two parts (0: finite)."""
    a = np.asarray(a)
    if a.dtype.kind == "c":
        return classes(a.real) * 4 + classes(a.imag)
    if a.dtype.kind != "f":
        return np.zeros(a.shape, np.int8)
    return np.select([np.isnan(a), np.isposinf(a), np.isneginf(a)], [1, 2, 3], 0).astype(np.int8)
