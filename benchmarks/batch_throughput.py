"""Batch throughput (issue 14): gpuc batch-native --max-batch bundles against the batch-1 bundle, per
model and precision, with each item checked against LiteRT CPU.

    python -m benchmarks.batch_throughput MODEL.tflite ... [--batch 32] [--runs 20] [--precisions fp32,fp16]
                                          [--check 2] [--json OUT]

Per model: compile the batch-1 bundle and a --max-batch B bundle; time run() (numpy in, numpy out:
median ms) at batch 1 and batch B; report dispatches of both (equal when batch-native), items per
second, and max|gpuc - LiteRT| / max|LiteRT| over the first `--check` items (LiteRT CPU interpreter,
one item at a time) plus whether the top-1 class agrees.  Pair with the PyTorch peer rows of
benchmarks/harness.py (or ../shared/tools/torch_peers.py) from the same call for ratios.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

import gpuc
from gpuc.runtime.bundle import read_bundle

from benchmarks.timing import once, timed


def litert(path: str, x: np.ndarray) -> np.ndarray:
    from ai_edge_litert.interpreter import Interpreter
    # one thread: XNNPACK's idle workers spin for a while after invoke and would slow the next timings
    it = Interpreter(model_path=path, num_threads=1)
    it.allocate_tensors()
    it.set_tensor(it.get_input_details()[0]["index"], x)
    it.invoke()
    return it.get_tensor(it.get_output_details()[0]["index"])


def one(path: str, batch: int, precision: str, runs: int, check: int) -> dict:
    (b1, bn), compile_s = once(lambda: (gpuc.compile(path, precision=precision),
                                        gpuc.compile(path, precision=precision, max_batch=batch)))
    rb = read_bundle(bn)
    row = {"model": Path(path).stem, "precision": precision, "batch": batch,
           "batch_mode": rb.stats.get("batch"), "batch_refusal": rb.stats.get("batch_refusal"),
           "dispatches_b1": len(read_bundle(b1).dispatches), "dispatches_bn": len(rb.dispatches),
           "compile_s": round(compile_s, 1)}
    with gpuc.load(b1) as m1, gpuc.load(bn) as mn:
        spec = m1.inputs[0]
        x = np.random.default_rng(0).uniform(-1, 1, (batch,) + tuple(spec.shape[1:])).astype(spec.dtype)
        row["device"] = m1.device.name
        row["b1_ms"] = timed(lambda: m1.run([x[:1]]), runs)["median_ms"]
        row["bn_ms"] = timed(lambda: mn.run([x]), runs)["median_ms"]
        row["bn_gpu_ms"] = mn.last_gpu_ms
        row["items_per_s"] = batch / row["bn_ms"] * 1e3
        out = mn.run([x])[0]
        errs, top1 = [], []
        for i in range(min(check, batch)):
            ref = litert(path, x[i:i + 1])
            errs.append(float(np.abs(out[i:i + 1].astype(np.float64) - ref).max() / max(np.abs(ref).max(), 1e-30)))
            top1.append(bool(np.argmax(out[i]) == np.argmax(ref[0])))
        row["max_rel_err"] = max(errs) if errs else None
        row["top1_same"] = all(top1) if top1 else None
    return row


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("models", nargs="+")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--precisions", default="fp32,fp16")
    ap.add_argument("--check", type=int, default=2)
    ap.add_argument("--json")
    a = ap.parse_args()
    rows = []
    for path in a.models:
        for prec in a.precisions.split(","):
            try:
                r = one(path, a.batch, prec, a.runs, a.check)
            except Exception as e:      # one model's failure is a row, not the end of the table
                r = {"model": Path(path).stem, "precision": prec, "error": f"{type(e).__name__}: {e}"[:300]}
            rows.append(r)
            print(json.dumps(r), flush=True)
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
