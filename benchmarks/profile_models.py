"""Profile models on the device at a given batch and precision: per-dispatch GPU time grouped by
op kind and shader, plus the top dispatches (gpuc.compile + runtime profile), as JSON and a text table.

    python -m benchmarks.profile_models MODEL.tflite ... --batch 32 --precision fp32,fp16 --json OUT.json
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import sys
import time

import numpy as np

import gpuc
from gpuc.runtime.profile import profile


def one(path: str, batch: int, precision: str, runs: int, **compile_opts) -> dict:
    opts = dict(compile_opts, precision=precision)
    if batch > 1:
        opts["max_batch"] = batch
    with gpuc.load(gpuc.compile(path, **opts)) as model:       # (closed: one process profiles many models)
        rng = np.random.default_rng(0)
        inputs = []
        for spec in model.inputs:
            shape = list(spec.shape)
            if batch > 1:
                shape[0] = batch
            inputs.append(rng.standard_normal(shape).astype(spec.dtype))
        t0 = time.time()
        while time.time() - t0 < 1.0:          # a GPU left idle while the host compiled clocks down
            model.run(inputs)
        p = profile(model, inputs, runs)
    groups = collections.defaultdict(lambda: [0.0, 0])
    for r in p["rows"]:
        key = f"{r['op'].split(' ')[0].split('#')[0]}|{r['shader']}"
        groups[key][0] += r["us"]
        groups[key][1] += 1
    p["groups"] = sorted(([k, round(v[0], 1), v[1]] for k, v in groups.items()), key=lambda g: -g[1])
    p["all_rows"], p["rows"] = p["rows"], p["rows"][:40]
    p.update(model=os.path.basename(path), batch=batch, precision=precision)
    return p


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("models", nargs="+")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--precision", default="fp32")
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--json")
    a = ap.parse_args()
    res = []
    for m in a.models:
        for prec in a.precision.split(","):
            p = one(m, a.batch, prec, a.runs)
            res.append(p)
            print(f"\n== {p['model']} b{a.batch} {prec}: run {p['run_gpu_ms']:.3f} ms GPU, {p['dispatches']} dispatches")
            for k, us, n in p["groups"][:14]:
                print(f"   {us:9.1f} us  x{n:<4d} {k}")
            for r in p["rows"][:12]:
                g = r.get("gflop_per_s")
                print(f"   {r['us']:8.1f} us {r['op'][:60]:60s} {r['shader']:28s} "
                      f"{(g or 0) / 1e3:6.1f} TF/s {r['shapes'][:3]}")
            sys.stdout.flush()
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
