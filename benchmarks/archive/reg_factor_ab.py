"""A/B of the gemm planner's register model (compiler/ops/gemm_plan.py REG_FACTOR) on whole models, in
one process: each model is compiled with each factor and its GPU time taken with timestamps
(runtime/profile.py: run_gpu_ms; gemm_us: the sum of its gemm dispatches).

    python -m benchmarks.archive.reg_factor_ab MODEL.tflite[@BATCH] ... [--factors 1,2] [--runs 20]

@BATCH (default 1) compiles a --max-batch bundle and times it on BATCH random items.
"""
from __future__ import annotations

import argparse
import sys

import numpy as np

import gpuc
from gpuc.compiler import compile_model
from gpuc.runtime.profile import profile


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("models", nargs="+")
    ap.add_argument("--factors", default="1,2")
    ap.add_argument("--runs", type=int, default=20)
    a = ap.parse_args()
    rng = np.random.default_rng(0)
    for spec in a.models:
        path, _, b = spec.partition("@")
        batch = int(b or 1)
        line = []
        for f in [float(x) for x in a.factors.split(",")]:
            data = compile_model(path, cache=False, precision="fp32", max_batch=batch, reg_factor=f)
            with gpuc.load(data) as m:
                xs = [rng.uniform(-1, 1, [batch] + list(s.shape[1:])).astype(np.float32) for s in m.inputs]
                profile(m, xs, runs=5)
                r = profile(m, xs, runs=a.runs)
            gemm = sum(q["us"] for q in r["rows"] if q["shader"].startswith("gemm"))
            line.append(f"factor {f:g}: gpu {r['run_gpu_ms']:.3f} ms (gemm {gemm / 1e3:.3f} ms)")
        print(f"{path.rsplit('/', 1)[-1]} batch {batch}: " + "; ".join(line), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
