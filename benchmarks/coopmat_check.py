"""Cooperative-matrix gemm check: every gemm shape of MobileNetV2 (and a few large square GEMMs),
compiled with --precision fp16 and run with and without the `coopmat` kernel variant; each result
is checked against numpy (fp16-appropriate tolerance: 1e-2 * max|ref|) and timed per dispatch with
GPU timestamps (runtime/profile.py, what `gpuc profile` uses).

    python -m benchmarks.coopmat_check [--model mobilenet_v2_224_f32.tflite] [--square 1024,2048,4096]
                                       [--runs 20] [--device N|NAME] [--json out.json] [--quick | --full]

Each shape is a two-op model: ADD(x, x) (so the gemm reads an fp16-stored activation, as inside a
network) -> the conv / fully-connected layer.  On a device without VK_KHR_cooperative_matrix it says
so and checks (and times) the plain path only.  --quick (default on CPU devices such as lavapipe):
4 of the distinct MobileNetV2 shapes, no square GEMMs, no whole-network run.  Last, the whole network
in fp16: GPU time per run with and without the variant.  Exit 1 if any result is out of tolerance.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parents[1]

import gpuc
from gpuc.compiler import compile_model
from gpuc.compiler.ops.gemm_coopmat import REQUIRES, worthwhile
from gpuc.runtime.capabilities import missing
from gpuc.runtime.profile import profile
from tests.helpers.builder import ModelBuilder

TOL = 1e-2


def find_model(name: str) -> str:
    env = os.environ.get("GPUC_SHARED_MODELS")
    for d in ([Path(env)] if env else []) + [HERE.parent / "shared" / "models", HERE / "shared" / "models"]:
        if (d / name).is_file():
            return str(d / name)
    return name


def model_shapes(path: str) -> list[dict]:
    """Distinct gemm layers of a model: CONV_2D (not depthwise) and FULLY_CONNECTED."""
    from gpuc.compiler.frontend.importer import load_tflite
    g = load_tflite(path).main
    seen, out = set(), []
    for n in g.nodes:
        if n.op not in ("CONV_2D", "FULLY_CONNECTED"):
            continue
        x, w = g.t(n.inputs[0]), g.t(n.inputs[1])
        a = n.attrs
        key = (n.op, tuple(x.shape), tuple(w.shape), int(a.get("stride_h", 1) or 1), int(a.get("padding", 0)))
        if key not in seen:
            seen.add(key)
            out.append(dict(op=n.op, x=list(x.shape), w=list(w.shape), stride=key[3], padding=key[4]))
    return out


def build(spec: dict, rng):
    """(tflite bytes, input, numpy float64 reference of the gemm layer)."""
    mb = ModelBuilder()
    xs = rng.uniform(-1, 1, spec["x"]).astype(np.float32)
    x = mb.input("x", spec["x"])
    x2 = mb.tensor("x2", spec["x"])
    mb.op("ADD", [x, x], [x2])
    w = rng.normal(0, 1 / np.sqrt(np.prod(spec["w"][1:])), spec["w"]).astype(np.float32)
    b = rng.normal(0, 0.1, spec["w"][0]).astype(np.float32)
    a = (2 * xs).astype(np.float16).astype(np.float64)          # what the gemm reads (fp16 storage)
    w16, b64 = w.astype(np.float16).astype(np.float64), b.astype(np.float64)
    if spec["op"] == "FULLY_CONNECTED":
        y = mb.tensor("y", [int(np.prod(spec["x"])) // spec["w"][1], spec["w"][0]])
        mb.op("FULLY_CONNECTED", [x2, mb.const("w", w), mb.const("b", b)], [y])
        ref = a.reshape(-1, spec["w"][1]) @ w16.T + b64
    else:
        n, h, wd, c = spec["x"]
        co, kh, kw, _ = spec["w"]
        s = spec["stride"]
        same = spec["padding"] == 0
        oh, ow = (-(-h // s), -(-wd // s)) if same else ((h - kh) // s + 1, (wd - kw) // s + 1)
        pt = max((oh - 1) * s + kh - h, 0) // 2 if same else 0
        pl = max((ow - 1) * s + kw - wd, 0) // 2 if same else 0
        y = mb.tensor("y", [n, oh, ow, co])
        mb.op("CONV_2D", [x2, mb.const("w", w), mb.const("b", b)], [y], padding="SAME" if same else "VALID",
              stride_h=s, stride_w=s)
        ap = np.pad(a, ((0, 0), (pt, kh + (oh - 1) * s), (pl, kw + (ow - 1) * s), (0, 0)))
        cols = np.stack([ap[:, ky:ky + (oh - 1) * s + 1:s, kx:kx + (ow - 1) * s + 1:s, :]
                         for ky in range(kh) for kx in range(kw)], axis=3)      # n, oh, ow, taps, c
        ref = cols.reshape(n * oh * ow, -1) @ w16.reshape(co, -1).T + b64
    mb.output(y)
    return mb.finish(), xs, ref


def measure(data: bytes, xs, dev, mode: str, runs: int):
    os.environ["GPUC_VARIANTS"] = mode
    with gpuc.load(data, device=dev) as m:
        used = m.bundle.stats.get("variants_used", {})
        out = m.run([xs])[0]
        rows = profile(m, [xs], runs=runs)["rows"] if m.timestamps else []
    gemm = [r for r in rows if r["shader"].startswith("gemm")]
    return out, (gemm[0]["us"] if gemm else None), used, (gemm[0]["shader"] if gemm else "?")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="mobilenet_v2_224_f32.tflite")
    ap.add_argument("--square", default="1024,2048,4096", help="M=N=K sizes of extra FULLY_CONNECTED GEMMs")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--device", default=None)
    ap.add_argument("--json", default=None)
    ap.add_argument("--quick", action="store_true", help="few shapes (default on CPU devices)")
    ap.add_argument("--full", action="store_true", help="every shape and the whole network even on a CPU device")
    args = ap.parse_args()
    dev = gpuc.open_device(args.device)
    info = dev.describe()
    why = missing(REQUIRES, dev)
    print(f"device: {info['name']} ({info['type']}, Vulkan {info['api_version']}), subgroup size "
          f"{info['subgroup_size']}, cooperative-matrix entries: {len(info['cooperative_matrix'])}")
    if why:
        print(f"device {info['name']!r} lacks the cooperative-matrix path ({why}): checking the plain path only")
    quick = args.quick or (info["type"] == "CPU" and not args.full)
    shapes = model_shapes(find_model(args.model))
    if quick:
        shapes = shapes[:2] + shapes[-2:]
    if not quick:
        for s in (int(v) for v in args.square.split(",") if v):
            shapes.append(dict(op="FULLY_CONNECTED", x=[s, s], w=[s, s], stride=1, padding=0))
    modes = ["off"] + ([] if why else ["coopmat=force"])
    rng = np.random.default_rng(0)
    results, bad = [], 0
    print(f"{'layer':<44} {'M':>6} {'N':>5} {'K':>5}  {'plain us':>9} {'coopmat us':>10} {'speedup':>7}  max err/max|ref|")
    for spec in shapes:
        model, xs, ref = build(spec, rng)
        data = compile_model(model, cache=False, precision="fp16")
        row = dict(spec)
        k = int(np.prod(spec["w"][1:]))
        row.update(M=ref.shape[0], N=ref.shape[1], K=k)
        for mode in modes:
            out, us, used, shader = measure(data, xs, dev, mode, args.runs)
            err = float(np.abs(out.reshape(ref.shape).astype(np.float64) - ref).max() / max(np.abs(ref).max(), 1e-30))
            tag = "plain" if mode == "off" else "coopmat"
            if tag == "coopmat" and used.get("coopmat") != 1:
                if not worthwhile(ref.shape[0], ref.shape[1], k):
                    continue                  # too small for tensor cores: the bundle has no variant
                print(f"  coopmat variant not used for {spec}: {used}")
                bad += 1
            row[f"{tag}_us"], row[f"{tag}_err"], row[f"{tag}_shader"] = us, err, shader
            bad += err > TOL or not np.isfinite(out).all()
        desc = f"{spec['op']} x{spec['x']} w{spec['w']} s{spec['stride']}"
        pu, cu = row.get("plain_us"), row.get("coopmat_us")
        sp = f"{pu / cu:6.2f}x" if pu and cu else "      -"
        errs = " / ".join(f"{row[t + '_err']:.1e}" for t in ("plain", "coopmat") if t + "_err" in row)
        print(f"{desc:<44} {row['M']:>6} {row['N']:>5} {row['K']:>5}  {pu or float('nan'):9.1f} "
              f"{cu or float('nan'):10.1f} {sp}  {errs}")
        results.append(row)
    if not quick:                        # the whole network: GPU time per run with and without variants
        data = compile_model(find_model(args.model), precision="fp16")
        from gpuc.runtime.bundle import read_bundle
        b = read_bundle(data)
        x = np.random.default_rng(1).uniform(-1, 1, b.tensors[b.inputs[0]].shape).astype(np.float32)
        for mode in ["off"] + ([] if why else ["coopmat=force"]):
            os.environ["GPUC_VARIANTS"] = mode
            with gpuc.load(data, device=dev) as m:
                if m.timestamps:
                    p = profile(m, [x], runs=args.runs)
                    print(f"{Path(args.model).name} fp16, variants {mode}: GPU {p['run_gpu_ms']:.3f} ms per run "
                          f"(sum of dispatches {p['sum_dispatch_ms']:.3f} ms; {m.bundle.stats.get('variants_used')})")
    dev.close()
    if args.json:
        Path(args.json).write_text(json.dumps({"device": info, "rows": results}, indent=1))
    tot = [(r["plain_us"], r["coopmat_us"]) for r in results if r.get("plain_us") and r.get("coopmat_us")]
    if tot:
        print(f"sum over shapes: plain {sum(p for p, _ in tot):.1f} us, coopmat {sum(c for _, c in tot):.1f} us")
    print("PASS" if not bad else f"FAIL: {bad} result(s) out of tolerance {TOL} or variant unused")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
