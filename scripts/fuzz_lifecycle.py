"""Fuzz the runtime's lifecycle: runs from several threads while another thread closes the model
(or its device) at a random moment.

    python scripts/fuzz_lifecycle.py --cases 200 [--seed 0] [--timeout 30] [--threads 8] [--target model|device]

Each case loads a tiny model, starts N threads (2..8, or --threads) doing run / run_async + wait /
run_in_place through input and output views / keep_on_device runs, and closes the model (or the
device, sometimes from two threads at once) after a random delay.  Every run must return outputs
bit-equal to a reference run, or raise a GpucError saying "model is closed"; after the close, the
handles, views and device tensors each thread kept must do the same.  Anything else (a wrong output,
another exception) is a failure; so is a crash of the worker process or a case that takes longer
than `timeout` (a hang).  Cases run in worker processes; a worker that dies or hangs is replaced,
and the next one resumes after the failed case.
"""
from __future__ import annotations

import argparse
import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SHAPE = (4, 8)
CLOSED = "model is closed"
OPS = ("run", "async", "in_place", "keep", "pending")


def model_bytes() -> bytes:
    """y = a * b + a, two [4, 8] float32 inputs: a handful of dispatches, enough to overlap a close."""
    sys.path.insert(0, str(ROOT / "tests"))
    from helpers.builder import ModelBuilder
    mb = ModelBuilder()
    a, b = mb.input("a", SHAPE), mb.input("b", SHAPE)
    p, y = mb.tensor("p", SHAPE), mb.tensor("y", SHAPE)
    mb.op("MUL", [a, b], [p])
    mb.op("ADD", [p, a], [y])
    mb.output(y)
    return mb.finish()


# -- one case, in a worker --------------------------------------------------------------------------
class Tally:
    def __init__(self):
        self.lock = threading.Lock()
        self.completed = self.refused = 0
        self.failures: list[str] = []

    def ok(self):
        with self.lock:
            self.completed += 1

    def error(self, what: str, e: BaseException) -> None:
        """`e` ended `what`: a refusal if it says the model is closed, else a failure."""
        from gpuc.errors import GpucError
        with self.lock:
            if isinstance(e, GpucError) and CLOSED in str(e):
                self.refused += 1
            else:
                self.failures.append(f"{what}: {type(e).__name__}: {str(e)[:200]}")

    def check(self, what: str, outs, ref) -> None:
        if len(outs) == len(ref) and all(np.array_equal(np.asarray(o), r) for o, r in zip(outs, ref)):
            self.ok()
        else:
            with self.lock:
                self.failures.append(f"{what}: output differs from the reference")


def _worker_thread(m, k: int, rng, xs, ref, tally: Tally, stop: threading.Event, kept: list):
    """Runs until the model refuses (closed) or `stop`; keeps a pending handle and views for later."""
    from gpuc.errors import GpucError
    n_slots = 2
    while not stop.is_set():
        op = OPS[int(rng.integers(0, len(OPS)))]
        try:
            if op == "run":
                tally.check(op, m.run(xs), ref)
            elif op == "async":
                hs = [m.run_async(xs) for _ in range(int(rng.integers(1, 3)))]
                for h in hs:
                    tally.check(op, h.wait(), ref)
            elif op == "pending":                  # waited for after the close
                kept.append(("handle", m.run_async(xs)))
            elif op == "keep":
                (t,) = m.run(xs, keep_on_device=True)
                kept.append(("tensor", t))
                tally.check(op, [t.numpy()], ref)
            else:
                slot = k % n_slots
                try:
                    vin = [m.input_view(i, slot) for i in range(len(xs))]
                    for v, x in zip(vin, xs):
                        v[...] = x
                    m.run_in_place(slot)
                except GpucError as e:
                    if "in flight" in str(e):      # another thread's run holds the slot: not a run
                        continue
                    raise
                vout = m.output_view(0, slot)
                kept.append(("views", vin + [vout]))
                tally.check(op, [vout.copy()], ref)   # another in-place thread may share the slot: copy
        except Exception as e:  # noqa: BLE001 - classified
            tally.error(op, e)
            if CLOSED in str(e):
                return


def _after_close(kept: list, xs, ref, tally: Tally) -> None:
    """What the threads kept, used after the close: correct outputs or "model is closed"."""
    for kind, obj in kept:
        try:
            if kind == "handle":
                tally.check("handle after close", obj.wait(), ref)
            elif kind == "tensor":
                tally.check("device tensor after close", [obj.numpy()], ref)
            else:
                obj[0][...] = xs[0]                      # write a stale input view
                tally.error("view after close", AssertionError("writing a view after close did not raise"))
        except Exception as e:  # noqa: BLE001 - classified
            tally.error(f"{kind} after close", e)
    for kind, obj in kept:
        if kind == "views":                              # and through plain arrays: no crash, no error
            np.asarray(obj[0]).reshape(-1)[:1] = 0
            break


