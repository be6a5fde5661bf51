"""Cost of a bundle's program (runtime/program.py) on a real GPU: host round trips and WHILE loops.

    python benchmarks/program_overhead.py [--n 65536] [--runs 200] [--json out.json]

Rows (median / p90 ms of `run()`, including input/output copies):
* gpu-only:   x -> MUL -> ABS -> ABS -> MUL            (one command buffer)
* one-trip:   x -> MUL -> CAST int64 -> CAST f32 -> MUL  (the two CASTs on the CPU: one host round trip)
* while-K:    a WHILE loop of K iterations of a MUL+ADD body (one condition read-back per iteration)
and the derived per-round-trip and per-iteration overheads.  Prints one JSON document.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from helpers.builder import ModelBuilder, with_subgraphs  # noqa: E402


def chain(n: int, cpu: bool) -> bytes:
    mb = ModelBuilder()
    x = mb.input("x", [n])
    a = mb.tensor("a", [n])
    mb.op("MUL", [x, mb.const("k", np.full([n], 1.5, np.float32))], [a])
    mid = mb.tensor("m", [n], "int64" if cpu else "float32")
    mb.op("CAST" if cpu else "ABS", [a], [mid])
    b = mb.tensor("b", [n])
    mb.op("CAST" if cpu else "ABS", [mid], [b])
    y = mb.tensor("y", [n])
    mb.op("MUL", [b, mb.const("k2", np.full([n], 0.5, np.float32))], [y])
    mb.output(y)
    return mb.finish()


def loop(n: int, iters: int) -> bytes:
    mb = ModelBuilder()
    x = mb.input("x", [n])
    i0 = mb.const("i0", np.zeros([1], np.int32))
    oi, ox = mb.tensor("oi", [1], "int32"), mb.tensor("ox", [n])
    mb.op("WHILE", [i0, x], [oi, ox], cond_subgraph_index=1, body_subgraph_index=2)
    mb.output(ox)
    cb = ModelBuilder()
    ci, _ = cb.input("i", [1], "int32"), cb.input("x", [n])
    c = cb.tensor("c", [1], "bool")
    cb.op("LESS", [ci, cb.const("lim", np.full([1], iters, np.int32))], [c])
    cb.output(c)
    bb = ModelBuilder()
    bi, bx = bb.input("i", [1], "int32"), bb.input("x", [n])
    ni, h, nx = bb.tensor("ni", [1], "int32"), bb.tensor("h", [n]), bb.tensor("nx", [n])
    bb.op("ADD", [bi, bb.const("one", np.ones([1], np.int32))], [ni])
    bb.op("MUL", [bx, bb.const("half", np.full([n], 0.5, np.float32))], [h])
    bb.op("ADD", [h, bb.const("c1", np.ones([n], np.float32))], [nx])
    bb.output(ni)
    bb.output(nx)
    return with_subgraphs(mb, cb, bb)


def timed(model: bytes, n: int, runs: int) -> dict:
    import gpuc
    x = np.random.default_rng(0).uniform(-1, 1, [n]).astype(np.float32)
    with gpuc.load(gpuc.compile(model, cache=False)) as m:
        for _ in range(5):
            m.run([x])
        ts = []
        for _ in range(runs):
            t0 = time.perf_counter()
            m.run([x])
            ts.append((time.perf_counter() - t0) * 1e3)
        dev = m.device.name
    ts.sort()
    return {"median_ms": statistics.median(ts), "p90_ms": ts[int(0.9 * (len(ts) - 1))], "device": dev}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=65536)
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    rows = {"gpu-only": timed(chain(a.n, False), a.n, a.runs), "one-trip": timed(chain(a.n, True), a.n, a.runs)}
    for k in (1, 10, 100):
        rows[f"while-{k}"] = timed(loop(a.n, k), a.n, max(10, a.runs // k))
    rep = {"n": a.n, "rows": rows,
           "round_trip_overhead_ms": rows["one-trip"]["median_ms"] - rows["gpu-only"]["median_ms"],
           "per_iteration_ms": (rows["while-100"]["median_ms"] - rows["while-10"]["median_ms"]) / 90}
    text = json.dumps(rep, indent=1)
    print(text)
    if a.json:
        Path(a.json).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
