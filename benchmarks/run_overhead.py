"""Where the host time of one run() goes, next to the in-place path (the part that is not GPU work).

    python -m benchmarks.run_overhead MODEL.tflite|BUNDLE [--batch 32] [--precisions fp32,fp16]
                                      [--variants device:0,device:1,device:0::on,cached:0] [--runs 100]
                                      [--device N|NAME] [--json OUT]

A .tflite is compiled per precision (with --max-batch B when --batch B > 1); a bundle runs as it is.
Per precision and variant (UPLOAD:THREADS[:CHUNK[:PIPELINE]] = GPUC_UPLOAD_MEMORY, GPUC_COPY_THREADS
(0: automatic), GPUC_UPLOAD_CHUNK_BYTES and GPUC_UPLOAD_PIPELINE (the chunked, overlapped upload of
runtime/upload.py; an empty field keeps the setting)), one row of medians: run() (numpy in, numpy out), the in-place path (input_view written once,
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

from benchmarks.timing import timed


def med_ms(fn, runs):
    return timed(fn, runs, warmup_s=0.2)["median_ms"]


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
        row["staging"] = "device" if upload._staging_in_device_memory(m.device, m.slots[0].in_bytes) else "host"
        for i, x in enumerate(xs):
            m.input_view(i, batch=b)[...] = x
        in_place = lambda: m.run_in_place(batch=b)  # noqa: E731
        in_place()
        row["outputs_equal"] = all(np.array_equal(m.output_view(k, batch=b), o) for k, o in enumerate(outs))
        row["in_place_ms"] = med_ms(in_place, runs)
        row["gpu_ms"] = m.last_gpu_ms
        row["ratio"] = row["run_ms"] / row["in_place_ms"]
        sl = m.slots[0]
        views = [r[:batch] for r in sl.in_rows] if b else sl.in_views
        outv = [r[:batch] for r in sl.out_rows] if b else sl.out_views

        def copy_in(copy):
            for v, x in zip(views, xs):
                copy(v, x)
        row["normalize_ms"] = med_ms(lambda: iospec.normalize(m.inputs, xs, m.max_batch, m.device), runs)
        row["copy_in_ms"] = med_ms(lambda: copy_in(sl.copier.copy_into), runs)
        row["copy_in_1thread_ms"] = med_ms(lambda: copy_in(lambda v, x: v.__setitem__(Ellipsis, x)), runs)
        row["copy_out_ms"] = med_ms(lambda: [sl.copier.copy_out(v) for v in outv], runs)
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
                    help="UPLOAD:THREADS[:CHUNK[:PIPELINE]],... (GPUC_UPLOAD_MEMORY device|cached|uncached : "
                         "GPUC_COPY_THREADS, 0 auto : GPUC_UPLOAD_CHUNK_BYTES : GPUC_UPLOAD_PIPELINE auto|on|off)")
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
            upload, threads, chunk, pipe = (var.split(":") + ["", "", ""])[:4]
            over = dict(upload_memory=upload, copy_threads=int(threads or 0))
            if chunk:
                over["upload_chunk_bytes"] = int(chunk)
            if pipe:
                over["upload_pipeline"] = pipe
            with settings.override(**over):
                r = measure(bundle, a.batch, a.runs, a.device, floor=(k == 0 and a.batch == 1))
            r.update(model=Path(a.model).stem, precision=prec, batch=a.batch, variant=var)
            mine.append(r)
            print(f"{r['model']} {prec} b{a.batch} {var:<10} run() {r['run_ms']:7.3f} ms  in-place {r['in_place_ms']:7.3f} ms"
                  f"  ratio {r['ratio']:.3f}  | GPU {r['gpu_ms'] or 0:6.3f}  copy in {r['copy_in_ms']:.3f} "
                  f"({r['copy_in_1thread_ms']:.3f} 1 thread, {r['copy_threads']} threads, {r['input_mb']} MB)"
                  f"  out {r['copy_out_ms']:.3f}  normalize {r['normalize_ms']:.3f}  staging {r['staging']}  pipelined {r['pipelined']}"
                  f"  equal {r['outputs_equal']}",
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
