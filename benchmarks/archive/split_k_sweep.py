"""Split-K across workgroups (compiler/ops/gemm_split.py) on batch-1 transformer FC shapes: GPU time of a
FULLY_CONNECTED layer (bias + residual epilogue, as in a block) with each forced split S, and the split the
model picks.  Each result is checked against numpy (1e-4 of max|ref|).

    python -m benchmarks.archive.split_k_sweep [--runs 50] [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import gpuc  # noqa: E402
from gpuc.runtime.profile import profile  # noqa: E402
from benchmarks.fc_bench import add_fc  # noqa: E402
from helpers.builder import ModelBuilder  # noqa: E402

# (M, N, K): ConvNeXt-T / Swin-T batch-1 FC layers (stages 2-4), ViT-ish 197 rows, and a classifier
SHAPES = [(784, 768, 192), (784, 192, 768), (196, 1536, 384), (196, 384, 1536), (49, 3072, 768),
          (49, 768, 3072), (197, 3072, 768), (197, 768, 3072), (1, 1000, 768)]


def model(M, N, K, rng):
    mb = ModelBuilder()
    y, w, b = add_fc(mb, [M, K], [M, N], N, K, rng)
    r = mb.input("r", [M, N])
    z = mb.tensor("z", [M, N])
    mb.op("ADD", [y, r], [z])
    mb.output(z)
    xs = [rng.uniform(-1, 1, (M, K)).astype(np.float32), rng.uniform(-1, 1, (M, N)).astype(np.float32)]
    ref = (2 * xs[0].astype(np.float64)) @ w.T.astype(np.float64) + b + xs[1]
    return mb.finish(), xs, ref


def time_one(data, xs, runs):
    with gpuc.load(data) as m:
        out = m.run(xs)[0]
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < 0.5:                    # the GPU clocks up (idle while compiling)
            m.run_in_place()
        p = profile(m, xs, runs=runs)
    gemm = [r for r in p["rows"] if r["shader"].startswith("gemm")]
    return out, sum(r["us"] for r in gemm), len(gemm)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--json")
    a = ap.parse_args()
    rng = np.random.default_rng(0)
    res, bad = [], 0
    for M, N, K in SHAPES:
        tflite, xs, ref = model(M, N, K, rng)
        row = dict(M=M, N=N, K=K, us={})
        for s in (None, 1, 2, 4, 8, 16):
            out, us, nd = time_one(gpuc.compile(tflite, cache=False, split_k=s), xs, a.runs)
            err = float(np.abs(out - ref).max() / np.abs(ref).max())
            bad += err > 1e-4
            key = "model" if s is None else str(s)
            if s is None or nd == (1 if s == 1 else 2):         # (a split that does not apply: not timed)
                row["us"][key] = round(us, 2)
            if s is None:
                row["model_dispatches"] = nd
        res.append(row)
        print(f"{M:5d} x {N:5d} x {K:5d}  model ({row['model_dispatches']} dispatches) {row['us']['model']:7.2f} us  "
              + "  ".join(f"S={k}: {v:7.2f}" for k, v in row["us"].items() if k != "model"))
        sys.stdout.flush()
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=1))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
