"""A/B of runtime/hostcopy.py's SPLIT_BYTES (the size from which input / output copies are split over
threads) on run(): median run() ms of a model for each threshold, interleaved in blocks, plus the
in-place path (no copies) for reference.

    python -m benchmarks.archive.hostcopy_split_ab MODEL.tflite [--splits 4194304,524288,131072] [--runs 300]
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import gpuc
from gpuc.runtime import hostcopy


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--splits", default="4194304,1048576,524288,262144,131072")
    ap.add_argument("--runs", type=int, default=300)
    a = ap.parse_args()
    splits = [int(s) for s in a.splits.split(",")]
    m = gpuc.load(gpuc.compile(a.model))
    xs = [np.random.default_rng(0).standard_normal(s.shape).astype(s.dtype) for s in m.inputs]
    t0 = time.time()
    while time.time() - t0 < 1.0:
        m.run(xs)
    times = {s: [] for s in splits}
    orig = hostcopy.SPLIT_BYTES
    for _ in range(a.runs // 20):
        for s in splits:
            hostcopy.SPLIT_BYTES = s
            for _ in range(20):
                t = time.perf_counter()
                m.run(xs)
                times[s].append((time.perf_counter() - t) * 1e3)
    hostcopy.SPLIT_BYTES = orig
    print(f"{a.model.split('/')[-1]}: inputs {sum(x.nbytes for x in xs)} B, threads {hostcopy._threads()}")
    for s in splits:
        print(f"  split {s:>8d} B: run() median {statistics.median(times[s]):.3f} ms  "
              f"p90 {np.percentile(times[s], 90):.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
