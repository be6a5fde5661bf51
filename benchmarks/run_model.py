"""Compile a model, run it, check it against its LiteRT reference, and time run() calls.

    python -m benchmarks.run_model MODEL.tflite [--ref-dir DIR] [--runs 20] [--device N|NAME] [--json]

Prints compile time, load time, first-run time, median/p90/min of `runs` run() calls in this
process, and max |out - ref| / max |ref| per output when reference .npy files are found.
"""
import argparse
import json
import sys
from pathlib import Path

import numpy as np

import gpuc

from benchmarks.timing import once, timed


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
    bundle, t_compile = once(gpuc.compile, model)
    m, t_load = once(gpuc.load, bundle, device=a.device)
    inputs = []
    for i, spec in enumerate(m.inputs):
        p = ref_dir / f"{name}.in{i}.npy"
        inputs.append(np.load(p) if p.exists() else np.random.default_rng(i).uniform(-1, 1, spec.shape).astype(spec.dtype))
    outs, t_first = once(m.run, inputs)
    t = timed(lambda: m.run(inputs), a.runs, warmup_s=0)
    errs = []
    for i, o in enumerate(outs):
        p = ref_dir / f"{name}.out{i}.npy"
        if p.exists():
            ref = np.load(p)
            errs.append(float(np.abs(o.astype(np.float64) - ref).max() / max(np.abs(ref).max(), 1e-30)))
    row = {"model": name, "device": m.device.name, "compile_s": round(t_compile, 3), "load_ms": round(t_load * 1e3, 2),
           "first_run_ms": round(t_first * 1e3, 3), **{k: round(v, 3) for k, v in t.items()},
           "max_rel_err": errs, "dispatches": len(m.bundle.dispatches)}
    m.close()
    print(json.dumps(row) if a.json else "  ".join(f"{k}={v}" for k, v in row.items()))
    return 0 if all(e <= 1e-3 for e in errs) else 1


if __name__ == "__main__":
    sys.exit(main())
