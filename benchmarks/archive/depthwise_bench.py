"""GPU time of single DEPTHWISE_CONV_2D layers under the old plan (TILE=0: 4 channels x PX pixels of a
row) and the new one (compiler/ops/depthwise_plan.py), plus forced tiles, in one process.

One model per (batch, precision, plan) holds every layer of the list side by side: input x_i ->
x2_i = ADD(x_i, x_i) (a device-computed tensor, stored fp16 under --precision fp16) -> y_i =
DEPTHWISE_CONV_2D(x2_i) (3x3/5x5/7x7 with bias) -> MEAN(y_i) over H, W (so y_i is an internal tensor,
not an fp32 model output).  Each layer's dispatch time comes from runtime/profile.py timestamps
after ~1 s of warm-up runs (each plan), with a barrier between every two dispatches (GPUC_ALL_BARRIERS=1); GB/s counts the x2 read and y write once (DRAM traffic).  Each layer's
output is checked against the float64 numpy reference (fp32: 1e-4 x max|ref|; fp16: 1e-2).

    python -m benchmarks.archive.depthwise_bench [--batches 1,32] [--precision fp32,fp16] [--plans old,new,t1:4x8,...]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

# a barrier between every two dispatches, so each timestamp interval holds its own dispatch only (the
# layers here are independent branches, which the runtime would otherwise let overlap)
os.environ["GPUC_ALL_BARRIERS"] = "1"
HERE = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(HERE / "tests"))

import gpuc  # noqa: E402
from gpuc.compiler import compile_model  # noqa: E402
from gpuc.compiler.ops import conv as conv_mod  # noqa: E402
from gpuc.compiler.ops import depthwise_plan as dp  # noqa: E402
from gpuc.runtime.bundle import read_bundle  # noqa: E402
from gpuc.runtime.profile import profile  # noqa: E402
from helpers.builder import ModelBuilder  # noqa: E402

# (name, H, W, C, K, stride): input sizes of the layer
SHAPES = [
    ("cnx 56x56x96 k7", 56, 56, 96, 7, 1), ("cnx 28x28x192 k7", 28, 28, 192, 7, 1),
    ("cnx 14x14x384 k7", 14, 14, 384, 7, 1), ("cnx 7x7x768 k7", 7, 7, 768, 7, 1),
    ("mv2 112x112x32 k3", 112, 112, 32, 3, 1), ("mv2 112x112x96 k3 s2", 112, 112, 96, 3, 2),
    ("mv2 56x56x144 k3", 56, 56, 144, 3, 1), ("mv2 14x14x576 k3", 14, 14, 576, 3, 1),
    ("eff 56x56x144 k5 s2", 56, 56, 144, 5, 2), ("eff 28x28x240 k5", 28, 28, 240, 5, 1),
    ("eff 14x14x672 k5", 14, 14, 672, 5, 1), ("eff 7x7x1152 k5", 7, 7, 1152, 5, 1),
]
_PLAN_OF = conv_mod.plan_depthwise


DW_PLAN = None      # the CompileOptions.dw_plan of the plan being timed


def set_plan(plan: str) -> None:
    """old: today's TILE=0 plan; new: the planner; tT:RYxPX: that plan forced for every layer."""
    global DW_PLAN
    DW_PLAN = None
    conv_mod.plan_depthwise = _PLAN_OF
    if plan == "old":
        conv_mod.plan_depthwise = lambda *a, **k: _PLAN_OF(*a, old=True)
    elif plan != "new":
        t, tile = plan[1:].split(":")          # t0:1xPX, t1:RYxPX, t1s:RYxPX (one channel per invocation)
        ry, px = map(int, tile.split("x"))
        DW_PLAN = dp.DwPlan(int(t[0]), ry, px, scalar=t.endswith("s"))


