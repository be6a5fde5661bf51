"""Models with every eligible fp16 gemm on the workgroup-scope kernel (gemm_cm2, one forced plan each) against
the subgroup-scope `coopmat` one: run GPU time, gemm GPU time, and per gemm shape the time of each
configuration (which plan wins where).  For tuning compiler/ops/gemm_cm2.py's shape rule.

    python -m benchmarks.archive.coopmat2_models_ab MODEL.tflite ... [--batch 32] [--plans coopmat,auto,64x64x32x64,...]

"coopmat": the subgroup-scope kernel only; "auto": the compiler's own choice; BMxBNxBKxINVOCATIONS: forced.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import sys

from benchmarks.profile_models import one  # noqa: E402

from gpuc.compiler.frontend.importer import load_tflite
from gpuc.compiler import options
from gpuc.compiler.ops import gemm_cm2
from gpuc.compiler.ops.gemm_coopmat import gemm_shape


def shapes_of(path: str, batch: int) -> dict:
    """node label -> (M, N, K) of its gemm at `batch` (the model's batch-1 rows times batch)."""
    g = load_tflite(path).main
    out = {}
    for n in g.nodes:
        s = gemm_shape(n, g)
        if s is not None:
            out[n.label()] = (s[0] * batch, s[1], s[2])
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("models", nargs="+")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--plans", default="coopmat,64x64x32x64,64x64x32x128,128x64x32x128,128x128x32x256,128x256x32x256")
    ap.add_argument("--json")
    a = ap.parse_args()
    out = []
    for m in a.models:
        per_shape = collections.defaultdict(dict)
        for spec in a.plans.split(","):
            plan = None if spec in ("coopmat", "auto") else gemm_cm2.Cm2Plan(*map(int, spec.split("x")))
            os.environ["GPUC_VARIANTS"] = "coopmat2=off" if spec == "coopmat" else "auto"
            try:
                with options.using(options.current().replace(cm2_plan=plan)):     # (one() compiles inside)
                    p = one(m, a.batch, "fp16", a.runs, cache=False)
            finally:
                os.environ.pop("GPUC_VARIANTS", None)
            gemm = [r for r in p["all_rows"] if r["shader"].startswith("gemm")]
            for r in gemm:
                per_shape[r["op"]][spec] = (r["us"], r["shader"])
            n_cm2 = sum(r["shader"].startswith("gemm_cm2") for r in gemm)
            print(f"{p['model']:32s} b{a.batch} fp16 {spec:16s}: run {p['run_gpu_ms']:.3f} ms GPU, gemms "
                  f"{sum(r['us'] for r in gemm) / 1e3:.3f} ms ({n_cm2} of {len(gemm)} on gemm_cm2)", flush=True)
            out.append(dict(model=p["model"], plan=spec, run_gpu_ms=p["run_gpu_ms"],
                            gemm_ms=sum(r["us"] for r in gemm) / 1e3, cm2=n_cm2))
        best = sum(min(us for us, _ in d.values()) for d in per_shape.values())
        print(f"  per-dispatch best of all plans: gemms {best / 1e3:.3f} ms")
        shapes, by_shape = shapes_of(m, a.batch), collections.defaultdict(lambda: collections.defaultdict(float))
        for op, d in per_shape.items():
            for spec, (us, _) in d.items():
                by_shape[shapes.get(op, op)][spec] += us
        print("  per gemm shape (M x N x K: summed us per plan):")
        for shape, d in sorted(by_shape.items(), key=lambda kv: -kv[1].get("coopmat", 0)):
            print(f"    {'x'.join(map(str, shape)) if isinstance(shape, tuple) else shape:24s} "
                  + " ".join(f"{s}={us:.0f}" for s, us in d.items()))
            out.append(dict(model=os.path.basename(m), shape=shape, us=dict(d)))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
