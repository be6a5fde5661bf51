"""The fused ATTENTION kernel (passes/attention.py, shaders/attention.comp) against the unfused chain
(BATCH_MATMUL, MUL, ADDs, SOFTMAX, BATCH_MATMUL: --disable-pass fuse_attention) on one-attention
builder models, one process: dispatches, median GPU time of a plain run (timestamps around the command
buffer), median run() wall time, the largest difference from a float64 reference (relative to max|ref|),
and PyTorch's scaled_dot_product_attention (fp32, CUDA events) where torch and CUDA are there.

    python -m benchmarks.archive.attention_bench [--runs 200] [--json OUT] [--models MODEL.tflite ...]

--models: whole models compiled with and without fuse_attention (dispatches, median GPU time, and the
largest difference between the two outputs relative to max|unfused|).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
import gpuc  # noqa: E402
from benchmarks.timing import cuda_us  # noqa: E402
from gpuc.runtime.bundle import read_bundle  # noqa: E402
from helpers.attention_models import attention_model, attention_ref  # noqa: E402

SHAPES = [  # name, windows/batch, heads, N, D, mask
    ("swin_w7 49x32 x3 heads x64 windows (rel-pos bias + shift mask)", 64, 3, 49, 32, "swin"),
    ("vit_b 197x64 x12 heads", 1, 12, 197, 64, None),
    ("speech 1500x64 x6 heads", 1, 6, 1500, 64, None),
    ("1024x128 x8 heads", 1, 8, 1024, 128, None),
    ("577x80 x12 heads", 1, 12, 577, 80, None),
]


def timed(m, xs, runs):
    for _ in range(max(5, runs // 10)):
        m.run(xs)
    gpu, wall = [], []
    for _ in range(runs):
        t0 = time.perf_counter()
        m.run(xs)
        wall.append(time.perf_counter() - t0)
        gpu.append(m.last_gpu_ms)
    return statistics.median(gpu) * 1e3 if gpu[0] is not None else None, statistics.median(wall) * 1e6


def torch_us(q, k, v, bias, scale, runs):
    try:
        import torch
        import torch.nn.functional as F
        if not torch.cuda.is_available():
            return None
        torch.backends.cuda.matmul.allow_tf32 = False
        tq, tk, tv = (torch.from_numpy(a).cuda() for a in (q, k, v))
        tb = torch.from_numpy(bias).cuda() if bias is not None else None
        f = lambda: F.scaled_dot_product_attention(tq, tk, tv, attn_mask=tb, scale=scale)  # noqa: E731
        return cuda_us(f, runs, warm=10)
    except Exception as e:          # noqa: BLE001  (a missing or broken torch: no row)
        print("torch:", e, file=sys.stderr)
        return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--models", nargs="*", type=Path, default=[])
    ap.add_argument("--skip-shapes", action="store_true")
    ap.add_argument("--fill-groups", nargs="*", type=int, default=[],
                    help="also time the fused kernel with these ops/attention.py FILL_GROUPS values")
    a = ap.parse_args()
    rows = [] if a.skip_shapes else shape_rows(a)
    rows += [model_row(p, a.runs) for p in a.models]
    if a.json:
        a.json.write_text(json.dumps(dict(date=time.strftime("%Y-%m-%d"), rows=rows), indent=1))


def model_row(path, runs):
    rng = np.random.default_rng(0)
    row, outs = dict(model=path.stem), {}
    for label, opts in (("fused", {}), ("unfused", dict(disable_passes=["fuse_attention"]))):
        bundle = gpuc.compile(str(path), **opts)
        with gpuc.load(bundle) as m:
            if not outs:
                xs = [rng.uniform(-1, 1, i.shape).astype(i.dtype) for i in m.inputs]
            outs[label] = np.asarray(m.run(xs)[0], np.float64)
            gpu_us, wall_us = timed(m, xs, runs)
            row[label] = dict(dispatches=len(read_bundle(bundle).dispatches), gpu_us=gpu_us, wall_us=wall_us,
                              device=m.device.name)
    row["diff"] = float(np.abs(outs["fused"] - outs["unfused"]).max() / np.abs(outs["unfused"]).max())
    print(f"{path.stem}: fused {row['fused']['dispatches']} disp {row['fused']['gpu_us']:.1f} us | unfused "
          f"{row['unfused']['dispatches']} disp {row['unfused']['gpu_us']:.1f} us | diff {row['diff']:.1e}", flush=True)
    return row


def shape_rows(a):
    rows = []
    rng = np.random.default_rng(0)
    for name, b, h, n, d, mask in SHAPES:
        model, shapes = attention_model(b, h, n, d=d, scale="after", mask=mask, k_form="transpose", seed=1)
        xs = [rng.normal(0, 1, s).astype(np.float32) for s in shapes]
        scale = 1.0 / np.sqrt(d)
        bias = None
        if mask == "swin":
            xs[3] = np.where(rng.random(shapes[3]) < 0.3, -100.0, 0.0).astype(np.float32)
            rpb = np.random.default_rng(1).normal(0, 1, (1, h, n, n)).astype(np.float32)
            bias = (rpb + xs[3][:, None]).astype(np.float32)
        ref = attention_ref(xs[0], xs[1], xs[2], np.float32(scale), bias)
        row = dict(shape=name, batch=b, heads=h, n=n, d=d)
        for label, opts in (("fused", {}), ("unfused", dict(disable_passes=["fuse_attention"])),
                            ("fused_fp16", dict(precision="fp16"))):
            bundle = gpuc.compile(model, cache=False, **opts)
            with gpuc.load(bundle) as m:
                out = np.asarray(m.run(xs)[0], np.float64)
                gpu_us, wall_us = timed(m, xs, a.runs)
                row[label] = dict(dispatches=len(read_bundle(bundle).dispatches), gpu_us=gpu_us, wall_us=wall_us,
                                  err=float(np.abs(out - ref).max() / np.abs(ref).max()), device=m.device.name)
        for fill in a.fill_groups:
            from gpuc.compiler.ops import attention as attn_op
            keep, attn_op.FILL_GROUPS = attn_op.FILL_GROUPS, fill
            try:
                with gpuc.load(gpuc.compile(model, cache=False)) as m:
                    row[f"fused_fill{fill}_us"] = timed(m, xs, a.runs)[0]
            finally:
                attn_op.FILL_GROUPS = keep
        row["torch_sdpa_fp32_us"] = torch_us(xs[0], xs[1], xs[2], bias, float(scale), a.runs)
        f, u = row["fused"], row["unfused"]
        row["speedup_gpu"] = u["gpu_us"] / f["gpu_us"] if f["gpu_us"] and u["gpu_us"] else None
        rows.append(row)
        print(f"{name}: fused {f['dispatches']} disp {f['gpu_us']:.1f} us (err {f['err']:.1e}) | unfused "
              f"{u['dispatches']} disp {u['gpu_us']:.1f} us (err {u['err']:.1e}) | x{row['speedup_gpu']:.2f} | "
              f"fp16 {row['fused_fp16']['gpu_us']:.1f} us (err {row['fused_fp16']['err']:.1e}) | "
              f"torch sdpa {row['torch_sdpa_fp32_us']} | "
              + " ".join(f"{k} {v:.1f}" for k, v in row.items() if k.startswith("fused_fill")), flush=True)
    return rows


if __name__ == "__main__":
    main()
