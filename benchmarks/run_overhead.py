"""Where the host time of one run() goes, next to the in-place path (the part that is not GPU work).

    python -m benchmarks.run_overhead MODEL.tflite|BUNDLE [--batch 32] [--precisions fp32,fp16]
                                      [--variants device:0,device:1,device:0::on,cached:0] [--runs 100]
                                      [--device N|NAME] [--json OUT]

A .tflite is compiled per precision (with --max-batch B when --batch B > 1); a bundle runs as it is.
Per precision and variant (UPLOAD:THREADS[:CHUNK[:PIPELINE[:PARTS[:IMPORT]]]] = GPUC_UPLOAD_MEMORY, GPUC_COPY_THREADS
(0: automatic), GPUC_UPLOAD_CHUNK_BYTES and GPUC_UPLOAD_PIPELINE (the chunked, overlapped upload of
runtime/upload.py), GPUC_COPY_CHUNKS (parts per copy thread, handed out as threads come; 1: one fixed
part each), GPUC_HOST_IMPORT (inputs read from the caller's memory, runtime/host_import.py: auto, on,
off); an empty field keeps the setting), one row of medians: run() (numpy in, numpy out), the in-place path (input_view written once,
then run_in_place(batch=B)), their ratio and run()'s ratio to the fastest in-place row of the
precision, the pieces run() adds -- input normalisation, the copy into mapped staging memory (split
over the copy threads, and on one thread), the copy of the outputs into new arrays -- the GPU time
of a run, and whether run()'s outputs equal the in-place outputs.  At batch 1 (bundle without --max-batch) also a bare
submit+wait of the recorded command buffer and of an empty one (the floor any Vulkan runtime pays
from Python).
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from benchmarks.timing import in_place_gpu_ms, timed

PHASES = ("before_copy", "copy", "to_submit", "submit", "to_wait", "wait", "after_wait")


def med_ms(fn, runs, warmup_s=0.2):
    return timed(fn, runs, warmup_s=warmup_s)["median_ms"]


def phases(fn, runs, model, gpu) -> dict:
    """Median and p90 ms of each phase of `runs` calls of fn (a run() or run_in_place of `model`),
    from marks set by wrappers of Copier.copy_into, Device.submit and Device.wait (the phases in
    PHASES: an in-place run has no copy), and the last run's GPU time (gpu()): where run()'s time
    beyond the in-place path goes, as one run spends it."""
    import statistics
    import time
    from gpuc.runtime import device as dev, hostcopy
    marks = {}
    real = {(dev.Device, "submit"): dev.Device.submit, (dev.Device, "wait"): dev.Device.wait,
            (hostcopy.Copier, "copy_into"): hostcopy.Copier.copy_into}

    def wrap(cls, name, first, last):
        fn0 = real[(cls, name)]

        def f(*a, **k):
            t = time.perf_counter()
            try:
                return fn0(*a, **k)
            finally:
                if first != "c0" or "s0" not in marks:      # copies after the submit: the outputs'
                    marks.setdefault(first, t)
                    marks[last] = time.perf_counter()
        setattr(cls, name, f)
    wrap(dev.Device, "submit", "s0", "s1")
    wrap(dev.Device, "wait", "w0", "w1")
    wrap(hostcopy.Copier, "copy_into", "c0", "c1")
    per = {k: [] for k in PHASES + ("total", "gpu")}
    try:
        fn()
        for _ in range(runs):
            marks.clear()
            t0 = time.perf_counter()
            fn()
            t1 = time.perf_counter()
            c0, c1 = marks.get("c0", marks["s0"]), marks.get("c1", marks["s0"])
            cut = [t0, c0, c1, marks["s0"], marks["s1"], marks["w0"], marks["w1"], t1]
            for k, a, b in zip(PHASES, cut, cut[1:]):
                per[k].append((b - a) * 1e3)
            per["total"].append((t1 - t0) * 1e3)
        # the last run's GPU time, read once: reading it after every run would spare the next submit
        # the read-back that a run() on the same slot pays (as the harness's timed runs do)
        per["gpu"].append(gpu() or 0.0)
    finally:
        for (cls, name), f in real.items():
            setattr(cls, name, f)
    out = {}
    for k, v in per.items():
        v.sort()
        out[k] = round(statistics.median(v), 4)
        out[k + "_p90"] = round(v[int(0.9 * (len(v) - 1))], 4)
    return out


def bundle_of(path: str, precision: str, batch: int):
    import gpuc
    if path.endswith(".tflite"):
        return gpuc.compile(path, precision=precision, **({"max_batch": batch} if batch > 1 else {}))
    return path


def measure(bundle, batch: int, runs: int, device, floor: bool) -> dict:
    import gpuc
    from gpuc.runtime import iospec, upload
    m = gpuc.load(bundle, device=device)
    try:
        b = batch if m.max_batch > 1 else None
        rng = np.random.default_rng(0)
        xs = [rng.uniform(-1, 1, iospec.item_shape(s, batch, b is not None)).astype(s.dtype) for s in m.inputs]
        run = lambda: m.run(xs)                     # noqa: E731
        outs = run()
        row = {"device": m.device.name, "input_mb": round(sum(x.nbytes for x in xs) / 1e6, 2),
               "copy_threads": m.slots[0].copier.threads, "run_ms": med_ms(run, runs)}
        row["run_gpu_ms"] = m.last_gpu_ms
        row["pipelined"] = any(sl.upload and sl.upload["cmds"] for sl in m.slots)   # runtime/upload.py taken
        row["imported"] = m.imports.count > 0          # inputs read in place (runtime/host_import.py)
        row["staging"] = "device" if upload._staging_in_device_memory(m.device, m.slots[0].in_bytes) else "host"
        for i, x in enumerate(xs):
            m.input_view(i, batch=b)[...] = x
        in_place = lambda: m.run_in_place(batch=b)  # noqa: E731
        in_place()
        row["outputs_equal"] = all(np.array_equal(m.output_view(k, batch=b), o) for k, o in enumerate(outs))
        row["in_place_ms"] = med_ms(in_place, runs)
        # run_in_place leaves last_gpu_ms alone (it gives the last run()'s): read slot 0's timestamps
        from gpuc.runtime import commands
        in_place_gpu = lambda: in_place_gpu_ms(m)   # noqa: E731
        row["gpu_ms"] = in_place_gpu()
        row["ratio"] = row["run_ms"] / row["in_place_ms"]
        sl = m.slots[0]
        views = [r[:batch] for r in sl.in_rows] if b else sl.in_views
        outv = [r[:batch] for r in sl.out_rows] if b else sl.out_views

        def copy_in(copy):
            for v, x in zip(views, xs):
                copy(v, x)
        row["normalize_ms"] = med_ms(lambda: iospec.normalize(m.inputs, xs, m.max_batch, m.device), runs, 0.02)
        row["copy_in_ms"] = med_ms(lambda: copy_in(sl.copier.copy_into), runs)
        row["copy_in_1thread_ms"] = med_ms(lambda: copy_in(lambda v, x: v.__setitem__(Ellipsis, x)), runs, 0.05)
        row["copy_out_ms"] = med_ms(lambda: [sl.copier.copy_out(v) for v in outv], runs, 0.02)
        # one run's phases, run() against the in-place path, and each with an active (spinning) wait
        row["phases_run"] = phases(run, runs, m, lambda: m.last_gpu_ms)
        row["phases_in_place"] = phases(in_place, runs, m, in_place_gpu)
        row["run_active_ms"] = med_ms(lambda: m.run(xs, wait="active"), runs)
        row["in_place_active_ms"] = med_ms(lambda: m.run_in_place(batch=b, wait="active"), runs)
        # what reading the timestamps of a completed run costs (a submit on the slot that holds them
        # reads them first: runtime/slots.py acquire takes the least recently submitted slot instead)
        if sl.pool is not None:
            row["timestamp_read_ms"] = med_ms(lambda: commands.read_ms(m.device, sl.pool, 2), runs, 0.02)
        if floor and m.program is None and getattr(sl, "cmd", None) is not None:
            import vulkan as vk
            d = m.device

            def submit_wait(cmd):
                d.submit(cmd, sl.fence)
                d.wait(sl.fence, active=False)
            row["submit_wait_ms"] = med_ms(lambda: submit_wait(sl.cmd), runs)
            empty = m.recorder.alloc()
            vk.vkBeginCommandBuffer(empty, vk.VkCommandBufferBeginInfo())
            vk.vkEndCommandBuffer(empty)
            row["empty_submit_wait_ms"] = med_ms(lambda: submit_wait(empty), runs)
        return row
    finally:
        m.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--precisions", default="fp32")
    ap.add_argument("--variants", default="device:0,device:1,device:0::on,cached:0,cached:0:0",
                    help="UPLOAD:THREADS[:CHUNK[:PIPELINE[:PARTS[:IMPORT]]]],... (GPUC_UPLOAD_MEMORY device|cached|uncached : "
                         "GPUC_COPY_THREADS, 0 auto : GPUC_UPLOAD_CHUNK_BYTES : GPUC_UPLOAD_PIPELINE auto|on|off : "
                         "GPUC_COPY_CHUNKS, parts per copy thread, 1: fixed parts : GPUC_HOST_IMPORT auto|on|off)")
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--device")
    ap.add_argument("--json")
    a = ap.parse_args()
    from gpuc.runtime import settings
    rows = []
    for prec in a.precisions.split(","):
        bundle = bundle_of(a.model, prec, a.batch)
        mine = []
        for k, var in enumerate(a.variants.split(",")):
            upload, threads, chunk, pipe, parts, imp = (var.split(":") + ["", "", "", "", ""])[:6]
            over = dict(upload_memory=upload, copy_threads=int(threads or 0))
            if parts:
                over["copy_chunks"] = int(parts)
            if chunk:
                over["upload_chunk_bytes"] = int(chunk)
            if pipe:
                over["upload_pipeline"] = pipe
            if imp:
                over["host_import"] = imp
            with settings.override(**over):
                r = measure(bundle, a.batch, a.runs, a.device, floor=(k == 0 and a.batch == 1))
            r.update(model=Path(a.model).stem, precision=prec, batch=a.batch, variant=var)
            mine.append(r)
            print(f"{r['model']} {prec} b{a.batch} {var:<10} run() {r['run_ms']:7.3f} ms  in-place {r['in_place_ms']:7.3f} ms"
                  f"  ratio {r['ratio']:.3f}  | GPU {r['gpu_ms'] or 0:6.3f} (run() {r['run_gpu_ms'] or 0:.3f})  copy in {r['copy_in_ms']:.3f} "
                  f"({r['copy_in_1thread_ms']:.3f} 1 thread, {r['copy_threads']} threads, {r['input_mb']} MB)"
                  f"  out {r['copy_out_ms']:.3f}  normalize {r['normalize_ms']:.3f}  staging {r['staging']}  pipelined {r['pipelined']}  imported {r['imported']}"
                  f"  equal {r['outputs_equal']}",
                  flush=True)
            pr, pi = r["phases_run"], r["phases_in_place"]
            print("  phases ms (median/p90)    " + "  ".join(f"{k} {pr[k]:.3f}/{pr[k + '_p90']:.3f}" for k in PHASES)
                  + f"  total {pr['total']:.3f}/{pr['total_p90']:.3f}  gpu {pr['gpu']:.3f}")
            print("  in-place phases           " + "  ".join(f"{k} {pi[k]:.3f}/{pi[k + '_p90']:.3f}" for k in PHASES)
                  + f"  total {pi['total']:.3f}/{pi['total_p90']:.3f}  gpu {pi['gpu']:.3f}")
            print(f"  active waits: run() {r['run_active_ms']:.3f} ms, in-place {r['in_place_active_ms']:.3f} ms"
                  + (f"; timestamp read-back {r['timestamp_read_ms'] * 1e3:.1f} us"
                     if "timestamp_read_ms" in r else ""),
                  flush=True)
            if "submit_wait_ms" in r:
                print(f"  submit+wait {r['submit_wait_ms']:.3f} ms, empty cmd submit+wait {r['empty_submit_wait_ms']:.3f} ms")
        best = min(r["in_place_ms"] for r in mine)
        for r in mine:
            r["ratio_to_best_in_place"] = r["run_ms"] / best
        print(f"  {Path(a.model).stem} {prec} b{a.batch}: fastest in-place {best:.3f} ms; run() / it: "
              + ", ".join(f"{r['variant']} {r['ratio_to_best_in_place']:.3f}" for r in mine), flush=True)
        rows += mine
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
