"""Before/after of issue 15's work in one process: `before` compiles without fuse_layer_norm and
schedule_dispatches and loads with a barrier between every two dispatches (GPUC_ALL_BARRIERS=1), as
gpuc did; `after` is the default.  Median run() time over interleaved rounds, dispatches, barriers,
and the largest difference between the two outputs.

    python benchmarks/issue15_ab.py MODEL.tflite ... [--runs 200] [--rounds 3] [--json OUT]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
from pathlib import Path

import numpy as np

import gpuc
from barriers_ab import median_ms

BEFORE = dict(disable_passes=["fuse_layer_norm", "schedule_dispatches"])


def load(path, before: bool):
    bundle = gpuc.compile(path, **(BEFORE if before else {}))
    os.environ["GPUC_ALL_BARRIERS"] = "1" if before else "0"
    try:
        return gpuc.load(bundle)
    finally:
        os.environ.pop("GPUC_ALL_BARRIERS")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("models", nargs="+", type=Path)
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()
    rows = []
    for path in a.models:
        ms = {"before": load(path, True), "after": load(path, False)}
        xs = [np.random.default_rng(0).uniform(-1, 1, s.shape).astype(s.dtype) for s in ms["before"].inputs]
        o_before, o_after = (ms[k].run(xs) for k in ("before", "after"))
        diff = max(float(np.abs(p - q).max() / max(np.abs(p).max(), 1e-30)) for p, q in zip(o_before, o_after))
        times = {k: [] for k in ms}
        for _ in range(a.rounds):
            for k, m in ms.items():
                times[k].append(median_ms(m, xs, a.runs))
        row = dict(model=path.stem, rel_diff=diff,
                   **{f"dispatches_{k}": len(m.bundle.dispatches) for k, m in ms.items()},
                   **{f"barriers_{k}": sum(m.recorder.barriers_before(0, len(m.bundle.dispatches))) for k, m in ms.items()},
                   **{f"ms_{k}": [round(t, 4) for t in v] for k, v in times.items()},
                   ratio=round(statistics.median(times["after"]) / statistics.median(times["before"]), 4))
        rows.append(row)
        print(json.dumps(row), flush=True)
        for m in ms.values():
            m.close()
    if a.json:
        a.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
