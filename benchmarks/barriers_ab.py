"""A/B of the barrier plan (runtime/commands.py): each model loaded twice in one process, with every
barrier (GPUC_ALL_BARRIERS=1) and with only the ones that matter, timed in interleaved rounds.

    python benchmarks/barriers_ab.py MODEL.tflite ... [--runs 200] [--rounds 3] [--json OUT]
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


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("models", nargs="+", type=Path)
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()
    rows = []
    for path in a.models:
        bundle = gpuc.compile(path)
        ms = {flag: load(bundle, flag) for flag in (True, False)}
        xs = [np.random.default_rng(0).uniform(-1, 1, s.shape).astype(s.dtype) for s in ms[True].inputs]
        outs = [ms[flag].run(xs) for flag in (True, False)]
        same = all(np.array_equal(p, q, equal_nan=True) for p, q in zip(*outs))
        n = len(ms[True].bundle.dispatches)
        barriers = {flag: sum(ms[flag].recorder.barriers_before(0, n)) for flag in ms}
        times = {True: [], False: []}
        for _ in range(a.rounds):
            for flag in (True, False):
                times[flag].append(median_ms(ms[flag], xs, a.runs))
        row = dict(model=path.stem, dispatches=n, barriers_all=barriers[True], barriers=barriers[False],
                   ms_all=[round(t, 4) for t in times[True]], ms=[round(t, 4) for t in times[False]],
                   ratio=round(statistics.median(times[False]) / statistics.median(times[True]), 4), same_outputs=same)
        rows.append(row)
        print(json.dumps(row), flush=True)
        for m in ms.values():
            m.close()
    if a.json:
        a.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
