"""One --dynamic bundle at several sizes against a bundle compiled for each size (--input-shape):
compile time, and the median run time at each size, for the builder sequence and attention models,
the tiny conv net and (with --mobilenet PATH) MobileNetV2 with dynamic height and width.

    python -m benchmarks.archive.dynamic_dims [--runs N] [--mobilenet models/mobilenet_v2_224_f32.tflite]

Prints one table per model and writes JSON lines with --json.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))

import gpuc  # noqa: E402
from gpuc.errors import GpucError  # noqa: E402
from helpers.seqmodels import attention_model, conv_net, sequence_model  # noqa: E402


def timed_compile(model, **opts):
    t = time.perf_counter()
    b = gpuc.compile(model, cache=False, **opts)
    return b, time.perf_counter() - t


def median_run(m, x, runs):
    m.run([x])                      # (first run: records the size's command buffer, warms the driver)
    ts = []
    for _ in range(runs):
        if m.has_state:
            m.reset_state()
        t = time.perf_counter()
        m.run([x])
        ts.append(time.perf_counter() - t)
    return statistics.median(ts)


def case(name, model, specs, shape_of, sizes, input_name, runs, make_input):
    dyn, t_dyn = timed_compile(model, dynamic=specs)
    rows = []
    with gpuc.open_device() as dev:
        with gpuc.load(dyn, device=dev) as m:
            dyn_runs = {s: median_run(m, make_input(shape_of(s)), runs) for s in sizes}
        for s in sizes:
            row = dict(model=name, size=s, dynamic_run_ms=dyn_runs[s] * 1e3, fixed_run_ms=None,
                       fixed_compile_s=None, dynamic_compile_s=t_dyn)
            try:
                fixed, row["fixed_compile_s"] = timed_compile(model, input_shapes={input_name: list(shape_of(s))})
            except GpucError:          # (a model without -1 in its signature: only its own size)
                fixed = None
            if fixed is not None:
                with gpuc.load(fixed, device=dev) as m:
                    row["fixed_run_ms"] = median_run(m, make_input(shape_of(s)), runs) * 1e3
            rows.append(row)
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--mobilenet", default=None)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    rng = np.random.default_rng(0)
    toks = lambda shape: rng.integers(0, 16, shape).astype(np.int32)  # noqa: E731
    img = lambda shape: rng.uniform(-1, 1, shape).astype(np.float32)  # noqa: E731
    cases = [("sequence (GATHER, Conv1D, LSTM, MEAN, FC)", sequence_model(t=64), ["tokens:1<=64"],
              lambda s: (1, s), (1, 7, 33, 64), "tokens", toks),
             ("attention (BATCH_MATMUL, SOFTMAX, LayerNorm)", attention_model(t=64), ["tokens:1<=64"],
              lambda s: (1, s), (1, 7, 33, 64), "tokens", toks),
             ("conv net, H and W dynamic", conv_net(32, 32), ["input:1<=32", "input:2<=32"],
              lambda s: (1, s, s, 3), (8, 16, 32), "input", img)]
    if a.mobilenet:
        cases.append(("mobilenet_v2_224_f32, H and W dynamic", open(a.mobilenet, "rb").read(),
                      ["input:1<=320", "input:2<=320"], lambda s: (1, s, s, 3), (160, 224, 320), "input", img))
    gpuc.compile(conv_net(5, 5), cache=False)       # (glslang's start-up is not a compile time)
    device = None
    for c in cases:
        rows = case(*c[:6], runs=a.runs, make_input=c[6])
        if device is None:
            with gpuc.open_device() as d:
                device = d.name
        fixed = [r for r in rows if r["fixed_compile_s"] is not None]
        print(f"\n{c[0]} ({device}): one --dynamic bundle compiled in {rows[0]['dynamic_compile_s']:.2f} s; "
              f"a bundle per size {sum(r['fixed_compile_s'] for r in fixed):.2f} s for {len(fixed)} sizes")
        print(f"{'size':>6} {'dynamic ms':>11} {'fixed ms':>9} {'fixed compile s':>16}")
        f = lambda v, p: "n/a" if v is None else f"{v:.{p}f}"  # noqa: E731
        for r in rows:
            print(f"{r['size']:>6} {r['dynamic_run_ms']:>11.3f} {f(r['fixed_run_ms'], 3):>9} "
                  f"{f(r['fixed_compile_s'], 2):>16}")
            if a.json:
                print(json.dumps(dict(r, device=device)))


if __name__ == "__main__":
    main()
