"""Seeded random test data."""
from __future__ import annotations

import zlib

import numpy as np

I32_MIN, I32_MAX = -2**31, 2**31 - 1


def seed_of(name: str) -> int:
    return zlib.crc32(name.encode())


def rnd(shape, seed=0, lo=-1.0, hi=1.0) -> np.ndarray:
    """float32, uniform in [lo, hi)."""
    return np.random.default_rng(seed).uniform(lo, hi, tuple(shape)).astype(np.float32)


def irand(shape, seed, lo=-100, hi=100) -> np.ndarray:
    """int32, uniform in [lo, hi]."""
    return np.random.default_rng(seed).integers(lo, hi, tuple(shape), endpoint=True).astype(np.int32)
