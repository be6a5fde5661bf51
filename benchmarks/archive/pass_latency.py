"""Latency of every shared model with the issue-4 passes on and off (for the GPU machine).

    python benchmarks/pass_latency.py [MODELS_DIR] [--runs 100] [--device N|NAME] [--precision fp32|fp16]
           [--off fuse_elementwise,fuse_reduce_prologue,fold_pad_pool,plan_in_place] [--json]

Per model and setting: dispatches, arena bytes, median / min run() ms (inputs in, outputs out), the
GPU time of a plain run (timestamps, as `gpuc profile`), and whether both settings give identical
outputs.
"""
import argparse
import json
import statistics
import time
from pathlib import Path

import numpy as np

import gpuc
from gpuc.runtime.bundle import read_bundle

MINE = "fuse_elementwise,fuse_reduce_prologue,fold_pad_pool,plan_in_place"


def measure(path, disabled, runs, device, precision):
    b = gpuc.compile(path, disable_passes=disabled, precision=precision, cache=False)
    stats = read_bundle(b).stats
    with gpuc.load(b, device=device) as m:
        xs = [np.random.default_rng(i).uniform(-1, 1, s.shape).astype(s.dtype) if np.dtype(s.dtype).kind == "f"
              else np.zeros(s.shape, s.dtype) for i, s in enumerate(m.inputs)]
        outs = [np.array(o) for o in m.run(xs)]
        ts = []
        for _ in range(runs):
            t0 = time.perf_counter()
            m.run(xs)
            ts.append((time.perf_counter() - t0) * 1e3)
        gpu = None
        if getattr(m, "timestamps", None) and not m.bundle.steps:
            from gpuc.runtime.profile import profile
            gpu = profile(m, xs, max(runs // 10, 3))["run_gpu_ms"]
    return dict(dispatches=stats["dispatches"], arena_bytes=stats["arena_bytes"], median_ms=statistics.median(ts),
                min_ms=min(ts), gpu_ms=gpu), outs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("models", nargs="?", default=str(Path(__file__).resolve().parents[2] / "shared" / "models"))
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--device")
    ap.add_argument("--precision", default="fp32")
    ap.add_argument("--off", default=MINE)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    rows = []
    for p in sorted(Path(a.models).glob("*.tflite")):
        on, o1 = measure(p, [], a.runs, a.device, a.precision)
        off, o2 = measure(p, [x for x in a.off.split(",") if x], a.runs, a.device, a.precision)
        same = all(np.array_equal(x, y, equal_nan=x.dtype.kind == "f") for x, y in zip(o1, o2))
        rows.append(dict(model=p.stem, on=on, off=off, identical=same))
        if not a.json:
            f = lambda r: (f"{r['dispatches']:>4} disp {r['arena_bytes']:>9} B  median {r['median_ms']:8.3f} ms  "
                           f"min {r['min_ms']:8.3f} ms  gpu {r['gpu_ms'] if r['gpu_ms'] is None else round(r['gpu_ms'], 3)}")
            print(f"{p.stem:30} on : {f(on)}\n{'':30} off: {f(off)}   identical={same}")
    if a.json:
        print(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
