"""Does run_async overlap CPU work with GPU work?  N runs, each with `--cpu-ms` of host work
(input preparation), done (a) one after another with run() and (b) pipelined with run_async().

    python -m benchmarks.async_overlap MODEL_OR_BUNDLE [--runs 50] [--cpu-ms 0.5]
"""
import argparse
import time

import numpy as np

import gpuc

from benchmarks.timing import once


def busy(ms):
    end = time.perf_counter() + ms / 1e3
    while time.perf_counter() < end:
        pass


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("path")
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--cpu-ms", type=float, default=0.5)
    ap.add_argument("--device")
    a = ap.parse_args()
    bundle = gpuc.compile(a.path) if a.path.endswith(".tflite") else a.path
    with gpuc.load(bundle, device=a.device) as m:
        xs = [np.random.default_rng(0).uniform(-1, 1, s.shape).astype(s.dtype) for s in m.inputs]
        ref = m.run(xs)
        for wait in ("passive", "active"):
            def sequential():
                for _ in range(a.runs):
                    busy(a.cpu_ms)
                    m.run(xs, wait=wait)

            def pipelined():
                pending = None
                for _ in range(a.runs):
                    busy(a.cpu_ms)
                    h = m.run_async(xs)
                    if pending is not None:
                        pending.wait(wait)
                    pending = h
                return pending.wait(wait)
            seq = once(sequential)[1]
            out, pipe = once(pipelined)
            assert all(np.array_equal(x, y) for x, y in zip(out, ref))
            print(f"{m.device.name} [{wait}]: {a.runs} runs with {a.cpu_ms} ms host work each: sequential "
                  f"{seq * 1e3 / a.runs:.3f} ms/run, pipelined {pipe * 1e3 / a.runs:.3f} ms/run "
                  f"({seq / pipe:.2f}x)")


if __name__ == "__main__":
    main()
