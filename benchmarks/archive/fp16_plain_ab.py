"""Why the plain gemm kernel is slower with float16 storage than with float32 (issue 14): the gemm
dispatch's GPU time for FULLY_CONNECTED shapes (default: ConvNeXt-T / Swin-T at batch 1) under
storage variants, in one process.

    python -m benchmarks.archive.fp16_plain_ab [--runs 20] [--json out.json]

Each shape is ADD(x, x) -> FULLY_CONNECTED (+ a fused residual ADD of ADD(r, r) with --res shapes)
-> TRANSPOSE, so the gemm reads and writes float16 tensors as inside a network.  Variants:
fp32; fp16 (as compiled); fp16 with some of the gemm's bindings pinned to float32 (pin-xw, pin-out,
pin-x, pin-w); fp16-nopreserve (no SignedZeroInfNanPreserve for 16-bit floats).  (An unpackHalf2x16
variant, loads through uvec2 bindings, measured no better on the H100 and was removed with its codegen
hook.)  The coopmat variant is off (GPUC_VARIANTS=coopmat=off)."""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(HERE / "tests"))

import gpuc  # noqa: E402
from gpuc.compiler import compile_model, driver  # noqa: E402
from gpuc.compiler.codegen import glsl  # noqa: E402
from gpuc.compiler.ir import GPU  # noqa: E402
from gpuc.runtime.profile import profile  # noqa: E402
from benchmarks.fc_bench import add_fc  # noqa: E402
from helpers.builder import ModelBuilder  # noqa: E402

SHAPES = [(3136, 384, 96, 0), (3136, 96, 384, 1), (784, 768, 192, 0), (784, 192, 768, 1), (196, 1536, 384, 0),
          (196, 384, 1536, 1), (49, 3072, 768, 0), (49, 768, 3072, 1)]


def fc_model(M, N, K, res, rng):
    mb = ModelBuilder()
    y, w, b = add_fc(mb, [M, K], [M, N], N, K, rng)
    xs = [rng.uniform(-1, 1, (M, K)).astype(np.float32)]
    ref = (2 * xs[0].astype(np.float64)) @ w.T.astype(np.float64) + b
    if res:
        r = mb.input("r", [M, N])
        r2 = mb.tensor("r2", [M, N])
        mb.op("ADD", [r, r], [r2])
        y2 = mb.tensor("y2", [M, N])
        mb.op("ADD", [y, r2], [y2])
        y = y2
        xs.append(rng.uniform(-1, 1, (M, N)).astype(np.float32))
        ref = ref + 2 * xs[1]
    z = mb.tensor("z", [N, M])
    mb.op("TRANSPOSE", [y, mb.const("perm", np.array([1, 0], np.int32))], [z])
    mb.output(z)
    return mb.finish(), xs, ref.T


ORIG_STORE = driver.store_fp16
ORIG_WIDTHS = glsl.float_widths


def set_variant(name: str):
    """Patch the compiler for variant `name` (undoing the previous one)."""
    driver.store_fp16 = ORIG_STORE
    glsl.float_widths = ORIG_WIDTHS
    pins = {"fp16-pin-xw": ("x", "w"), "fp16-pin-out": ("out_", "res"), "fp16-pin-x": ("x",),
            "fp16-pin-w": ("w",)}.get(name)
    if pins:
        def store(graph, kernels):
            if graph.fp32_pinned is not None:
                graph.fp32_pinned = set(graph.fp32_pinned) | {graph.storage(t) for k in kernels if k.kind == GPU
                                                              and k.template == "gemm" for n, t in k.bindings
                                                              if n in pins}
            return ORIG_STORE(graph, kernels)
        driver.store_fp16 = store
    if name == "fp16-nopreserve":
        glsl.float_widths = lambda k, d: {32}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--json")
    ap.add_argument("--variants", default="fp32,fp16,fp16-pin-xw,fp16-pin-out,fp16-pin-x,fp16-pin-w,fp16-nopreserve")
    a = ap.parse_args()
    os.environ["GPUC_VARIANTS"] = "coopmat=off"
    dev = gpuc.open_device(None)
    print(f"device: {dev.describe()['name']}  {time.strftime('%Y-%m-%d %H:%M')}")
    variants = a.variants.split(",")
    rng = np.random.default_rng(0)
    out, total = [], {v: 0.0 for v in variants}
    print(f"{'M':>5} {'N':>5} {'K':>5} res " + " ".join(f"{v:>15}" for v in variants) + "   (gemm us)")
    for M, N, K, res in SHAPES:
        model, xs, ref = fc_model(M, N, K, res, rng)
        row = dict(M=M, N=N, K=K, res=res)
        for v in variants:
            set_variant(v)
            data = compile_model(model, cache=False, precision="fp32" if v == "fp32" else "fp16")
            with gpuc.load(data, device=dev) as m:
                y = m.run(xs)[0]
                err = float(np.abs(y - ref).max() / np.abs(ref).max())
                profile(m, xs, runs=50)
                rows = profile(m, xs, runs=a.runs)["rows"]
            g = [r for r in rows if r["shader"].startswith("gemm")][0]
            row[v] = g["us"]
            row[v + "_err"] = err
            total[v] += g["us"]
        set_variant("fp32")
        out.append(row)
        print(f"{M:5d} {N:5d} {K:5d} {res:3d} " + " ".join(f"{row[v]:8.1f} {row[v + '_err']:.0e}" for v in variants))
        sys.stdout.flush()
    print("total            " + " ".join(f"{total[v]:15.1f}" for v in variants))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
