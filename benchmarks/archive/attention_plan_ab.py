"""A/B of the fused attention's tile plan (compiler/ops/attention.py plan_tiles: RQ query-row groups and
CK key groups per workgroup) on a model: compile with each forced (rq, ck), profile, print the GPU time
of the ATTENTION dispatches (and the whole run), and check the outputs against the default plan's.

    python -m benchmarks.archive.attention_plan_ab MODEL.tflite --batch 32 --plans auto,4x8,2x8,4x2
"""
from __future__ import annotations

import argparse
import time

import numpy as np

import gpuc
from gpuc.compiler.ops import attention as att
from gpuc.runtime.profile import profile


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--plans", default="auto,4x8,2x8,4x2")
    a = ap.parse_args()
    orig = att.plan_tiles
    ref = None
    for plan in a.plans.split(","):
        if plan != "auto":
            rq, ck = map(int, plan.split("x"))
            att.plan_tiles = lambda *args, rq=rq, ck=ck, **kw: orig(*args, rq=rq, ck=ck)
        try:
            opts = dict(cache=False)
            if a.batch > 1:
                opts["max_batch"] = a.batch
            m = gpuc.load(gpuc.compile(a.model, **opts))
        except Exception as e:  # noqa: BLE001 - a plan that does not fit: report and go on
            print(f"{plan}: {str(e)[:100]}")
            continue
        finally:
            att.plan_tiles = orig
        rng = np.random.default_rng(0)
        xs = [rng.standard_normal([a.batch] + list(s.shape[1:])).astype(s.dtype) for s in m.inputs]
        out = m.run(xs)[0]
        if ref is None:
            ref = out
        err = float(np.abs(out - ref).max() / max(np.abs(ref).max(), 1e-30))
        t0 = time.time()
        while time.time() - t0 < 1.0:
            m.run(xs)
        p = profile(m, xs, 10)
        us = sum(r["us"] for r in p["rows"] if r["shader"] == "attention")
        print(f"{plan:6s} attention {us:8.1f} us  run {p['run_gpu_ms']:.3f} ms GPU  rel err vs first {err:.1e}",
              flush=True)
        m.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
