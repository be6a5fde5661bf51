"""How long a run may keep the GPU: the defaults, the parser of a timeout setting (--timeout,
GPUC_GPU_TIMEOUT_S, gpuc.load(timeout_s=...)) and the error a run past it raises.  Device
(runtime/device.py) picks the default for its kind; slots.py, program.py and executor.py apply it."""
from __future__ import annotations

import math

from gpuc.errors import GpucError, GpuTimeoutError

# How long a run may keep the GPU before it fails with GpuTimeoutError (math.inf: no limit).  The
# default fits the device: a GPU that takes a minute over one submission has hung (or been given far
# too much), while a CPU implementation (lavapipe) runs a big model for minutes and must not be cut off.
TIMEOUT_ENV = "GPUC_GPU_TIMEOUT_S"
GPU_TIMEOUT_S = 60.0
CPU_TIMEOUT_S = math.inf


def parse_timeout(value, what: str = "timeout") -> float | None:
    """Seconds (> 0), or math.inf for 0 / "none" / "inf" (no limit); None / "" -> None (the default)."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, str) and value.strip().lower() in ("none", "inf", "off"):
        return math.inf
    try:
        t = float(value)
    except (TypeError, ValueError):
        t = math.nan
    if isinstance(value, bool) or not t >= 0:
        raise GpucError(f"{what} must be a number of seconds (0: no limit), not {value!r}")
    return math.inf if t == 0 else t


def describe_timeout(t: float) -> str:
    return "no limit" if t == math.inf else f"{t:g} s"


def run_timeout_error(timeout_s: float) -> GpuTimeoutError:
    """A run (host steps and jumps included: runtime/program.py) went past its timeout."""
    return GpuTimeoutError(
        f"the run did not finish within {describe_timeout(timeout_s)} (host (CPU) steps and jumps count too: a "
        f"loop that does not end?); allow longer with --timeout SECONDS, {TIMEOUT_ENV} or "
        "gpuc.load(..., timeout_s=...) (0: no limit)")