def one_case(bundle: bytes, seed: int, k: int, shared, threads: int | None, target: str | None) -> dict:
    import gpuc
    rng = np.random.default_rng([seed, k])
    n = threads or int(rng.integers(2, 9))
    target = target or ("model" if rng.random() < 0.5 else "device")
    dev = gpuc.open_device() if target == "device" else shared
    m = gpuc.load(bundle, device=dev)
    tally, stop = Tally(), threading.Event()
    xs = [rng.uniform(-2, 2, SHAPE).astype(np.float32) for _ in range(2)]
    ref = m.run(xs)
    kept = [[] for _ in range(n)]
    ts = [threading.Thread(target=_worker_thread, args=(m, i, np.random.default_rng([seed, k, i]), xs, ref,
                                                        tally, stop, kept[i]), daemon=True) for i in range(n)]
    for t in ts:
        t.start()
    time.sleep(float(rng.uniform(0, 0.15)))
    closer = (m if target == "model" else dev).close
    second = threading.Thread(target=closer, daemon=True) if rng.random() < 0.3 else None
    if second:
        second.start()
    closer()
    for t in ts:
        t.join()
    if second:
        second.join()
    stop.set()
    for lst in kept:
        _after_close(lst, xs, ref, tally)
    try:
        m.run(xs)
        tally.failures.append("run after close did not raise")
    except Exception as e:  # noqa: BLE001 - classified
        tally.error("run after close", e)
    if target == "device":
        dev.close()
    return {"case": k, "threads": n, "target": target, "completed": tally.completed,
            "closed": tally.refused, "failures": tally.failures}


def worker(bundle_path: str, seed: int, first: int, count: int, threads: int | None, target: str | None,
           timeout: float) -> None:
    import faulthandler
    import gpuc
    faulthandler.enable()
    bundle = Path(bundle_path).read_bytes()
    shared = gpuc.open_device()
    for k in range(first, first + count):
        print(f"START {k}", flush=True)
        faulthandler.dump_traceback_later(timeout, exit=True)     # a hang: every thread's stack, then exit
        try:
            res = one_case(bundle, seed, k, shared, threads, target)
        except Exception as e:  # noqa: BLE001 - the case's own set-up failed
            res = {"case": k, "completed": 0, "closed": 0, "failures": [f"case: {type(e).__name__}: {e}"]}
        faulthandler.cancel_dump_traceback_later()
        print("END " + json.dumps(res), flush=True)
    shared.close()


# -- the driver -------------------------------------------------------------------------------------
def _reader(stream, q):
    for line in stream:
        q.put(line)
    q.put(None)


def run(cases: int, seed: int = 0, timeout: float = 30.0, log=print, threads: int | None = None,
        target: str | None = None) -> dict:
    """Run `cases` lifecycle cases; returns counts: cases, completed (runs with correct outputs),
    closed ("model is closed" refusals), crashes, hangs, failures [(case, what)], seconds."""
    import gpuc
    t0 = time.perf_counter()
    out = {"cases": cases, "completed": 0, "closed": 0, "crashes": 0, "hangs": 0, "failures": []}
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "lifecycle.gpuc")
        gpuc.compile(model_bytes(), output=path, cache=False)
        k = 0
        while k < cases:
            cmd = [sys.executable, __file__, "--worker", path, str(seed), str(k), str(cases - k),
                   str(threads or 0), target or "", str(timeout)]
            p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            q: queue.Queue = queue.Queue()
            err: list = []
            threading.Thread(target=_reader, args=(p.stdout, q), daemon=True).start()
            threading.Thread(target=lambda: err.extend(p.stderr), daemon=True).start()
            started = None
            while True:
                try:
                    line = q.get(timeout=timeout + 30)   # the worker's own watchdog fires at `timeout`
                except queue.Empty:
                    line = "HUNG"
                if line is None or line == "HUNG":
                    if line == "HUNG":
                        p.kill()
                    rc = p.wait()
                    if started is None and k >= cases and rc == 0:
                        break
                    if started is None:
                        out["failures"].append((k, f"worker failed (exit {rc}): {''.join(err)[-500:]}"))
                        k = cases
                    else:
                        hung = line == "HUNG" or "Timeout (" in "".join(err)
                        out["hangs" if hung else "crashes"] += 1
                        out["failures"].append((started, f"{'hang' if hung else 'crash'} (exit {rc}): "
                                                         f"{''.join(err)[-1500:]}"))
                        k = started + 1
                    break
                if line.startswith("START "):
                    started = int(line.split()[1])
                elif line.startswith("END "):
                    res = json.loads(line[4:])
                    out["completed"] += res["completed"]
                    out["closed"] += res["closed"]
                    out["failures"] += [(res["case"], f) for f in res["failures"]]
                    started, k = None, res["case"] + 1
                    if k % 20 == 0 or k == cases:
                        log(f"  {k}/{cases} cases: {out['completed']} runs correct, {out['closed']} "
                            f"refused (closed), {len(out['failures'])} failures")
    out["seconds"] = round(time.perf_counter() - t0, 1)
    return out


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        path, seed, first, count, threads, target, timeout = sys.argv[2:9]
        worker(path, int(seed), int(first), int(count), int(threads) or None, target or None, float(timeout))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=30.0, help="seconds a case may take (else: a hang)")
    ap.add_argument("--threads", type=int, default=None, help="threads per case (default: random 2..8)")
    ap.add_argument("--target", choices=("model", "device"), default=None,
                    help="what the closing thread closes (default: random)")
    a = ap.parse_args()
    res = run(a.cases, a.seed, a.timeout, log=lambda s: print(s, file=sys.stderr, flush=True),
              threads=a.threads, target=a.target)
    print(json.dumps({k: v for k, v in res.items() if k != "failures"}))
    for case, what in res["failures"][:20]:
        print(f"case {case}: {what}")
    return 1 if res["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
