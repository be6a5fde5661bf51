"""Split-K of batch-1 implicit-GEMM convolutions: whole-run GPU time with the convolutions' modelled-cost
factor (compiler/ops/gemm_split.py IM2COL_FACTOR / IM2COL_FACTOR_FP32) at each value given, per precision.
Each model is compiled once per factor and the loaded programs are timed in turns (three rounds of
benchmarks.timing.warm_profile), so clock drift hits every factor alike.

    python -m benchmarks.archive.split_factor_ab MODEL.tflite ... [--factors 1.5,2.0] [--precisions fp16,fp32]
"""
from __future__ import annotations

import argparse
import collections
import os

import gpuc
from gpuc.compiler.ops import gemm_split
from benchmarks.timing import warm_profile


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("models", nargs="+")
    ap.add_argument("--factors", default="1.5,2.0")
    ap.add_argument("--precisions", default="fp16,fp32")
    ap.add_argument("--runs", type=int, default=20)
    a = ap.parse_args()
    factors = [float(f) for f in a.factors.split(",")]
    for path in a.models:
        for prec in a.precisions.split(","):
            loaded = {}
            for fac in factors:
                gemm_split.IM2COL_FACTOR = gemm_split.IM2COL_FACTOR_FP32 = fac
                loaded[fac] = gpuc.load(gpuc.compile(path, precision=prec, cache=False))
            ms, last = collections.defaultdict(list), {}
            for _ in range(3):
                for fac, m in loaded.items():
                    _, p = warm_profile(m, a.runs)
                    ms[fac].append(round(p["run_gpu_ms"], 3))
                    last[fac] = p
            for fac, m in loaded.items():
                m.close()
                conv = sum(r["us"] for r in last[fac]["rows"] if r["op"].startswith("CONV_2D"))
                print(f"{os.path.basename(path)} {prec} factor {fac}: GPU ms {ms[fac]}, {last[fac]['dispatches']} "
                      f"dispatches, CONV_2D rows {conv:.1f} us", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
