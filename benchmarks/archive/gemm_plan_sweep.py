"""Time forced fp32 gemm tile plans for FULLY_CONNECTED shapes (for tuning compiler/ops/gemm_plan.py's
gemm_cost / plan_gemm): per shape, the plan the planner picks ("auto"), its best-ranked plans and a
seeded random sample of the other valid plans, each as the gemm dispatch's GPU time (timestamps).

    python -m benchmarks.archive.gemm_plan_sweep [--shapes M,N,K;M,N,K...] [--top 10] [--sample 40] [--json out.json]

Default shapes: the MLP / projection GEMMs of a batch-1 ConvNeXt-T / Swin-T (M = 3136, 784, 196, 49
rows) - the small-M FULLY_CONNECTED layers issue 15 is about.  Each result is checked against numpy.
"""
from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(HERE / "tests"))

import gpuc  # noqa: E402
from gpuc.compiler import compile_model  # noqa: E402
from gpuc.compiler.ops import gemm_dispatch, gemm_plan  # noqa: E402
from gpuc.runtime.profile import profile  # noqa: E402
from benchmarks.fc_bench import add_fc  # noqa: E402
from helpers.builder import ModelBuilder  # noqa: E402

SHAPES = [(3136, 384, 96), (3136, 96, 384), (784, 768, 192), (784, 192, 768), (196, 1536, 384),
          (196, 384, 1536), (49, 3072, 768), (49, 768, 3072), (49, 2304, 768), (3136, 288, 96),
          (784, 576, 192), (196, 1152, 384)]


def fc_model(M, N, K, rng):
    mb = ModelBuilder()
    y, w, b = add_fc(mb, [1, M, K], [1, M, N], N, K, rng, bias_std=1.0)
    mb.output(y)
    return mb.finish(), rng.uniform(-1, 1, (1, M, K)).astype(np.float32), w, b


def candidates(M, N, K):
    out = []
    for BN in (16, 32, 64, 128):
        for TN in (2, 4, 8):
            for BM in (8, 16, 32, 64, 128):
                for TM in (1, 2, 4, 8):
                    if BN % TN or BM % TM or BM > max(M, 8) * 2:
                        continue
                    base = (BM // TM) * (BN // TN)
                    for BK in (8, 16):
                        for KS in (1, 2, 4, 8, 16):
                            if base * KS not in (64, 128, 256) or (KS > 1 and (KS - 1) * BK >= K):
                                continue
                            for v4 in ((False, True) if KS == 1 and TM % 4 == 0 and TN % 4 == 0 else (False,)):
                                p = gemm_plan.GemmPlan(BM, BN, BK, TM, TN, KS, v4)
                                c = gemm_plan.gemm_cost(p, M, N, K, 1, True, True, False)
                                if math.isfinite(c):
                                    out.append((c, p))
    return sorted(out, key=lambda t: t[0])


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default=None)
    ap.add_argument("--top", type=int, default=10)
    ap.add_argument("--sample", type=int, default=40)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--json", default=None)
    ap.add_argument("--v4", action="store_true", help="time every SV4 plan of 128+ invocations too")
    args = ap.parse_args()
    shapes = SHAPES if not args.shapes else [tuple(map(int, s.split(","))) for s in args.shapes.split(";")]
    rng = np.random.default_rng(0)
    dev = None
    orig = gemm_dispatch.plan_gemm
    results = []
    for M, N, K in shapes:
        model, xs, w, b = fc_model(M, N, K, rng)
        ref = (2 * xs).reshape(M, K) @ w.T + b
        cands = candidates(M, N, K)
        auto = orig(M, N, K, 1, True, True, False)
        pick = [auto] + [p for _, p in cands[:args.top]]
        rest = [p for _, p in cands[args.top:]]
        random.Random(M * 7 + N * 3 + K).shuffle(rest)
        pick += rest[:args.sample]
        if args.v4:                                  # every SV4 plan with 128 or 256 invocations
            pick += [p for _, p in cands if p.V4 and p.threads >= 128]
        seen, plans = set(), []
        for p in pick:
            if p not in seen:
                seen.add(p)
                plans.append(p)
        t0 = time.time()
        # compile and load every plan first, then time them back to back (a GPU left idle while the
        # host compiles clocks down: per-plan compile-then-time runs read 3-5x slow)
        loaded = {}
        for p in plans:
            gemm_dispatch.plan_gemm = lambda *a, p=p, **k: p
            try:
                m = gpuc.load(compile_model(model, cache=False, precision="fp32"), device=dev)
                out = m.run([xs])[0].reshape(M, N)
                loaded[p] = (m, float(np.abs(out - ref).max() / np.abs(ref).max()))
            except Exception as e:  # noqa: BLE001 - report and go on
                loaded[p] = (None, str(e)[:80])
            finally:
                gemm_dispatch.plan_gemm = orig
        warm = [m for m, _ in loaded.values() if m is not None][0]
        t1 = time.time()
        while time.time() - t1 < 0.3:
            warm.run([xs])
        best = {}
        for _ in range(2):
            for p in plans:
                m = loaded[p][0]
                if m is None:
                    continue
                profile(m, [xs], runs=3)
                r = profile(m, [xs], runs=args.runs)["rows"]
                us = [q["us"] for q in r if q["shader"].startswith("gemm")][0]
                best[p] = min(best.get(p, us), us)
        rows = []
        for p in plans:
            m, err = loaded[p]
            if m is not None:
                m.close()
            rows.append(dict(plan=[p.BM, p.BN, p.BK, p.TM, p.TN, p.KS] + (["v4"] if p.V4 else []), auto=p == auto,
                             cost=gemm_plan.gemm_cost(p, M, N, K, 1, True, True, False), us=best.get(p), err=err,
                             threads=p.threads, nwg=-(-M // p.BM) * -(-N // p.BN)))
        ok = sorted([r for r in rows if r["us"]], key=lambda r: r["us"])
        a = [r for r in rows if r["auto"]][0]
        print(f"{M}x{N}x{K}: auto {a['plan']} {a['us']:.1f} us; best " +
              ", ".join(f"{r['plan']} {r['us']:.1f}" for r in ok[:6]) + f"  ({time.time() - t0:.0f} s)", flush=True)
        results.append(dict(M=M, N=N, K=K, rows=rows))
        if args.json:                                # after every shape: a cut-off run keeps what it measured
            Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
