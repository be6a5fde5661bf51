"""GEMM / implicit-GEMM convolution speed through gpuc next to PyTorch, in one run.

    python -m benchmarks.gemm_speed [--square 2048,4096] [--batch 32] [--runs 10] [--json out.json]
                                    [--layers all|none|N] [--fp16-plain] [--sweep]

Rows:
- square GEMMs M = N = K (a FULLY_CONNECTED layer) through gpuc in fp32 and `--precision fp16`
  (the `coopmat` variant where the device has it), and torch.matmul in fp32 (TF32 off) and fp16;
- the convolution layers of torchvision's ResNet-50 at batch `--batch` (224x224 input; each distinct
  shape once, with its count in the network), through gpuc (fp32, fp16) and torch conv2d (cuDNN,
  channels-last, fp32 with TF32 off, fp16), with the network's total conv time (sum of count x time).

gpuc times are the gemm dispatch's GPU time (timestamps, runtime/profile.py: what `gpuc profile`
reports); each layer is a two-op model ADD(x, x) -> layer, so that in fp16 the gemm reads an fp16
activation as it does inside a network.  torch times are CUDA-event medians of back-to-back calls.
Every gpuc result is checked against torch fp32 (fp32: 1e-3 of max|ref|, fp16: 1e-2).
--fp16-plain adds gpuc fp16 without the cooperative-matrix variant (GPUC_VARIANTS=coopmat=off) and
gives every gemm a variant (not only those compiler/ops/gemm_coopmat.worthwhile picks), to measure
where the variant wins.  --sweep times forced tile plans for a few shapes (for tuning the planners).
Without torch (or CUDA) the torch columns are empty.  Exit 1 if a result is out of tolerance.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

import gpuc
from gpuc.compiler import compile_model
from gpuc.compiler.ops import gemm_dispatch, gemm_plan
from gpuc.compiler.ops import gemm_coopmat as cm_mod
from gpuc.runtime.profile import profile
from benchmarks.fc_bench import add_fc
from benchmarks.timing import cuda_us
from tests.helpers.builder import ModelBuilder

try:
    import torch
    import torch.nn.functional as F
    HAVE_TORCH = torch.cuda.is_available()
except Exception:                      # noqa: BLE001 - no torch: gpuc rows only
    HAVE_TORCH = False


def resnet50_convs(batch: int) -> list[dict]:
    """Distinct conv layers of torchvision ResNet-50 (v1.5: stride on the 3x3) at 224x224, with counts."""
    rows = [dict(name="conv1 7x7/2", hw=224, ci=3, co=64, k=7, s=2, n=1)]
    stages = [(56, 64, 256, 3, 1), (56, 128, 512, 4, 2), (28, 256, 1024, 6, 2), (14, 512, 2048, 3, 2)]
    cin = 64
    for i, (hw, mid, out, blocks, s) in enumerate(stages):
        ohw = hw // s
        L = f"layer{i + 1}"
        rows.append(dict(name=f"{L} 1x1 {cin}->{mid}", hw=hw, ci=cin, co=mid, k=1, s=1, n=1))
        rows.append(dict(name=f"{L} 3x3/{s} {mid}", hw=hw, ci=mid, co=mid, k=3, s=s, n=1))
        rows.append(dict(name=f"{L} 1x1 {mid}->{out}", hw=ohw, ci=mid, co=out, k=1, s=1, n=blocks))
        rows.append(dict(name=f"{L} down 1x1/{s} {cin}->{out}", hw=hw, ci=cin, co=out, k=1, s=s, n=1))
        rows.append(dict(name=f"{L} 1x1 {out}->{mid}", hw=ohw, ci=out, co=mid, k=1, s=1, n=blocks - 1))
        if s > 1:
            rows.append(dict(name=f"{L} 3x3 {mid}", hw=ohw, ci=mid, co=mid, k=3, s=1, n=blocks - 1))
        else:
            rows[-4]["n"] = blocks
        cin = out
    rows = [r for r in rows if r["n"] > 0]
    # layer1's first 1x1 (64->64) and its downsample (64->256 at stride 1) share shapes with other rows
    merged: dict = {}
    for r in rows:
        key = (r["hw"], r["ci"], r["co"], r["k"], r["s"])
        if key in merged:
            merged[key]["n"] += r["n"]
        else:
            merged[key] = dict(r, batch=batch)
    return list(merged.values())


def same_pads(size: int, k: int, s: int) -> tuple[int, int]:
    out = -(-size // s)
    total = max((out - 1) * s + k - size, 0)
    return total // 2, total - total // 2


def conv_model(spec: dict, rng):
    """(tflite bytes, NHWC input, weights [CO, KH, KW, CI], bias, output shape): ADD(x, x) -> CONV_2D.
    The batch is stacked along the height ([1, batch*H, W, C]: the same GEMM, M = batch*OH*OW, and a
    one-item input, which runtime/profile.py takes whatever the bundle's batch semantics)."""
    n, hw, ci, co, k, s = spec["batch"], spec["hw"], spec["ci"], spec["co"], spec["k"], spec["s"]
    mb = ModelBuilder()
    x = mb.input("x", [1, n * hw, hw, ci])
    x2 = mb.tensor("x2", [1, n * hw, hw, ci])
    mb.op("ADD", [x, x], [x2])
    w = rng.normal(0, 1 / np.sqrt(k * k * ci), (co, k, k, ci)).astype(np.float32)
    b = rng.normal(0, 0.1, co).astype(np.float32)
    same = k > 1
    ohw = -(-hw // s) if same else (hw - 1) // s + 1
    y = mb.tensor("y", [1, n * ohw, ohw, co])
    mb.op("CONV_2D", [x2, mb.const("w", w), mb.const("b", b)], [y], padding="SAME" if same else "VALID",
          stride_h=s, stride_w=s)
    mb.output(y)
    xs = rng.uniform(-1, 1, (1, n * hw, hw, ci)).astype(np.float32)
    return mb.finish(), xs, w, b, [n, ohw, ohw, co]


def fc_model(s: int, rng):
    mb = ModelBuilder()
    y, w, _ = add_fc(mb, [1, s, s], [s, s], s, s, rng, bias_std=None)   # rows = s (a one-item input, as conv_model's)
    mb.output(y)
    return mb.finish(), rng.uniform(-1, 1, (1, s, s)).astype(np.float32), w


def gpuc_time(data: bytes, xs, dev, mode: str, runs: int):
    """(output, gemm dispatch us, shader name, defines note) of a compiled two-op bundle."""
    os.environ["GPUC_VARIANTS"] = mode
    with gpuc.load(data, device=dev) as m:
        out = m.run([xs])[0]
        rows = []
        if m.timestamps:                 # ~0.2 s of back-to-back runs first: the GPU clocks up from idle
            ms = profile(m, [xs], runs=3)["run_gpu_ms"]
            profile(m, [xs], runs=max(3, min(100, int(200 / max(ms, 1e-3)))))
            rows = profile(m, [xs], runs=runs)["rows"]
    gemm = [r for r in rows if r["shader"].startswith("gemm")]
    return out, (gemm[0]["us"] if gemm else None), (gemm[0]["shader"] if gemm else "?")


def torch_conv(spec, xs2, w, b, runs):
    """(fp32 reference as NHWC numpy, fp32 us, fp16 us) for conv(xs2) (xs2: what the gemm reads)."""
    k, s = spec["k"], spec["s"]
    x = torch.from_numpy(xs2).cuda().permute(0, 3, 1, 2).contiguous(memory_format=torch.channels_last)
    if k > 1:
        pt, pb = same_pads(spec["hw"] * spec["batch"], k, s)
        pl, pr = same_pads(spec["hw"], k, s)
        x = F.pad(x, (pl, pr, pt, pb)).contiguous(memory_format=torch.channels_last)
    wt = torch.from_numpy(w).cuda().permute(0, 3, 1, 2).contiguous(memory_format=torch.channels_last)
    bt = torch.from_numpy(b).cuda()
    ref = F.conv2d(x, wt, bt, stride=s).permute(0, 2, 3, 1).float().cpu().numpy()
    t32 = cuda_us(lambda: F.conv2d(x, wt, bt, stride=s), runs)
    xh, wh, bh = x.half(), wt.half(), bt.half()
    t16 = cuda_us(lambda: F.conv2d(xh, wh, bh, stride=s), runs)
    return ref, t32, t16


def tflops(macs: int, us) -> str:
    return f"{2 * macs / us / 1e6:7.1f}" if us else "      -"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--square", default="2048,4096")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--layers", default="all", help="all, none, or the first N distinct ResNet-50 conv shapes")
    ap.add_argument("--fp16-plain", action="store_true")
    ap.add_argument("--sweep", action="store_true")
    ap.add_argument("--device", default=None)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    if HAVE_TORCH:
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cudnn.benchmark = True
    dev = gpuc.open_device(args.device)
    info = dev.describe()
    print(f"device: {info['name']}  date {time.strftime('%Y-%m-%d %H:%M')}  torch: "
          f"{torch.__version__ + ' ' + torch.cuda.get_device_name() if HAVE_TORCH else 'absent'}")
    if args.fp16_plain:
        cm_mod.worthwhile = lambda M, N, K: min(M, N, K) >= 16
    rng = np.random.default_rng(0)
    results, bad = [], 0
    modes = [("fp32", "fp32", "auto"), ("fp16", "fp16", "auto")] + \
        ([("fp16-plain", "fp16", "coopmat=off")] if args.fp16_plain else [])

    def run_gpuc(model, xs, ref, macs, row):
        nonlocal bad
        for tag, prec, mode in modes:
            data = compile_model(model, cache=False, precision=prec)
            out, us, shader = gpuc_time(data, xs, dev, mode, args.runs)
            err = float(np.abs(out.reshape(ref.shape).astype(np.float64) - ref).max()
                        / max(float(np.abs(ref).max()), 1e-30)) if ref is not None else float("nan")
            tol = 1e-3 if prec == "fp32" else 1e-2
            if ref is not None and not err <= tol:
                bad += 1
                print(f"  !! {row['name']} {tag}: error {err:.2e} > {tol}")
            row[f"gpuc_{tag}_us"], row[f"gpuc_{tag}_err"], row[f"gpuc_{tag}_shader"] = us, err, shader

    cols = [m[0] for m in modes]
    head = "  ".join(f"{'gpuc ' + c:>15}" for c in cols)
    print(f"\nTFLOP/s (us)   {'layer':<28} {'M':>7} {'N':>5} {'K':>5} x{'n':<2} {head} {'torch fp32':>15} {'torch fp16':>15}")

    def show(row):
        macs = row["M"] * row["N"] * row["K"]
        parts = [f"{tflops(macs, row.get(f'gpuc_{c}_us'))} ({row.get(f'gpuc_{c}_us') or 0:6.0f})" for c in cols]
        parts += [f"{tflops(macs, row.get(f'torch_{c}_us'))} ({row.get(f'torch_{c}_us') or 0:6.0f})"
                  for c in ("fp32", "fp16")]
        print(f"{'':15}{row['name']:<28} {row['M']:>7} {row['N']:>5} {row['K']:>5} x{row['n']:<2} "
              + "  ".join(parts), flush=True)

    for s in (int(v) for v in args.square.split(",") if v):
        model, xs, w = fc_model(s, rng)
        row = dict(name=f"square {s}", M=s, N=s, K=s, n=1)
        ref = None
        if HAVE_TORCH:
            a = torch.from_numpy(2 * xs[0]).cuda()
            bt = torch.from_numpy(w).cuda().t().contiguous()
            ref = (a @ bt).cpu().numpy()
            row["torch_fp32_us"] = cuda_us(lambda: torch.matmul(a, bt), args.runs)
            ah, bh = a.half(), bt.half()
            row["torch_fp16_us"] = cuda_us(lambda: torch.matmul(ah, bh), args.runs)
        run_gpuc(model, xs, ref, s ** 3, row)
        show(row)
        results.append(row)

    specs = resnet50_convs(args.batch)
    if args.layers != "all":
        specs = [] if args.layers == "none" else specs[:int(args.layers)]
    tot = {}
    for spec in specs:
        model, xs, w, b, oshape = conv_model(spec, rng)
        M, N, K = int(np.prod(oshape[:3])), spec["co"], spec["k"] ** 2 * spec["ci"]
        row = dict(name=spec["name"], M=M, N=N, K=K, n=spec["n"])
        ref = None
        if HAVE_TORCH:
            ref, row["torch_fp32_us"], row["torch_fp16_us"] = torch_conv(spec, 2 * xs, w, b, args.runs)
        run_gpuc(model, xs, ref, M * N * K, row)
        show(row)
        results.append(row)
        for key, v in row.items():
            if key.endswith("_us") and v:
                tot[key] = tot.get(key, 0.0) + v * spec["n"]
    if specs:
        macs = sum(r["M"] * r["N"] * r["K"] * r["n"] for r in results if not r["name"].startswith("square"))
        print(f"\nResNet-50 b{args.batch} convs ({sum(s['n'] for s in specs)} layers, {2 * macs / 1e9:.0f} GFLOP), "
              "total ms (TFLOP/s): " + ", ".join(f"{k[:-3]} {v / 1e3:.2f} ({2 * macs / v / 1e6:.1f})"
                                                  for k, v in sorted(tot.items())))

    if args.sweep:
        sweep(dev, rng, args.runs)
    dev.close()
    if args.json:
        Path(args.json).write_text(json.dumps({"device": info, "date": time.strftime("%Y-%m-%d"), "rows": results,
                                               "resnet50_conv_total_us": tot}, indent=1))
    print("PASS" if not bad else f"FAIL: {bad} result(s) out of tolerance")
    return 1 if bad else 0


# (BM, BN, BK, TM, TN, KS, V4): V4 False = the strided register-block path for the same tile
FP32_PLANS = [(128, 128, 8, 8, 8, 1, True), (128, 128, 8, 8, 8, 1, False), (128, 128, 16, 8, 8, 1, False),
              (128, 64, 16, 8, 8, 1, True), (128, 64, 16, 8, 8, 1, False), (128, 64, 8, 8, 8, 1, True),
              (64, 64, 16, 8, 8, 1, True), (64, 64, 16, 8, 8, 1, False), (32, 64, 16, 4, 4, 1, True),
              (32, 64, 16, 4, 4, 1, False), (64, 128, 8, 8, 8, 1, True)]
# (WM, WN, TM, TN, BK, ST)
COOP_PLANS = [(4, 2, 4, 4, 16, 1), (4, 2, 4, 4, 32, 1), (2, 2, 4, 4, 32, 2), (2, 2, 4, 4, 16, 2), (4, 2, 2, 4, 32, 2),
              (2, 4, 4, 2, 32, 2), (4, 2, 4, 4, 16, 2), (2, 4, 4, 4, 16, 2), (2, 2, 4, 4, 64, 1), (4, 2, 2, 2, 32, 2),
              (2, 2, 2, 2, 32, 2), (2, 2, 2, 2, 64, 2)]


def sweep(dev, rng, runs):
    """Forced plans for a few shapes: gemm us per plan (fp32 plain path; fp16 coopmat path)."""
    shapes = [("square 4096", None), ("l1 3x3 64", dict(batch=32, hw=56, ci=64, co=64, k=3, s=1)),
              ("l2 1x1 512->128", dict(batch=32, hw=28, ci=512, co=128, k=1, s=1)),
              ("l3 3x3 256", dict(batch=32, hw=14, ci=256, co=256, k=3, s=1)),
              ("l4 1x1 512->2048", dict(batch=32, hw=7, ci=512, co=2048, k=1, s=1))]
    orig_plan, orig_coop = gemm_dispatch.plan_gemm, cm_mod.plan_coopmat
    for name, spec in shapes:
        if spec is None:
            model, xs, _ = fc_model(4096, rng)
            macs = 4096 ** 3
        else:
            model, xs, _, _, oshape = conv_model(spec, rng)
            macs = int(np.prod(oshape)) * spec["k"] ** 2 * spec["ci"]
        auto = [orig_plan, orig_coop]
        for prec, plans in (("fp32", FP32_PLANS), ("fp16", COOP_PLANS)):
            line = []
            for p in [None] + plans:
                if prec == "fp32":
                    gemm_dispatch.plan_gemm = orig_plan if p is None else (lambda *a, p=p, **k: gemm_plan.GemmPlan(*p))
                else:
                    cm_mod.plan_coopmat = orig_coop if p is None else (lambda *a, p=p, **k: cm_mod.CoopPlan(*p))
                try:
                    data = compile_model(model, cache=False, precision=prec)
                    _, us, _ = gpuc_time(data, xs, dev, "auto", runs)
                    line.append(f"{'auto' if p is None else 'x'.join(map(str, p))}: {tflops(macs, us).strip()}")
                except Exception as e:          # noqa: BLE001 - a plan the shader cannot take
                    line.append(f"{p}: error {str(e)[:60]}")
            gemm_dispatch.plan_gemm, cm_mod.plan_coopmat = auto
            print(f"sweep {name} {prec} TFLOP/s: " + ", ".join(line), flush=True)


if __name__ == "__main__":
    sys.exit(main())
