"""Workgroup-scope cooperative-matrix (gemm_cm2, VK_NV_cooperative_matrix2) tile plans against the
subgroup-scope `coopmat` kernel, on square 4096 and transformer-like FULLY_CONNECTED shapes: gemm
dispatch GPU time, each result checked against numpy (1e-2 of max|ref|).  For tuning
compiler/ops/gemm_cm2.py PLAN.

    python -m benchmarks.archive.coopmat2_sweep [--runs 10] [--json out.json] [--plans 128x128x32x256,...]

A plan is BMxBNxBKxINVOCATIONS, "/na": without the alignment operands; "auto": the compiler's own choice;
"coopmat" is the subgroup-scope kernel (GPUC_VARIANTS=coopmat2=off).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(HERE / "benchmarks"))

import gpuc  # noqa: E402
from gpuc.compiler import compile_model  # noqa: E402
from gpuc.compiler.ops import gemm_cm2  # noqa: E402
from gpuc.runtime.capabilities import missing  # noqa: E402
from benchmarks.archive.coopmat_sweep import fc_model, measure  # noqa: E402

PLANS = ["coopmat", "128x128x32x256", "128x128x64x256", "128x256x32x256", "256x128x32x256", "256x256x32x256",
         "128x256x64x256", "256x128x64x256", "128x128x32x128", "128x128x16x256", "64x128x32x128", "256x256x64x256"]
SHAPES = [(4096, 4096, 4096, False), (100352, 384, 96, True), (25088, 192, 768, True), (6272, 1536, 384, True),
          (1568, 768, 3072, True), (1000, 200, 1000, True), (12545, 301, 77, True)]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--json")
    ap.add_argument("--plans", default=",".join(PLANS))
    ap.add_argument("--square-only", action="store_true")
    ap.add_argument("--shapes", help="MxNxK[+b],... instead of the default list")
    a = ap.parse_args()
    dev = gpuc.open_device(None)
    info = dev.describe()
    print(f"device: {info['name']}  {time.strftime('%Y-%m-%d %H:%M')}  coopmat2 entries (M, N, K granularity, "
          f"invocations): {info.get('cooperative_matrix2')} max dim {getattr(dev, 'coopmat2_max_dim', 0)}", flush=True)
    rng = np.random.default_rng(0)
    out, bad = [], 0
    shapes = SHAPES[:1] if a.square_only else SHAPES
    if a.shapes:
        shapes = [tuple(map(int, s.rstrip("+b").split("x"))) + (s.endswith("+b"),) for s in a.shapes.split(",")]
    for M, N, K, bias in shapes:
        model, xs, ref = fc_model(M, N, K, bias, rng)
        line = []
        for spec in a.plans.split(","):
            plan = None if spec in ("coopmat", "auto") else gemm_cm2.Cm2Plan(*map(int, spec.split("/")[0].split("x")))
            gemm_cm2.ALIGN = "/na" not in spec
            if plan is not None:
                why = missing({"cooperative_matrix2": [plan.BM, plan.BN, plan.BK, plan.invocations]}, dev)
                if why:
                    line.append(f"{spec}: ({why})")
                    continue
            os.environ["GPUC_VARIANTS"] = {"coopmat": "coopmat2=off", "auto": "auto"}.get(spec, "coopmat2=force")
            try:
                err, g = measure(compile_model(model, cache=False, precision="fp16", cm2_plan=plan), dev, xs, ref, a.runs)
            except Exception as e:     # a plan the driver rejects: report it, go on
                line.append(f"{spec}: FAILED {type(e).__name__}: {str(e)[:200]}")
                bad += 1
                continue
            finally:
                os.environ.pop("GPUC_VARIANTS", None)
            tf = 2 * M * N * K / g["us"] / 1e6
            flag = "" if err <= 1e-2 else f" ERR {err:.1e}"
            bad += bool(flag)
            line.append(f"{spec}({g['shader']}): {tf:.1f}{flag}")
            out.append(dict(M=M, N=N, K=K, bias=bias, plan=spec, us=g["us"], tflops=tf, err=err, shader=g["shader"]))
        print(f"{M}x{N}x{K}{' +bias' if bias else ''} TFLOP/s: " + ", ".join(line), flush=True)
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=1))
    print("PASS" if not bad else f"FAIL: {bad} results out of tolerance or failed")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
