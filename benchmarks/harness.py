"""Side-by-side benchmark: gpuc vs LiteRT (CPU interpreter, and CompiledModel GPU where it works).

    python benchmarks/harness.py [MODELS_DIR_OR_FILES...] [--runs 100] [--device N|NAME] [--out DIR]
                                 [--batch 1,8,32]

Every system runs the same models on the same inputs in this one process tree (LiteRT's GPU path in
a child process per model, so its lingering device does not share the GPU with later rows); times are
median/p90/min of `runs` calls including input/output copies, plus load time; max_rel_err is
max|out - ref| / max|ref| against LiteRT CPU (plain builtin kernels) on the same input.
Writes benchmarks/results/<device>-<date>.json: a list of rows
{system, model, device, batch, median_ms, p90_ms, min_ms, load_ms, max_rel_err[, note]}.
gpuc rows also carry images_per_s (batch / median) and gpu_ms.  With --batch, every batch above 1
runs through one bundle compiled with --max-batch (the largest batch asked): a run of b stacked
images; row 0 is the reference input (its max_rel_err is against LiteRT CPU) and
rows_equal_batch1 says whether every row equals that bundle's own batch-1 run of the row.
"""
import argparse
import datetime
import json
import os
import re
import statistics
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent


WARMUP_S = 0.5


def timed(fn, runs, warmup_s=WARMUP_S):
    """Median/p90/min of `runs` calls, after warmup_s seconds of calls (at least one): the GPU (and CPU)
    clocks ramp up under load, and a model measured right after an idle stretch otherwise reads up to
    2-3x slow.  benchmarks/device_chain.py and ops_bench.py use it too."""
    end = time.perf_counter() + warmup_s
    fn()
    while time.perf_counter() < end:
        fn()
    ts = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    ts.sort()
    return {"median_ms": statistics.median(ts) * 1e3, "p90_ms": ts[int(0.9 * (len(ts) - 1))] * 1e3, "min_ms": ts[0] * 1e3}


def rel(outs, refs):
    errs = [float(np.abs(np.asarray(o, np.float64) - r).max() / max(float(np.abs(r).max()), 1e-30))
            for o, r in zip(outs, refs) if np.shape(o) == np.shape(r)]
    return max(errs) if errs else None


def litert_cpu(path, xs, runs, threads):
    from ai_edge_litert.interpreter import Interpreter
    t0 = time.perf_counter()
    it = Interpreter(model_path=str(path), num_threads=threads)
    it.allocate_tensors()
    load = (time.perf_counter() - t0) * 1e3
    ins, outs = it.get_input_details(), it.get_output_details()

    def run():
        for d, x in zip(ins, xs):
            it.set_tensor(d["index"], x)
        it.invoke()
        return [it.get_tensor(d["index"]) for d in outs]
    res = run()
    return dict(timed(run, runs), load_ms=load), res


def litert_gpu(path, xs, runs):
    from ai_edge_litert.compiled_model import CompiledModel
    from ai_edge_litert.hardware_accelerator import HardwareAccelerator
    t0 = time.perf_counter()
    cm = CompiledModel.from_file(str(path), hardware_accel=HardwareAccelerator.GPU)
    ins, outs = cm.create_input_buffers(0), cm.create_output_buffers(0)
    load = (time.perf_counter() - t0) * 1e3
    sig = cm.get_signature_by_index(0)
    out_det = cm.get_output_tensor_details(sig.get("key", sig.get("signature_key", "serving_default")))

    def run():
        for b, x in zip(ins, xs):
            b.write(x)
        cm.run_by_index(0, ins, outs)
        return [b.read(int(np.prod(d["shape"])), d["dtype"]).reshape(d["shape"]) for b, d in zip(outs, out_det.values())]
    res = run()
    note = None if cm.is_fully_accelerated() else "not fully accelerated"
    return dict(timed(run, runs), load_ms=load, note=note), res


