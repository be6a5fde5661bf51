"""fp16 vs fp32 at batch 1 (issue 14: "fp16 is never slower than fp32"): one model, three bundles in
one process (fp32; fp16; fp16 with plain gemms storing float16 too, GPUC_FP16_PLAIN_GEMMS=1, the
storage before ops/gemm_coopmat.py storage_wishes), timed in interleaved blocks so clock drift hits
each alike: run() median (numpy in and out) and the median GPU time of the same runs.

    python -m benchmarks.archive.fp16_b1_ab MODEL.tflite [--runs 300] [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import numpy as np

import gpuc
from gpuc.compiler import compile_model

VARIANTS = [("fp32", "fp32", ""), ("fp16", "fp16", ""), ("fp16-plain16", "fp16", "1")]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--runs", type=int, default=300)
    ap.add_argument("--json")
    a = ap.parse_args()
    data = open(a.model, "rb").read()
    models = {}
    for tag, prec, env in VARIANTS:
        os.environ["GPUC_FP16_PLAIN_GEMMS"] = env
        models[tag] = gpuc.load(compile_model(data, cache=False, precision=prec))
    os.environ["GPUC_FP16_PLAIN_GEMMS"] = ""
    rng = np.random.default_rng(0)
    m0 = models["fp32"]
    xs = [rng.standard_normal(list(s.shape)).astype(s.dtype) for s in m0.inputs]
    ref = m0.run(xs)[0]
    wall = {t: [] for t in models}
    gpu = {t: [] for t in models}
    err = {}
    for tag, m in models.items():
        out = m.run(xs)[0]
        err[tag] = float(np.abs(out - ref).max() / max(float(np.abs(ref).max()), 1e-30))
        for _ in range(50):
            m.run(xs)
    block = 25
    for _ in range(max(1, a.runs // block)):
        for tag, m in models.items():
            for _ in range(block):
                t0 = time.perf_counter()
                m.run(xs)
                wall[tag].append((time.perf_counter() - t0) * 1e3)
                gpu[tag].append(m.last_gpu_ms or 0.0)
    res = {t: dict(run_ms=statistics.median(wall[t]), gpu_ms=statistics.median(gpu[t]), err_vs_fp32=err[t])
           for t in models}
    name = os.path.basename(a.model)
    print(f"{name}: " + "  ".join(f"{t} run {r['run_ms']:.3f} gpu {r['gpu_ms']:.3f} (err {r['err_vs_fp32']:.1e})"
                                  for t, r in res.items()), flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(dict(model=name, device=m0.device.name, date=time.strftime("%Y-%m-%d %H:%M"), rows=res), f)
    for m in models.values():
        m.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