def ref_dw(x, w, b, s):
    """float64 NHWC depthwise conv, SAME padding, multiplier 1."""
    n, h, wd, c = x.shape
    k = w.shape[1]
    oh, ow = -(-h // s), -(-wd // s)
    ph = max((oh - 1) * s + k - h, 0) // 2
    pw = max((ow - 1) * s + k - wd, 0) // 2
    xp = np.zeros((n, h + k + s, wd + k + s, c))
    xp[:, ph:ph + h, pw:pw + wd] = x
    out = np.zeros((n, oh, ow, c)) + b
    for ky in range(k):
        for kx in range(k):
            out += xp[:, ky:ky + (oh - 1) * s + 1:s, kx:kx + (ow - 1) * s + 1:s] * w[0, ky, kx]
    return out


def build(shapes, batch: int, rng):
    mb = ModelBuilder()
    feeds, refs = [], []
    for i, (name, h, w, c, k, s) in enumerate(shapes):
        x = mb.input(f"x{i}", [batch, h, w, c])
        x2 = mb.tensor(f"x2_{i}", [batch, h, w, c])
        mb.op("ADD", [x, x], [x2])
        wt = rng.normal(0, 1 / k, (1, k, k, c)).astype(np.float32)
        bt = rng.normal(0, 0.1, (c,)).astype(np.float32)
        oh, ow = -(-h // s), -(-w // s)
        y = mb.tensor(f"dw{i}", [batch, oh, ow, c])
        mb.op("DEPTHWISE_CONV_2D", [x2, mb.const(f"w{i}", wt), mb.const(f"b{i}", bt)], [y], padding="SAME",
              stride_h=s, stride_w=s, depth_multiplier=1)
        m = mb.tensor(f"mean{i}", [batch, 1, 1, c])
        mb.op("MEAN", [y, mb.const(f"ax{i}", np.array([1, 2], np.int32))], [m], keep_dims=True)
        mb.output(m)
        xv = rng.standard_normal((batch, h, w, c)).astype(np.float32)
        feeds.append(xv)
        refs.append(ref_dw(2.0 * xv.astype(np.float64), wt, bt, s).mean(axis=(1, 2), keepdims=True))
    return mb.finish(), feeds, refs


def time_plan(model, feeds, refs, shapes, batch, prec, plan, dev, runs, warm_s):
    set_plan(plan)
    data = compile_model(model, cache=False, precision=prec, dw_plan=DW_PLAN)
    b = read_bundle(data)
    dtypes = {t.name: t.dtype for t in b.tensors}
    with gpuc.load(data, device=dev) as m:
        outs = m.run(feeds)
        t0 = time.time()
        while time.time() - t0 < warm_s:     # a GPU left idle while the host compiled clocks down
            m.run(feeds)
        rows = profile(m, feeds, runs=runs)["rows"]
    res = {}
    tol = 1e-4 if prec == "fp32" else 1e-2
    for i, (name, h, w, c, k, s) in enumerate(shapes):
        (r,) = [r for r in rows if r["op"] == f"DEPTHWISE_CONV_2D (operator #{3 * i + 1})"] or [None]
        err = float(np.abs(outs[i] - refs[i]).max() / max(np.abs(refs[i]).max(), 1e-30))
        es = 2 if dtypes.get(f"dw{i}") == "float16" else 4
        nbytes = batch * (h * w + -(-h // s) * -(-w // s)) * c * es
        us = r["us"] if r else float("nan")
        res[name] = dict(us=us, gbs=nbytes / (us * 1e-6) / 1e9 if r and us > 0 else float("nan"), err=err, ok=err <= tol,
                         dtype=dtypes.get(f"dw{i}"), shader=r["shader"] if r else "?")
    return res


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batches", default="1,32")
    ap.add_argument("--precision", default="fp32,fp16")
    ap.add_argument("--plans", default="old,new")
    ap.add_argument("--shapes", default="all", help="all, or comma-separated indices into SHAPES")
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--warm", type=float, default=1.0, help="seconds of runs before each plan's timing")
    ap.add_argument("--device", default=None)
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    shapes = SHAPES if a.shapes == "all" else [SHAPES[int(i)] for i in a.shapes.split(",")]
    plans = a.plans.split(",")
    dev = gpuc.open_device(a.device)
    print(f"device: {dev.describe()['name']}  date {time.strftime('%Y-%m-%d %H:%M')}  plans {plans}")
    out, bad = [], 0
    for batch in map(int, a.batches.split(",")):
        model, feeds, refs = build(shapes, batch, np.random.default_rng(batch))
        for prec in a.precision.split(","):
            res = {}
            for plan in plans:
                res[plan] = time_plan(model, feeds, refs, shapes, batch, prec, plan, dev, a.runs, a.warm)
            print(f"\n== batch {batch} {prec}   us (GB/s)" + "".join(f" | {p:>15}" for p in plans))
            for name, *_ in shapes:
                cells = []
                for p in plans:
                    r = res[p][name]
                    cells.append(f"{r['us']:7.1f} ({r['gbs']:5.0f}){'' if r['ok'] else '!'}")
                    bad += not r["ok"]
                    out.append(dict(batch=batch, precision=prec, plan=p, layer=name, **r))
                print(f"   {name:22s}" + "".join(f" | {c:>15}" for c in cells))
            tot = {p: sum(res[p][n]["us"] for n, *_ in shapes) for p in plans}
            print(f"   {'sum':22s}" + "".join(f" | {tot[p]:7.1f}        " for p in plans))
            sys.stdout.flush()
    set_plan("new")
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=1))
    if bad:
        print(f"{bad} results out of tolerance (marked !)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
