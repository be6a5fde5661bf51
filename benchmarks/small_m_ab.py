"""A/B of the batch-1 (small M) gemm plans on the device: split-K of implicit-GEMM convolutions
(CompileOptions.split_k_conv) and the small-M cooperative-matrix candidates of --precision fp16
(CompileOptions.coopmat_small_m and coopmat_mid_candidates, chosen by measurement at load: GPUC_TUNE) and
LayerNorms folded into the FCs that read them (pass fold_layer_norm, compiler/ops/ln_fold.py), each model compiled
(no cache) with them off ("old") and on ("new") at fp32 and fp16.  Prints the GPU time of a run, the
gemm layers' per-dispatch time side by side, and each output against the old fp32 program's (max
|diff| / max |ref|, and whether the arg-max agrees), as text and optionally JSON.

    python -m benchmarks.small_m_ab MODEL.tflite ... [--precision fp32,fp16] [--runs 20] [--json OUT]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

import gpuc
from benchmarks.timing import warm_profile


def measure(path: str, precision: str, new: bool, runs: int) -> dict:
    t0 = time.time()
    old = {} if new else dict(split_k_conv=False, coopmat_small_m=False, coopmat_mid_candidates=0,
                              disable_passes=["fold_layer_norm"])
    data = gpuc.compile(path, precision=precision, cache=False, **old)
    compile_s = time.time() - t0
    with gpuc.load(data) as model:
        outs, p = warm_profile(model, runs)
    layers: dict[str, float] = {}
    for r in p["rows"]:
        if r["shader"].startswith("gemm"):
            layers[r["op"]] = layers.get(r["op"], 0.0) + r["us"]     # a split gemm: partials + reduce
    return dict(ms=p["run_gpu_ms"], dispatches=p["dispatches"], layers=layers, outs=outs, compile_s=compile_s)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="+")
    ap.add_argument("--precision", default="fp32,fp16")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--json")
    a = ap.parse_args()
    report = []
    for path in a.models:
        res = {}
        for prec in a.precision.split(","):
            for new in (False, True):
                res[prec, new] = measure(path, prec, new, a.runs)
        ref = res[a.precision.split(",")[0], False]["outs"]
        name = os.path.basename(path)
        for (prec, new), r in res.items():
            errs = [float(np.abs(o - q).max() / max(np.abs(q).max(), 1e-30)) for o, q in zip(r["outs"], ref)]
            top1 = all(int(o.argmax()) == int(q.argmax()) for o, q in zip(r["outs"], ref))
            r.update(rel_err=max(errs), top1_same=top1)
            print(f"{name} {prec} {'new' if new else 'old'}: {r['ms']:.3f} ms GPU, {r['dispatches']} dispatches, "
                  f"compile {r['compile_s']:.1f} s, rel err vs old {a.precision.split(',')[0]} {max(errs):.2e}, "
                  f"top-1 {'same' if top1 else 'DIFFERS'}")
        for prec in a.precision.split(","):
            old, new = res[prec, False]["layers"], res[prec, True]["layers"]
            print(f"  {prec} gemm layers (us, old -> new), slowest old first:")
            for op in sorted(old, key=lambda o: -old[o])[:24]:
                print(f"    {old[op]:7.1f} -> {new.get(op, float('nan')):7.1f}  {op}")
            print(f"    sum {sum(old.values()):.1f} -> {sum(new.values()):.1f} us")
        report.append({"model": name, "results": [dict({k: v for k, v in r.items() if k != "outs"},
                                                       precision=p, new=n) for (p, n), r in res.items()]})
        sys.stdout.flush()
    if a.json:
        with open(a.json, "w") as f:
            json.dump(report, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
