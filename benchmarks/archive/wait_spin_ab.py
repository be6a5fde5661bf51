"""A/B of the passive wait's spin (runtime/slots.py SPIN_LEAD_S, runtime/device.py SPIN_S): run() and
run_in_place medians of one bundle with the spin as it is and switched off, alternating, in one process.

    python -m benchmarks.archive.wait_spin_ab MODEL.tflite [--batch 32] [--runs 30]
"""
from __future__ import annotations

import argparse
import sys

import numpy as np

import gpuc
from gpuc.runtime import device as dev
from benchmarks.timing import timed  # noqa: E402


def med(fn, runs):
    """Median ms of `runs` calls after 0.5 s of calls (harness.timed)."""
    return timed(fn, runs, warmup_s=0.5)["median_ms"]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--runs", type=int, default=30)
    a = ap.parse_args()
    opts = {"max_batch": a.batch} if a.batch > 1 else {}
    with gpuc.load(gpuc.compile(a.model, **opts)) as m:
        s = m.inputs[0]
        x = np.random.default_rng(0).standard_normal([a.batch] + list(s.shape[1:])).astype(s.dtype)
        b = a.batch if a.batch > 1 else None
        spin = dev.SPIN_S
        for rnd in range(2):
            for on in (True, False):
                dev.SPIN_S = spin if on else 0.0
                r = med(lambda: m.run([x]), a.runs)
                ip = med(lambda: m.run_in_place(batch=b), a.runs)
                print(f"round {rnd} spin {'on ' if on else 'off'}: run() {r:.3f} ms, run_in_place {ip:.3f} ms", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