def litert_gpu_isolated(path, xs, runs):
    """litert_gpu in a child process: LiteRT's GPU path (WebGPU on Vulkan) keeps its own device and
    threads alive after a model is done, which slowed the next model's gpuc rows in one process
    (on the H100: hand landmark GPU time 0.24 -> 0.9 ms).  Same inputs, same timing loop."""
    import subprocess
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        np.savez(Path(d) / "in.npz", *xs)
        r = subprocess.run([sys.executable, __file__, "--litert-gpu-worker", str(path), d, str(runs)],
                           capture_output=True, text=True)
        if r.returncode != 0:
            err = [ln for ln in (r.stderr or r.stdout).strip().splitlines()
                   if ln.strip() and not ln.startswith(("INFO:", "WARNING:"))]
            raise RuntimeError(" / ".join(err[-2:]) if err else f"exit {r.returncode}")
        with np.load(Path(d) / "out.npz") as z:
            outs = [z[f"arr_{i}"] for i in range(len(z.files))]
        return json.loads((Path(d) / "row.json").read_text()), outs


def _litert_gpu_worker(path, d, runs):
    with np.load(Path(d) / "in.npz") as z:
        xs = [z[f"arr_{i}"] for i in range(len(z.files))]
    row, outs = litert_gpu(path, xs, int(runs))
    np.savez(Path(d) / "out.npz", *outs)
    (Path(d) / "row.json").write_text(json.dumps(row))


def gpuc_run(path, xs, runs, device, precision="fp32"):
    import gpuc
    bundle = gpuc.compile(path, precision=precision)
    t0 = time.perf_counter()
    m = gpuc.load(bundle, device=device)
    load = (time.perf_counter() - t0) * 1e3
    res = m.run(xs)
    row = dict(timed(lambda: m.run(xs), runs), load_ms=load)
    if precision != "fp32":          # fp16 tensors actually run (0: the device ran the fp32 fallback)
        row["fp16_tensors"] = sum(t.dtype == "float16" for t in m.bundle.tensors)
    gpu = []
    for _ in range(20):
        m.run(xs)
        gpu.append(m.last_gpu_ms or 0)
    row["gpu_ms"] = statistics.median(gpu)
    name = m.device.name
    m.close()
    return row, res, name


