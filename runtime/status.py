"""The status words of a bundle's run-time checks (bundle.checks; compiler/status.py).

Kernels that meet a value LiteRT's invoke refuses (an index out of range) count it in the status
tensor, which the program's first dispatch zeroes.  The runtime copies the status tensor back with
the outputs, as one more output spec that the model does not show (`tensors`, `attach`): every run
path (run, run_async, run_in_place, batches, programs with host steps, dynamic dims) copies it back
where it copies its outputs, and Slots.wait calls `check()` once the run is over: a non-zero word
raises RunError naming the op, its operator index and the checked tensor.  The words are zeroed on
the host after they are read, so a slot's staging holds non-zero words only between a run's copy and
its wait.  A bundle without checks gets nothing: no copy, no read.
"""
from __future__ import annotations

import numpy as np

from gpuc.errors import RunError
from gpuc.runtime.bundle import CHECK_WORDS


def tensors(bundle) -> list:
    """The status tensor to copy back with the outputs ([] without checks)."""
    return [bundle.checks[0].status] if bundle.checks else []


class StatusWords:
    """One slot's view of the status words in its output staging: rows (batch items) x words."""

    def __init__(self, checks, rows: np.ndarray, unit: str = "batch item"):
        self.checks, self.rows = checks, rows.reshape(-1, rows.shape[-1]).view(np.uint32)
        self.unit = unit                # what a row is, in the error (runtime/repeat.py: "run")
        self.rows[...] = 0              # (fresh staging memory holds anything)

    def check(self) -> None:
        """Raise RunError for the first failed check (and zero the words), else nothing."""
        if not self.rows.any():
            return
        words = self.rows.copy()
        self.rows[...] = 0
        for c in self.checks:
            w = words[:, c.word:c.word + CHECK_WORDS]
            hit = np.flatnonzero(w[:, 0])
            if hit.size:
                raise RunError(message(c, w[hit[0]], int(hit[0]) if words.shape[0] > 1 else None, self.unit))


def message(c, w, item, unit: str = "batch item") -> str:
    """The error of check `c` from its words w (count, value low, value high, position)."""
    value = int(np.array([w[1], w[2]], np.uint32).view(np.int64)[0])
    pos = int(w[3])
    bound = c.bounds[pos] if 0 <= pos < len(c.bounds) else -1
    rng = f"[0, {bound})" if bound >= 0 else "[0, dim)"
    comp = f" (component {pos} of an index)" if len(c.bounds) > 1 else ""
    where = f", {unit} {item}" if item is not None else ""
    op = f"{c.op} (operator #{c.operator}" if c.operator >= 0 else f"{c.op} ("
    return (f"{op}, indices {c.tensor!r}{where}): index {value} out of range {rng}{comp}; LiteRT fails the "
            f"invoke on it too")


def attach(slot, bundle, n_outputs: int):
    """Move the status words' staging views (the specs after the model's n_outputs outputs) from the
    slot's output views to slot.status (None without checks).  Returns the slot."""
    slot.status = None
    if bundle.checks:
        rows = slot.out_rows[n_outputs]
        del slot.out_views[n_outputs:], slot.out_rows[n_outputs:]
        slot.status = StatusWords(bundle.checks, rows)
    return slot
