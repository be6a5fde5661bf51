"""A/B/C of barriers and dispatch order, each model loaded three times in one process and timed in
interleaved rounds: `all`, program order with a barrier between every two dispatches (as before
issue 15); `needed`, program order with only the barriers that matter (runtime/commands.py);
`scheduled`, independent dispatches side by side (compiler/schedule.py) with only those barriers.

    python -m benchmarks.archive.barriers_ab MODEL.tflite ... [--runs 200] [--rounds 3] [--json OUT]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

import numpy as np

import gpuc


def load(bundle, all_barriers: bool):
    os.environ["GPUC_ALL_BARRIERS"] = "1" if all_barriers else "0"
    try:
        return gpuc.load(bundle)
    finally:
        os.environ.pop("GPUC_ALL_BARRIERS")


def median_ms(m, xs, runs: int) -> float:
    for _ in range(max(3, runs // 10)):
        m.run(xs)
    t = []
    for _ in range(runs):
        t0 = time.perf_counter()
        m.run(xs)
        t.append(time.perf_counter() - t0)
    return statistics.median(t) * 1e3


def args(doc: str):
    ap = argparse.ArgumentParser(description=doc.split("\n")[0])
    ap.add_argument("models", nargs="+", type=Path)
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", type=Path)
    return ap.parse_args()


def compare_loads(a, configs, base: str) -> None:
    """For each model path: `configs(path)` -> {name: loaded model}; times them in interleaved rounds
    and prints (and with --json writes) a row per model: dispatches, barriers and median ms per config,
    each config's ratio to `base`, and the largest relative difference of its outputs from base's."""
    rows = []
    for path in a.models:
        ms = configs(path)
        xs = [np.random.default_rng(0).uniform(-1, 1, s.shape).astype(s.dtype) for s in ms[base].inputs]
        outs = {k: m.run(xs) for k, m in ms.items()}
        times = {k: [] for k in ms}
        for _ in range(a.rounds):
            for k, m in ms.items():
                times[k].append(median_ms(m, xs, a.runs))
        others = [k for k in ms if k != base]
        row = dict(model=path.stem,
                   **{f"dispatches_{k}": len(m.bundle.dispatches) for k, m in ms.items()},
                   **{f"barriers_{k}": sum(m.recorder.barriers_before(0, len(m.bundle.dispatches))) for k, m in ms.items()},
                   **{f"ms_{k}": [round(t, 4) for t in v] for k, v in times.items()},
                   **{f"ratio_{k}": round(statistics.median(times[k]) / statistics.median(times[base]), 4) for k in others},
                   **{f"rel_diff_{k}": max(float(np.abs(p - q).max() / max(np.abs(p).max(), 1e-30))
                                          for p, q in zip(outs[base], outs[k])) for k in others})
        rows.append(row)
        print(json.dumps(row), flush=True)
        for m in ms.values():
            m.close()
    if a.json:
        a.json.write_text(json.dumps(rows, indent=1))


def main():
    def configs(path):
        program_order = gpuc.compile(path, disable_passes=["schedule_dispatches"])
        return {"all": load(program_order, True), "needed": load(program_order, False),
                "scheduled": load(gpuc.compile(path), False)}
    compare_loads(args(__doc__), configs, "all")


if __name__ == "__main__":
    main()
