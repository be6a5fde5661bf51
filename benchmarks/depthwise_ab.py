"""A/B of depthwise plans on whole models at their own batch: each model compiled (no cache) with the
planner's own choice and then with every depthwise layer forced to each plan given
(CompileOptions.dw_plan, compiler/ops/depthwise_plan.py), profiled on the device.  Prints the GPU time
of a run, the depthwise layers' per-dispatch times side by side, and each output against the first
program's (max |diff| / max |ref|, and whether the arg-max agrees).

    python -m benchmarks.depthwise_ab MODEL.tflite ... [--precision fp16] [--plans t1:1x1,t1s:1x1] [--runs 20]

A plan is `t{TILE}{s: scalar}:{RY}x{PX}` (DwPlan's str), e.g. t0:1x2, t1:2x1, t1s:1x1.

--variants: instead, the planner's bundle loaded twice: with every kernel variant the load's tuning
chose (the batch-1 `dw_t*` plan candidates included), then with those off (GPUC_VARIANTS=NAME=off for
each: every depthwise layer runs the cost model's plan; the same tuning choice for the rest).
"""
from __future__ import annotations

import argparse
import os
import re
import sys

import numpy as np

import gpuc
from benchmarks.timing import warm_profile
from gpuc.compiler.ops.depthwise_plan import DwPlan
from gpuc.runtime.bundle import read_bundle


def parse_plan(s: str) -> DwPlan:
    m = re.fullmatch(r"t([01])(s?):(\d+)x(\d+)", s.strip())
    if not m:
        raise SystemExit(f"--plans: {s!r} is not t{{0|1}}[s]:RYxPX")
    return DwPlan(int(m[1]), int(m[3]), int(m[4]), bool(m[2]))


def measure(path: str, precision: str, plan, runs: int, data=None) -> dict:
    data = data or gpuc.compile(path, precision=precision, cache=False, dw_plan=plan)
    with gpuc.load(data) as model:
        outs, p = warm_profile(model, runs)
    layers = {r["op"]: r["us"] for r in p["rows"] if r["shader"].startswith("depthwise")}
    return dict(ms=p["run_gpu_ms"], layers=layers, outs=outs)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="+")
    ap.add_argument("--precision", default="fp16")
    ap.add_argument("--plans", default="t1:1x1,t1s:1x1")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--variants", action="store_true")
    a = ap.parse_args()
    plans = ["on", "off"] if a.variants else [None] + [parse_plan(s) for s in a.plans.split(",") if s.strip()]
    for path in a.models:
        res: dict = {}
        name = os.path.basename(path)
        data = gpuc.compile(path, precision=a.precision) if a.variants else None
        for plan in plans:
            key = str(plan or "planner")
            if a.variants:
                names = sorted({v.name for v in read_bundle(data).variants if v.name.startswith("dw_t")})
                os.environ["GPUC_VARIANTS"] = ",".join(f"{v}=off" for v in names) if plan == "off" else ""
                res[key] = r = measure(path, a.precision, None, a.runs, data)
            else:
                res[key] = r = measure(path, a.precision, plan, a.runs)
            ref = res[next(iter(res))]
            err = max(float(np.abs(o - q).max() / max(np.abs(q).max(), 1e-30)) for o, q in zip(r["outs"], ref["outs"]))
            top1 = all(int(o.argmax()) == int(q.argmax()) for o, q in zip(r["outs"], ref["outs"]))
            print(f"{name} {a.precision} {key}: {r['ms']:.3f} ms GPU, depthwise sum {sum(r['layers'].values()):.1f} us, "
                  f"rel err vs first {err:.2e}, top-1 {'same' if top1 else 'DIFFERS'}")
            sys.stdout.flush()
        print("  depthwise layers (us): " + " | ".join(res))
        for op in ref["layers"]:
            print("    " + " ".join(f"{r['layers'].get(op, float('nan')):7.1f}" for r in res.values()) + f"  {op}")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
