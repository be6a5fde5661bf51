"""Forced cooperative-matrix tile plans on the gemm shapes that matter for issue 14 (square 4096 and
Swin-T's FULLY_CONNECTED layers at batch 32), gemm dispatch GPU time, each result checked against
numpy (1e-2 of max|ref|).  For tuning compiler/ops/gemm_coopmat.py FAMILIES.

    python -m benchmarks.archive.coopmat_sweep [--runs 10] [--json out.json] [--quick]

Plans are (WM, WN, TM, TN, BK, ST) as CoopPlan; a suffix "/v4" turns the 16-byte loads off (the
coopmat_vec8 compile option), "/s" the direct accumulator store (coopmat_direct); "auto" is the planner's own pick.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(HERE / "tests"))

import gpuc  # noqa: E402
from gpuc.compiler import compile_model  # noqa: E402
from gpuc.compiler.ops import gemm_coopmat as cm  # noqa: E402
from gpuc.runtime.profile import profile  # noqa: E402
from benchmarks.fc_bench import add_fc  # noqa: E402
from helpers.builder import ModelBuilder  # noqa: E402

BIG = ["4x2x4x4x16x2", "2x4x4x4x16x2", "4x2x4x4x32x1", "2x2x4x4x32x2", "4x4x2x4x16x2", "4x4x4x2x16x2",
       "4x2x2x4x32x2", "2x4x4x2x32x2", "4x4x2x2x32x2", "2x2x4x4x64x1"]
SQUARE = ["auto"] + BIG + ["4x2x4x4x16x2/v4", "4x2x4x4x32x1/v4", "4x2x4x4x16x2/s"]
LAYER = ["auto", "4x2x4x4x16x2", "2x4x4x4x16x2", "4x2x4x4x32x1", "2x2x4x4x32x2", "4x4x2x4x16x2", "4x4x4x2x16x2",
         "4x2x2x4x32x2", "4x2x2x2x32x2", "2x2x2x2x32x2", "4x2x4x4x16x2/v4", "4x2x2x4x64x1", "4x2x2x4x16x2"]
# Swin-T's FULLY_CONNECTED (M, N, K) at batch 32 (qkv, proj, fc1, fc2 of each stage)
SWIN = [(100352, 288, 96), (100352, 96, 96), (100352, 384, 96), (100352, 96, 384), (25088, 576, 192),
        (25088, 768, 192), (25088, 192, 768), (6272, 1152, 384), (6272, 1536, 384), (6272, 384, 1536),
        (1568, 3072, 768), (1568, 768, 3072)]


def fc_model(M, N, K, bias, rng):
    mb = ModelBuilder()
    y, w, b = add_fc(mb, [M, K], [M, N], N, K, rng, bias_std=0.1 if bias else None)
    mb.output(y)
    xs = rng.uniform(-1, 1, (M, K)).astype(np.float32)
    ref = (2 * xs) @ w.T + (b if bias else 0)
    return mb.finish(), xs, ref


def measure(data: bytes, dev, xs, ref, runs: int):
    """(max error / max|ref|, the first gemm dispatch's profile row) of FC bundle `data` on `dev`: one
    checked run, about 200 ms of warm-up, then `runs` timed runs."""
    with gpuc.load(data, device=dev) as m:
        y = m.run([xs])[0]
        err = float(np.abs(y.reshape(ref.shape) - ref).max()) / float(np.abs(ref).max())
        ms = profile(m, [xs], runs=3)["run_gpu_ms"]
        profile(m, [xs], runs=max(3, min(100, int(200 / max(ms, 1e-3)))))
        rows = profile(m, [xs], runs=runs)["rows"]
    return err, next(r for r in rows if r["shader"].startswith("gemm"))


SWITCHES: dict = {}        # CompileOptions fields of the spec being timed


def force(spec: str):
    orig = cm.plan_coopmat
    SWITCHES.update(coopmat_vec8="/v4" not in spec, coopmat_direct="/s" not in spec)
    if not spec.startswith("auto"):
        p = cm.CoopPlan(*map(int, spec.split("/")[0].split("x")))
        cm.plan_coopmat = lambda *a, **k: p
    return orig


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--json")
    ap.add_argument("--quick", action="store_true", help="square 4096 and 4 Swin shapes")
    a = ap.parse_args()
    dev = gpuc.open_device(None)
    print(f"device: {dev.describe()['name']}  {time.strftime('%Y-%m-%d %H:%M')}", flush=True)
    rng = np.random.default_rng(0)
    shapes = [(4096, 4096, 4096, False, SQUARE)] + [(M, N, K, True, LAYER) for M, N, K in
                                                     (SWIN[2:4] + SWIN[6:7] + SWIN[-1:] if a.quick else SWIN)]
    out, bad = [], 0
    for M, N, K, bias, specs in shapes:
        model, xs, ref = fc_model(M, N, K, bias, rng)
        line = []
        for spec in specs:
            orig = force(spec)
            try:
                data = compile_model(model, cache=False, precision="fp16", **SWITCHES)
            finally:
                cm.plan_coopmat = orig
                SWITCHES.clear()
            err, g = measure(data, dev, xs, ref, a.runs)
            tf = 2 * M * N * K / g["us"] / 1e6
            flag = "" if err <= 1e-2 else f" ERR {err:.1e}"
            bad += bool(flag)
            line.append(f"{spec}{'(' + g['shader'] + ')' if g['shader'] != 'gemm+coopmat' else ''}: {tf:.1f}{flag}")
            out.append(dict(M=M, N=N, K=K, bias=bias, plan=spec, us=g["us"], tflops=tf, err=err, shader=g["shader"]))
        print(f"{M}x{N}x{K}{' +bias' if bias else ''} TFLOP/s: " + ", ".join(line), flush=True)
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=1))
    print("PASS" if not bad else f"FAIL: {bad} results out of tolerance")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
