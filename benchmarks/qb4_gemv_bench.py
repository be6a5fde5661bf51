"""The int4 blockwise FCs of one LLM decode step (litert-torch's dynamic_int4_block32 / _block128), each as
one gemm_qb dispatch (compiler/ops/gemm_qb.py) and as the plain-op rewrite (compiler/ops/blockwise_fc.py),
checked and timed.

    python -m benchmarks.qb4_gemv_bench [--config qwen2.5-1.5b|qwen2.5-0.5b|tiny] [--block 32] [--runs 20]

Each row is a one-op model FULLY_CONNECTED over int4 weights with bf16-exact float16 block scales (no bias),
one activation row.  The result is checked against a numpy model of XNNPACK's qd8-f32-qb4w arithmetic (the
row quantized to int8 as shaders/gemm_q8.comp does, exact block sums, float64 accumulation); the time is the
run's GPU time (runtime/profile.py run_gpu_ms: all the path's dispatches), GB/s counting the kernel's bytes
(int4 weights + float32 block scales and sums).  Exit 1 if a result is out of tolerance (1e-5 of max |ref|).
"""
from __future__ import annotations

import argparse
import sys

import numpy as np

import gpuc
from gpuc.compiler.frontend import blockwise
from gpuc.runtime.profile import profile
from tests.helpers.builder import ModelBuilder

CONFIGS = {               # name: (N, K) of the decode step's FCs
    "qwen2.5-1.5b": {"qkv": (2048, 1536), "o": (1536, 1536), "gate": (8960, 1536), "down": (1536, 8960)},
    "qwen2.5-0.5b": {"qkv": (1152, 896), "o": (896, 896), "gate": (4864, 896), "down": (896, 4864)},
    "tiny": {"qkv": (96, 128), "down": (64, 256)},
}


def build(n: int, k: int, block: int, rng) -> tuple[bytes, np.ndarray, np.ndarray]:
    """(model, int4 values [n, k], float16 block scales [n, k / block])."""
    q = rng.integers(-8, 8, (n, k)).astype(np.int8)
    nib = (q.reshape(-1) & 0xF).astype(np.uint8)
    sc = rng.uniform(0.01, 0.05, (n, k // block)).astype(np.float16)
    mb = ModelBuilder()
    x = mb.input("x", [1, k])
    s = mb.const("scales", sc)
    w = mb.tensor("w", [n, k], "int4", data=(nib[0::2] | (nib[1::2] << 4)).astype(np.uint8))
    mb.tensors[w]["quantization"] = {"details": ("BlockwiseQuantization",
                                                 {"scales": s, "zero_points": -1, "block_size": block})}
    y = mb.tensor("y", [1, n])
    mb.op("FULLY_CONNECTED", [x, w], [y], version=5)
    mb.output(y)
    return mb.finish(), q, sc


def reference(x: np.ndarray, q: np.ndarray, sc: np.ndarray, block: int) -> np.ndarray:
    """XNNPACK qd8-f32-qb4w: the row quantized to int8 (gemm_q8's formula), exact block sums, bf16 scales."""
    f = np.float32
    lo, hi = f(min(0.0, x.min())), f(max(0.0, x.max()))
    s = f(1) if lo == hi else f(255) / (hi - lo)
    a, b = lo * s, hi * s
    zp = np.rint(np.clip(-128 - a if (f(-128) + a) + (f(127) + b) > 0 else 127 - b, -128, 127))
    xq = np.clip(np.rint(x * s) + zp, -128, 127) - zp
    n, k = q.shape
    scb = blockwise.bf16_round(sc.astype(np.float32).reshape(-1, 1)).reshape(n, -1).astype(np.float64)
    sums = (q.astype(np.float64).reshape(n, -1, block) * xq.reshape(1, -1, block)).sum(2)
    return (sums * scb).sum(1) / s


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="qwen2.5-1.5b", choices=sorted(CONFIGS))
    ap.add_argument("--block", type=int, default=32, choices=(32, 128))
    ap.add_argument("--runs", type=int, default=20)
    a = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    bad = 0
    print(f"{'fc':5s} {'N':>6s} {'K':>6s} {'path':8s} {'dispatches':>10s} {'us':>8s} {'GB/s':>7s} {'err/max':>8s}")
    for name, (n, k) in CONFIGS[a.config].items():
        data, q, sc = build(n, k, a.block, rng)
        x = rng.normal(0, 1, (1, k)).astype(np.float32)
        ref = reference(x[0], q, sc, a.block)
        for kernel in (True, False):
            with gpuc.load(gpuc.compile(data, blockwise_kernel=kernel)) as m:
                got = np.array(m.run([x])[0]).reshape(-1)
                us = None
                if m.timestamps:       # back-to-back runs first: the GPU clocks up from idle
                    profile(m, [x], runs=max(3, a.runs))
                    us = profile(m, [x], runs=a.runs)["run_gpu_ms"] * 1e3
                nd = len(m.bundle.dispatches)
            err = float(np.abs(got - ref).max() / max(np.abs(ref).max(), 1e-30))
            bad += err > 1e-5
            gbs = f"{(n * k / 2 + 8 * n * k / a.block) / (us * 1e-6) / 1e9:7.0f}" if us else f"{'-':>7s}"
            print(f"{name:5s} {n:6d} {k:6d} {'gemm_qb' if kernel else 'rewrite':8s} {nd:10d} "
                  f"{us or float('nan'):8.1f} {gbs} {err:8.1e}", flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