def gpuc_batch_rows(path, xs, batches, runs, device, refs, base):
    """Throughput of one --max-batch bundle at each batch in `batches` (> 1)."""
    import gpuc
    n = max(batches)
    try:
        bundle = gpuc.compile(path, max_batch=n)
    except gpuc.errors.GpucError as e:
        return [{**base, "system": "gpuc-fp32", "batch": n, "note": f"max-batch: {str(e)[:180]}"}]
    t0 = time.perf_counter()
    m = gpuc.load(bundle, device=device)
    load = (time.perf_counter() - t0) * 1e3
    rng = np.random.default_rng(1234)
    stack = [np.concatenate([x] + [(rng.uniform(-1, 1, x.shape).astype(x.dtype) if x.dtype.kind == "f" else x)
                                   for _ in range(n - 1)]) for x in xs]
    def fresh(run):                   # stateful models: every comparison starts from the initial state
        if m.has_state:
            m.reset_state()
        return run()
    singles = [fresh(lambda i=i: m.run([s[i:i + 1] for s in stack])) for i in range(n)]
    rows = []
    for b in batches:
        xb = [s[:b] for s in stack]
        outs = fresh(lambda: m.run(xb))
        same = all(np.array_equal(o[i:i + 1], singles[i][k]) for k, o in enumerate(outs) for i in range(b))
        row = dict(timed(lambda: m.run(xb), runs), load_ms=load)
        gpu = []
        for _ in range(20):
            m.run(xb)
            gpu.append(m.last_gpu_ms or 0)
        row.update(gpu_ms=statistics.median(gpu), images_per_s=b / (row["median_ms"] * 1e-3),
                   rows_equal_batch1=bool(same), note=f"one --max-batch {n} bundle")
        err = rel([o[:1] for o in outs], refs) if refs else None
        rows.append({**base, "system": "gpuc-fp32", "device": m.device.name, "batch": b, **row, "max_rel_err": err})
    m.close()
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("models", nargs="*", default=[str(HERE.parent.parent / "shared" / "models")])
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--device")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--out", default=str(HERE / "results"))
    ap.add_argument("--batch", default="1", help="gpuc batch sizes, e.g. 1,8,32 (above 1: one --max-batch bundle)")
    ap.add_argument("--precision", default="fp32", help="gpuc precisions, e.g. fp32,fp16 (rows gpuc-fp32, gpuc-fp16)")
    a = ap.parse_args()
    precisions = [p.strip() for p in a.precision.split(",") if p.strip()]
    if not precisions or set(precisions) - {"fp32", "fp16"}:
        ap.error("--precision takes fp32 and/or fp16, e.g. fp32,fp16")
    batches = sorted({int(b) for b in a.batch.split(",") if b.strip()})
    if not batches or batches[0] < 1:
        ap.error("--batch takes positive integers, e.g. 1,8,32")
    paths = []
    for m in a.models:
        p = Path(m)
        paths += sorted(p.glob("*.tflite")) if p.is_dir() else [p]
    rows, device = [], "unknown"
    for path in paths:
        name = path.stem
        ref_dir = path.parent / "ref"
        import gpuc
        try:
            with gpuc.load(gpuc.compile(path), device=a.device) as m:
                specs = m.inputs
        except gpuc.errors.GpucError as e:
            rows.append({"system": "gpuc-fp32", "model": name, "note": str(e)[:200]})
            continue
        xs = [np.load(ref_dir / f"{name}.in{i}.npy") if (ref_dir / f"{name}.in{i}.npy").exists()
              else np.random.default_rng(i).uniform(-1, 1, s.shape).astype(s.dtype) for i, s in enumerate(specs)]
        base = {"model": name, "batch": int(specs[0].shape[0]) if specs[0].shape else 1}
        try:
            cpu, refs = litert_cpu(path, xs, a.runs, a.threads)
        except Exception as e:  # noqa: BLE001
            cpu, refs = None, None
            rows.append({**base, "system": f"litert-cpu-{a.threads}t", "note": str(e)[:200]})
        for prec in precisions:
            try:
                g, out, device = gpuc_run(path, xs, a.runs, a.device, prec)
            except gpuc.errors.GpucError as e:
                rows.append({**base, "system": f"gpuc-{prec}", "note": str(e)[:200]})
                continue
            g["images_per_s"] = base["batch"] / (g["median_ms"] * 1e-3)
            if g.get("fp16_tensors") == 0:
                g["note"] = "no tensor stored as fp16 (int8 program, or the device ran the fp32 fallback)"
            rows.append({**base, "system": f"gpuc-{prec}", "device": device, **g,
                         "max_rel_err": rel(out, refs) if refs else None})
        if any(b > 1 for b in batches):
            rows += gpuc_batch_rows(path, xs, [b for b in batches if b > 1], a.runs, a.device, refs, base)
        if cpu:
            rows.append({**base, "system": f"litert-cpu-{a.threads}t", "device": "cpu", **cpu, "max_rel_err": 0.0})
        try:
            gg, gout = litert_gpu_isolated(path, xs, a.runs)
            rows.append({**base, "system": "litert-gpu", "device": device, **gg,
                         "max_rel_err": rel(gout, refs) if refs else None})
        except Exception as e:  # noqa: BLE001
            rows.append({**base, "system": "litert-gpu", "note": f"unavailable: {str(e)[:160]}"})
    print(f"{'model':<32} {'system':<16} {'batch':>5} {'median':>8} {'p90':>8} {'min':>8} {'load':>9} "
          f"{'max_rel_err':>11} {'images/s':>9}")
    for r in rows:
        if "median_ms" in r:
            e = f"{r['max_rel_err']:.2e}" if r.get("max_rel_err") is not None else "-"
            ips = f"{r['images_per_s']:.0f}" if r.get("images_per_s") else "-"
            print(f"{r['model']:<32} {r['system']:<16} {r.get('batch', 1):>5} {r['median_ms']:>8.3f} {r['p90_ms']:>8.3f} "
                  f"{r['min_ms']:>8.3f} {r['load_ms']:>9.1f} {e:>11} {ips:>9}" + (f"  ({r['note']})" if r.get("note") else "")
                  + (f"  gpu {r['gpu_ms']:.3f}" if r.get("gpu_ms") else "")
                  + ("" if r.get("rows_equal_batch1", True) else "  ROWS DIFFER FROM BATCH-1"))
        else:
            print(f"{r['model']:<32} {r['system']:<16} {r.get('note', '')}")
    os.makedirs(a.out, exist_ok=True)
    slug = re.sub(r"[^A-Za-z0-9]+", "-", device).strip("-").lower()
    out = Path(a.out) / f"{slug}-{datetime.date.today().isoformat()}.json"
    out.write_text(json.dumps(rows, indent=1))
    print(f"wrote {out}")


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--litert-gpu-worker":
        sys.exit(_litert_gpu_worker(*sys.argv[2:]))
    sys.exit(main())
