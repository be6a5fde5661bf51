"""What kernel choice by measurement (runtime/tuning.py) gains: each model compiled once, then run with
the cost model's kernels (GPUC_TUNE=off) and with the measured choice (a first load that measures, and
a second that reads the cached choice), in one process on one device.

    python -m benchmarks.tuning_gain MODEL.tflite ... [--precision fp16] [--batch 32] [--runs 30] [--json OUT]

Per model: GPU ms of a run (median of `runs` after a second of warm-up, timestamps) with each choice
(the cost model's timed first and last, the speed-up taken against the faster of the two), the dispatches that had
candidates and how many changed, the first load's measuring time and the cached load's time.
Outputs of the two choices are compared (they differ only by floating-point summation order).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

import numpy as np

import gpuc
from benchmarks.timing import once
from gpuc.runtime import settings


def gpu_ms(model, inputs, runs: int, warmup_s: float = 1.0) -> float:
    """Median GPU ms of `runs` runs after `warmup_s` seconds of runs (the GPU's clocks ramp up)."""
    end = time.perf_counter() + warmup_s
    model.run(inputs)
    while time.perf_counter() < end:
        model.run(inputs)
    times = []
    for _ in range(runs):
        model.run(inputs)
        times.append(model.last_gpu_ms)
    return statistics.median(times)


def one(path: str, precision: str, batch: int, runs: int) -> dict:
    opts = {"precision": precision}
    if batch > 1:
        opts["max_batch"] = batch
    data = gpuc.compile(path, **opts)
    row = {"model": os.path.basename(path), "precision": precision, "batch": batch}
    outs = {}
    for label, tune in (("cost_model", "off"), ("measured", "on"), ("cached", "on"), ("cost_model_again", "off")):
        with settings.override(tune=tune):
            m, load_s = once(gpuc.load, data)
        with m:
            if label == "cost_model":
                rng = np.random.default_rng(0)
                inputs = [(rng.standard_normal([batch, *s.shape[1:]] if batch > 1 else s.shape) * 0.5)
                          .astype(s.dtype) for s in m.inputs]
            row[f"{label}_load_ms"] = round(load_s * 1e3, 1)
            row[f"{label}_gpu_ms"] = round(gpu_ms(m, inputs, runs), 4)
            if "tuning" in m.load_info:
                row[f"{label}_tuning"] = m.load_info["tuning"]
            outs[label] = m.run(inputs)
    row["speedup"] = round(min(row["cost_model_gpu_ms"], row["cost_model_again_gpu_ms"]) / row["cached_gpu_ms"], 3)
    ref = outs["cost_model"]
    row["max_rel_diff"] = max(float(np.abs(a.astype(np.float32) - r.astype(np.float32)).max())
                              / max(float(np.abs(r.astype(np.float32)).max()), 1e-30)
                              for a, r in zip(outs["cached"], ref))
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("models", nargs="+")
    ap.add_argument("--precision", default="fp16")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--json")
    a = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as cache, settings.override(cache_dir=cache):   # a cold tuning cache
        for path in a.models:
            r = one(path, a.precision, a.batch, a.runs)
            rows.append(r)
            t = r.get("measured_tuning", {})
            print(f"{r['model']:40s} {a.precision} b{a.batch}: cost model {r['cost_model_gpu_ms']:.3f} / "
                  f"{r['cost_model_again_gpu_ms']:.3f} ms, measured "
                  f"{r['cached_gpu_ms']:.3f} ms ({r['speedup']:.3f}x); {t.get('changed', 0)}/{t.get('dispatches', 0)} "
                  f"dispatches changed; measuring {t.get('ms', 0):.0f} ms, cached load {r['cached_load_ms']:.0f} ms "
                  f"(untuned {r['cost_model_load_ms']:.0f}); max rel diff {r['max_rel_diff']:.2e}", flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
