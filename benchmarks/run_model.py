"""Compile a model, run it, check it against its LiteRT reference, and time run() calls.

    python benchmarks/run_model.py MODEL.tflite [--ref-dir DIR] [--runs 20] [--device N|NAME] [--json]

Prints compile time, load time, first-run time, median/p90/min of `runs` run() calls in this
process, and max |out - ref| / max |ref| per output when reference .npy files are found.
"""
import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

import gpuc


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--ref-dir")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--device")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    model = Path(a.model)
    name = model.stem
    ref_dir = Path(a.ref_dir) if a.ref_dir else model.parent / "ref"
    t0 = time.perf_counter()
    bundle = gpuc.compile(model)
    t_compile = time.perf_counter() - t0
    t0 = time.perf_counter()
    m = gpuc.load(bundle, device=a.device)
    t_load = time.perf_counter() - t0
    inputs = []
    for i, spec in enumerate(m.inputs):
        p = ref_dir / f"{name}.in{i}.npy"
        inputs.append(np.load(p) if p.exists() else np.random.default_rng(i).uniform(-1, 1, spec.shape).astype(spec.dtype))
    t0 = time.perf_counter()
    outs = m.run(inputs)
    t_first = time.perf_counter() - t0
    times = []
    for _ in range(a.runs):
        t0 = time.perf_counter()
        m.run(inputs)
        times.append(time.perf_counter() - t0)
    errs = []
    for i, o in enumerate(outs):
        p = ref_dir / f"{name}.out{i}.npy"
        if p.exists():
            ref = np.load(p)
            errs.append(float(np.abs(o.astype(np.float64) - ref).max() / max(np.abs(ref).max(), 1e-30)))
    times.sort()
    row = {"model": name, "device": m.device.name, "compile_s": round(t_compile, 3), "load_ms": round(t_load * 1e3, 2),
           "first_run_ms": round(t_first * 1e3, 3), "median_ms": round(statistics.median(times) * 1e3, 3),
           "p90_ms": round(times[int(0.9 * (len(times) - 1))] * 1e3, 3), "min_ms": round(times[0] * 1e3, 3),
           "max_rel_err": errs, "dispatches": len(m.bundle.dispatches)}
    m.close()
    print(json.dumps(row) if a.json else "  ".join(f"{k}={v}" for k, v in row.items()))
    return 0 if all(e <= 1e-3 for e in errs) else 1


if __name__ == "__main__":
    sys.exit(main())
