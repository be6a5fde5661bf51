"""Native int8 convolution plans check (compiler/ops/int8_conv.py): ResNet-50-like int8 conv / FC layers at a
batch, each compiled with every kernel plan offered as a first choice (CompileOptions.int8_measured off) and run with one plan
at a time (GPUC_VARIANTS): the plain kernels (bit-exact with LiteRT: tests/ops/test_int8_kernels.py) against
int_dot, coopmat_int8 (64 x 64, int8_conv_tiled.comp: cm64x64), the int8_conv_cm.comp plans coopmat_int8_64x64
(cm_64k32: the same tile, 128-int8 double-buffered K steps) / 32x64 (twice the workgroups) / 128x128 /
128x64 / 64x128 (each where its grid has CM_MIN_GROUPS workgroups, else `-`) and, for the flat kernel's layers,
coopmat_int8_tiled and int8_splitk_dot (K split over a workgroup).  Every output must equal the plain
kernels' bit for bit; each plan's layer time comes from GPU timestamps (runtime/profile.py).  With --model
(a full-integer int8 .tflite), the whole network too: the kernels chosen by measurement at load
(GPUC_TUNE=on) against the plain kernels, bit for bit, and both GPU times, and the tuned run's slowest
dispatches (--top) with the kernel each runs.

    python -m benchmarks.int8_plans_check [--model resnet50_int8.tflite] [--batch 32] [--runs 10] [--device N] [--top 30]

Exit 1 on any mismatch.
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

import gpuc
from gpuc.compiler import compile_model
from gpuc.runtime.profile import profile
from tests.helpers.builder import ModelBuilder

# (name, H, W, CIN, COUT, kernel, stride, residual ADD); FULLY_CONNECTED when H == 0 (CIN -> COUT)
LAYERS = [
    ("3x3 64->64 @56", 56, 56, 64, 64, 3, 1, False),
    ("1x1 64->256 @56 +add", 56, 56, 64, 256, 1, 1, True),
    ("3x3 128->128 s2 @56", 56, 56, 128, 128, 3, 2, False),
    ("1x1 1024->256 @14", 14, 14, 1024, 256, 1, 1, False),
    ("3x3 512->512 @7", 7, 7, 512, 512, 3, 1, False),
    ("1x1 512->2048 @7 +add", 7, 7, 512, 2048, 1, 1, True),
    ("fc 2048->1000", 0, 0, 2048, 1000, 1, 1, False),
]
PLANS = ["int_dot", "coopmat_int8", "coopmat_int8_64x64", "coopmat_int8_32x64",
         "coopmat_int8_128x128",
         "coopmat_int8_128x64", "coopmat_int8_64x128", "coopmat_int8_tiled", "int8_splitk_dot"]


def build(layer, batch, rng):
    name, h, w, ci, co, k, s, res = layer
    mb = ModelBuilder()
    shape = [batch, ci] if h == 0 else [batch, h, w, ci]
    x = mb.input("x", shape, "int8", quant=(0.05, 3))
    ws = rng.uniform(0.002, 0.02, co).astype(np.float32)
    wshape = (co, ci) if h == 0 else (co, k, k, ci)
    wt = mb.const("w", rng.integers(-127, 128, wshape).astype(np.int8), quant=(ws, 0, 0))
    b = mb.const("b", rng.integers(-4000, 4000, co).astype(np.int32), quant=(np.float32(0.05) * ws, 0, 0))
    oshape = [batch, co] if h == 0 else [batch, -(-h // s), -(-w // s), co]
    y = mb.tensor("y", oshape, "int8", quant=(0.2, -5))
    if h == 0:
        mb.op("FULLY_CONNECTED", [x, wt, b], [y], fused_activation_function="RELU")
    else:
        mb.op("CONV_2D", [x, wt, b], [y], padding="SAME", stride_w=s, stride_h=s, fused_activation_function="RELU")
    ins = [rng.integers(-128, 128, shape).astype(np.int8)]
    if res:
        r = mb.input("r", oshape, "int8", quant=(0.1, 7))
        z = mb.tensor("z", oshape, "int8", quant=(0.15, -2))
        mb.op("ADD", [y, r], [z], fused_activation_function="RELU")
        y = z
        ins.append(rng.integers(-128, 128, oshape).astype(np.int8))
    mb.output(y)
    return mb.finish(), ins


def run(data, ins, spec, dev, runs, tune="off", batch=1):
    os.environ["GPUC_VARIANTS"], os.environ["GPUC_TUNE"] = spec, tune
    with gpuc.load(data, device=dev) as m:
        used = m.bundle.stats.get("variants_used", {})
        if ins is None:     # (a whole model: random int8 inputs of its shapes at `batch` items)
            g = np.random.default_rng(1)
            ins = [g.integers(-128, 128, (batch, *i.shape[1:])).astype(i.dtype) for i in m.inputs]
        out = m.run(ins)
        p = profile(m, ins, runs=runs) if m.timestamps else None
    return out, used, p


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default=None)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--device", default=None)
    ap.add_argument("--top", type=int, default=30, help="with --model: the tuned run's slowest dispatches shown")
    args = ap.parse_args()
    dev = gpuc.open_device(args.device)
    print(f"device: {dev.describe()['name']}")
    rng = np.random.default_rng(0)
    bad = 0
    heads = ["plain", "int_dot", "cm64x64", "cm_64k32", "cm32x64", "cm128x128", "cm128x64", "cm64x128", "cm_tiled",
             "splitk"]
    print(f"{'layer':<24} {'GOP':>6}  " + "  ".join(f"{h:>11}" for h in heads) + "   (GPU us; x: differs from plain)")
    for layer in LAYERS:
        model, ins = build(layer, args.batch, rng)
        data = compile_model(model, cache=False, int8_measured=False)     # (every plan a first choice)
        ref, _, p0 = run(data, ins, "off", dev, args.runs)
        gop = sum(r["gflop_per_s"] * r["us"] * 1e-6 for r in p0["rows"] if r["gflop_per_s"]) if p0 else 0
        cells = [f"{sum(r['us'] for r in p0['rows']):11.1f}" if p0 else f"{'?':>11}"]
        for plan in PLANS:
            out, used, p = run(data, ins, f"off,{plan}=auto", dev, args.runs)
            if plan not in used:
                cells.append(f"{'-':>11}")
                continue
            same = all(np.array_equal(o, r) for o, r in zip(out, ref))
            bad += not same
            cells.append(f"{sum(r['us'] for r in p['rows']) if p else 0:10.1f}{' ' if same else 'x'}")
        print(f"{layer[0]:<24} {gop:6.2f}  " + "  ".join(cells))
    if args.model:
        data = compile_model(open(args.model, "rb").read(), cache=False, max_batch=args.batch)
        ref, _, p0 = run(data, None, "off", dev, args.runs, batch=args.batch)
        out, used, p = run(data, None, "", dev, args.runs, tune="on", batch=args.batch)
        same = all(np.array_equal(o, r) for o, r in zip(out, ref))
        bad += not same
        print(f"{os.path.basename(args.model)} batch {args.batch}: plain kernels {p0['run_gpu_ms']:.3f} ms, tuned "
              f"{p['run_gpu_ms']:.3f} ms ({used}), outputs {'equal' if same else 'DIFFER'}")
        if p:
            print(f"tuned run, {p['dispatches']} dispatches, the {args.top} slowest (GPU us, TOP/s, kernel, op):")
            for r in p["rows"][:args.top]:
                tops = f"{r['gflop_per_s'] / 1e3:7.1f}" if r["gflop_per_s"] else f"{'':>7}"
                print(f"  {r['us']:9.1f} {tops}  {r['shader']:<40} {r['op']}")
            for g in p["by_shader"]:
                print(f"  {g['dispatches']:3d} x {g['us']:9.1f} us {g['percent']:5.1f} %  {g['shader']}")
    dev.close()
    print("int8 plans: all bit-exact" if not bad else f"int8 plans: {bad} MISMATCHES")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
