"""What the bundle checks and robust mode cost: run() time and load time of one model, for this tree
(default and --robust) against another gpuc tree (a baseline checkout), in alternating processes.

    python -m benchmarks.trust_cost MODEL.tflite [--baseline DIR] [--rounds 3] [--runs 2000] [--json OUT]

DIR is a checkout of an earlier gpuc whose package imports as `gpuc` with DIR on PYTHONPATH (its
compiler/runtime/shaders linked into DIR/gpuc, as benchmarks/device_setup.sh does for this tree).
Each process compiles the model with its own compiler, loads it, warms up, and times `runs` calls of
run(); it reports the median wall time, the median GPU time (timestamps) and the bundle-read step of
the load (the device-free checks).  Rounds alternate the variants so drift hits them alike.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def child(model: str, robust: bool, runs: int, no_cache: bool, warmup: int = 200) -> dict:
    import numpy as np
    import gpuc
    if no_cache:
        os.environ["GPUC_NO_VALIDATION_CACHE"] = "1"
    data = gpuc.compile(model)
    t0 = time.perf_counter()
    m = gpuc.load(data, robust=True) if robust else gpuc.load(data)
    load_ms = (time.perf_counter() - t0) * 1e3
    xs = [np.random.default_rng(0).uniform(-1, 1, s.shape).astype(s.dtype) for s in m.inputs]
    for _ in range(warmup):
        m.run(xs)
    wall, gpu = [], []
    for _ in range(runs):
        t = time.perf_counter()
        m.run(xs)
        wall.append((time.perf_counter() - t) * 1e3)
        if m.last_gpu_ms is not None:
            gpu.append(m.last_gpu_ms)
    steps, name = m.load_info.get("steps_ms", {}), m.device.name
    m.close()
    return {"run_ms": statistics.median(wall), "gpu_ms": statistics.median(gpu) if gpu else None,
            "load_ms": load_ms, "bundle_read_ms": steps.get("bundle"), "device": name}


def spawn(tree: Path, model: str, robust: bool, runs: int, no_cache: bool = False, warmup: int = 200) -> dict:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tree)] + [p for p in os.environ.get("PYTHONPATH", "")
                                                                          .split(os.pathsep) if p and p != str(ROOT)]))
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", str(Path(model).resolve()), "--runs", str(runs),
           "--warmup", str(warmup)] + \
        (["--robust"] if robust else []) + (["--no-validation-cache"] if no_cache else [])
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=str(tree))
    if p.returncode:
        raise SystemExit(f"{tree} {'robust' if robust else ''}: {p.stderr[-2000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--baseline", default=None)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--runs", type=int, default=2000)
    ap.add_argument("--warmup", type=int, default=200)
    ap.add_argument("--json", default=None)
    ap.add_argument("--child", action="store_true")
    ap.add_argument("--robust", action="store_true")
    ap.add_argument("--no-validation-cache", action="store_true")
    a = ap.parse_args()
    if a.child:
        print(json.dumps(child(a.model, a.robust, a.runs, a.no_validation_cache, a.warmup)))
        return 0
    variants = [("this tree", ROOT, False), ("this tree --robust", ROOT, True)]
    if a.baseline:
        variants.insert(0, ("baseline", Path(a.baseline).resolve(), False))
    got = {name: [] for name, _, _ in variants}
    for r in range(a.rounds):
        for name, tree, robust in variants:
            got[name].append(spawn(tree, a.model, robust, a.runs, warmup=a.warmup))
            print(f"round {r}: {name}: {got[name][-1]}", file=sys.stderr, flush=True)
    cold = spawn(ROOT, a.model, False, 10, no_cache=True, warmup=2)
    out = {"model": a.model, "device": got[variants[-1][0]][0]["device"], "runs": a.runs, "rounds": a.rounds,
           "cold_validation_bundle_read_ms": cold["bundle_read_ms"]}
    for name, runs in got.items():
        out[name] = {k: statistics.median([x[k] for x in runs]) for k in ("run_ms", "gpu_ms", "load_ms", "bundle_read_ms")
                     if all(x[k] is not None for x in runs)}
    base = out.get("baseline", out["this tree"])
    for name in got:
        out[name]["run_vs_baseline"] = round(out[name]["run_ms"] / base["run_ms"], 4)
    print(json.dumps(out, indent=1))
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
