"""The CPU kernel table (runtime/cpu_ops.py, runtime/cpu_movement.py register into it): what a kernel
is, the tensor specs its check sees, and the checks the kernel modules share.  Imports nothing of gpuc.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable


@dataclass
class Spec:
    shape: tuple
    dtype: str
    value: object = None          # the constant value, when known at compile time
    quantized: bool = False


@dataclass
class CpuOp:
    fn: Callable
    check: Callable | None = None
    raw: bool = False             # moves values without arithmetic: quantized integers are fine
    summary: str = ""


CPU_OPS: dict[str, CpuOp] = {}


def cpu_op(*names, check=None, raw=False, summary=""):
    def deco(fn):
        for n in names:
            CPU_OPS[n] = CpuOp(fn, check, raw, summary)
        return fn
    return deco


def norm_axis(a, rank):
    """Axis `a` of a rank-`rank` tensor, normalized (ValueError when out of range)."""
    a = int(a)
    if not -rank <= a < max(rank, 1):
        raise ValueError(f"axis {a} out of range for rank {rank}")
    return a % max(rank, 1)


def const_reason(specs, i, what):
    """Why input i cannot be used (it must be a constant), or None."""
    if i >= len(specs) or specs[i] is None or specs[i].value is None:
        return f"{what} (input {i}) must be a constant"
    return None
