"""Side-by-side benchmark: gpuc vs LiteRT (CPU interpreter, and CompiledModel GPU where it works) and
PyTorch on CUDA (where torch imports; benchmarks/torch_peer.py).

    python -m benchmarks.harness [MODELS_DIR_OR_FILES...] [--runs 100] [--device N|NAME] [--out DIR]
                                   [--json FILE] [--batch 1,8,32] [--precision fp32,fp16]
                                   [--skip litert-gpu,torch] [--peer STEM=LIBRARY:ARCH[:nhwc]]

Every system runs the same models on the same inputs in this one process tree (LiteRT's GPU path in
a child process per model, so its lingering device does not share the GPU with later rows; torch
after every gpuc row); times are median/p90/min of `runs` calls, plus load time; max_rel_err is
max|out - ref| / max|ref| against LiteRT CPU (plain builtin kernels) on the same input.
Writes benchmarks/results/<device>-<date>-harness.json (or --json FILE; benchmarks/README.md): a list of rows
{system, model, device, batch, median_ms, p90_ms, min_ms, load_ms, max_rel_err[, note]}.

gpuc rows (also images_per_s = batch / median, and gpu_ms, gpuc's own GPU timestamps):
- gpuc-PREC: run(), numpy in and numpy out (a host copy each way);
- gpuc-PREC-in-place: the input written once into input_view, then run_in_place (copy from the mapped
  staging memory, run, copy out to it, wait): the span the torch rows time.  equals_run: its outputs
  equal run()'s.  Where input_view cannot hold a batch, the row is a note saying so.
With --batch, every batch above 1 runs through one bundle compiled with --max-batch (the largest batch
asked): a run of b stacked images; row 0 is the reference input (its max_rel_err is against LiteRT CPU)
and rows_equal_batch1 says whether every row equals that bundle's own batch-1 run of the row.

torch rows (torch-fp32 with TF32 off, torch-tf32, torch-fp16; CUDA graphs from pinned host memory) for
models that torch_peer.PEERS maps to a PyTorch architecture (random weights: timings only), at every
batch; each carries throughput_ratio {gpuc system: torch median / gpuc median} (above 1: gpuc faster,
benchmarks/ratios.py), printed per row and as a closing table.  Without torch: one note row per
mapped model saying why.
"""
import argparse
import datetime
import json
import os
import re
import statistics
import sys
from pathlib import Path

import numpy as np

from benchmarks import ratios, torch_peer
from benchmarks.timing import in_place_gpu_ms, once, timed

HERE = Path(__file__).resolve().parent


def rel(outs, refs):
    errs = [float(np.abs(np.asarray(o, np.float64) - r).max() / max(float(np.abs(r).max()), 1e-30))
            for o, r in zip(outs, refs) if np.shape(o) == np.shape(r)]
    return max(errs) if errs else None


def litert_cpu(path, xs, runs, threads):
    from ai_edge_litert.interpreter import Interpreter
    def make():
        it = Interpreter(model_path=str(path), num_threads=threads)
        it.allocate_tensors()
        return it
    it, load_s = once(make)
    load = load_s * 1e3
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
    def make():
        cm = CompiledModel.from_file(str(path), hardware_accel=HardwareAccelerator.GPU)
        return cm, cm.create_input_buffers(0), cm.create_output_buffers(0)
    (cm, ins, outs), load_s = once(make)
    load = load_s * 1e3
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
        r = subprocess.run([sys.executable, "-m", "benchmarks.harness", "--litert-gpu-worker", str(path), d, str(runs)],
                           capture_output=True, text=True, cwd=HERE.parent)
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


def gpu_ms(m, run, n=20, read=None):
    """Median GPU time (gpuc's own timestamps) of n calls of run, each read after its call by read()
    (default: m.last_gpu_ms, a run()'s)."""
    gpu = []
    for _ in range(n):
        run()
        gpu.append((m.last_gpu_ms if read is None else read()) or 0)
    return statistics.median(gpu)


def _same(a, b) -> bool:
    """Equal bits where it matters: NaN equals NaN (a random-weight skeleton can overflow float16, and its
    NaN outputs then never compare equal to themselves)."""
    a, b = np.asarray(a), np.asarray(b)
    return np.array_equal(a, b, equal_nan=a.dtype.kind == "f" and b.dtype.kind == "f")


def in_place(m, xs, expect, runs):
    """(row, None): run_in_place timed with xs written once into input_view (the span a peer that starts
    from pinned host memory times: copy in, run, copy out, wait; the outputs stay in output_view), or
    (None, why not) where input_view cannot hold xs (a batch the bundle's views do not cover).
    equals_run: the in-place outputs equal `expect`, run()'s outputs for the same inputs."""
    batch = None
    if getattr(m, "max_batch", 1) > 1:          # a --max-batch bundle: the first b items of its views
        batch = xs[0].shape[0]
    for i, x in enumerate(xs):
        v = m.input_view(i, batch=batch)
        if v.shape != x.shape:
            return None, (f"run_in_place not supported for this batch: input_view({i}) of this "
                          + (f"--max-batch {m.max_batch} bundle " if getattr(m, "max_batch", 1) > 1 else "bundle ")
                          + f"has shape {list(v.shape)}, a run of {x.shape[0]} items needs {list(x.shape)}")
        v[...] = x
    if m.has_state:
        m.reset_state()
    run = lambda: m.run_in_place(batch=batch)       # noqa: E731
    run()
    same = all(_same(m.output_view(k, batch=batch), e) for k, e in enumerate(expect))
    row = timed(run, runs)
    row.update(gpu_ms=gpu_ms(m, run, read=lambda: in_place_gpu_ms(m)), equals_run=bool(same))
    return row, None


def gpuc_run(path, xs, runs, device, precision="fp32"):
    """Rows for run() and run_in_place of one batch-1 bundle; the outputs of run(); the device's name."""
    import gpuc
    bundle = gpuc.compile(path, precision=precision)
    m, load_s = once(gpuc.load, bundle, device=device)
    load = load_s * 1e3
    if m.has_state:
        m.reset_state()
    res = m.run(xs)
    row = dict(timed(lambda: m.run(xs), runs), load_ms=load)
    if precision != "fp32":          # fp16 tensors actually run (0: the device ran the fp32 fallback)
        row["fp16_tensors"] = sum(t.dtype == "float16" for t in m.bundle.tensors)
    row["gpu_ms"] = gpu_ms(m, lambda: m.run(xs))
    ip, why = in_place(m, xs, res, runs)
    name = m.device.name
    m.close()
    return row, (dict(ip, load_ms=load) if ip else {"note": why}), res, name


def batch_stack(xs, n):
    """Each input stacked to n items: the reference input first, then seeded random items."""
    rng = np.random.default_rng(1234)
    return [np.concatenate([x] + [(rng.uniform(-1, 1, x.shape).astype(x.dtype) if x.dtype.kind == "f" else x)
                                  for _ in range(n - 1)]) for x in xs]


def gpuc_batch_rows(path, stack, batches, runs, device, refs, base, precision="fp32"):
    """Throughput of one --max-batch bundle (n = the stack's length) at each batch in `batches` (> 1):
    rows gpuc-PREC (run(), numpy in and out) and gpuc-PREC-in-place (or a note saying why not)."""
    import gpuc
    n = len(stack[0])
    system = f"gpuc-{precision}"
    try:
        bundle = gpuc.compile(path, max_batch=n, precision=precision)
    except gpuc.errors.GpucError as e:
        return [{**base, "system": system, "batch": n, "note": f"max-batch: {str(e)[:180]}"}]
    m, load_s = once(gpuc.load, bundle, device=device)
    load = load_s * 1e3

    def fresh(run):                   # stateful models: every comparison starts from the initial state
        if m.has_state:
            m.reset_state()
        return run()
    singles = [fresh(lambda i=i: m.run([s[i:i + 1] for s in stack])) for i in range(n)]
    rows = []
    for b in batches:
        xb = [s[:b] for s in stack]
        outs = fresh(lambda: m.run(xb))
        same = all(_same(o[i:i + 1], singles[i][k]) for k, o in enumerate(outs) for i in range(b))
        row = dict(timed(lambda: m.run(xb), runs), load_ms=load)
        row.update(gpu_ms=gpu_ms(m, lambda: m.run(xb)), images_per_s=b / (row["median_ms"] * 1e-3),
                   rows_equal_batch1=bool(same), note=f"one --max-batch {n} bundle")
        err = rel([o[:1] for o in outs], refs) if refs else None
        rows.append({**base, "system": system, "device": m.device.name, "batch": b, **row, "max_rel_err": err})
        ip, why = in_place(m, xb, outs, runs)
        if ip:
            rows.append({**base, "system": system + "-in-place", "device": m.device.name, "batch": b, **ip,
                         "load_ms": load, "images_per_s": b / (ip["median_ms"] * 1e-3), "max_rel_err": err,
                         "note": f"one --max-batch {n} bundle"})
        else:
            rows.append({**base, "system": system + "-in-place", "batch": b, "note": why})
    m.close()
    return rows


def format_row(r) -> str:
    """One line of the harness table (a row without timings prints its note)."""
    if "median_ms" not in r:
        return f"{r['model']:<32} {r['system']:<18} {r.get('batch', ''):>5} {r.get('note', '')}"
    e = f"{r['max_rel_err']:.2e}" if r.get("max_rel_err") is not None else "-"
    ips = f"{r['images_per_s']:.0f}" if r.get("images_per_s") else "-"
    load = f"{r['load_ms']:>9.1f}" if r.get("load_ms") is not None else f"{'-':>9}"
    ratio = r.get("throughput_ratio")
    return (f"{r['model']:<32} {r['system']:<18} {r.get('batch', 1):>5} {r['median_ms']:>8.3f} {r['p90_ms']:>8.3f} "
            f"{r['min_ms']:>8.3f} {load} {e:>11} {ips:>9}" + (f"  ({r['note']})" if r.get("note") else "")
            + (f"  gpu {r['gpu_ms']:.3f}" if r.get("gpu_ms") else "")
            + ("" if r.get("rows_equal_batch1", True) else "  ROWS DIFFER FROM BATCH-1")
            + ("" if r.get("equals_run", True) else "  IN-PLACE OUTPUTS DIFFER FROM run()")
            + ("".join(f"  {s}/torch {v:.2f}" for s, v in ratio.items()) if ratio else "")
            + (f"  [{r['device']}]" if r.get("device") and r["system"].startswith("torch") else ""))


HEADER = (f"{'model':<32} {'system':<18} {'batch':>5} {'median':>8} {'p90':>8} {'min':>8} {'load':>9} "
          f"{'max_rel_err':>11} {'images/s':>9}")


def torch_rows(jobs, runs):
    """PyTorch peer rows for jobs [(stem, Peer, {batch: input})], or one note row per job where torch is not here."""
    if not jobs:
        return []
    torch, why = torch_peer.import_torch()
    if torch is None:
        print(f"torch peer: {why}; no torch-* rows", flush=True)
        return [{"model": stem, "system": "torch", "peer": peer.describe(), "note": f"skipped: {why}"}
                for stem, peer, _ in jobs]
    rows = []
    for stem, peer, inputs in jobs:
        rows += torch_peer.rows(torch, stem, peer, inputs, runs, timed)
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("models", nargs="*", default=[str(HERE.parent.parent / "shared" / "models")])
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--device")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--out", default=str(HERE / "results"))
    ap.add_argument("--json", help="write the rows here (default: OUT/<device>-<date>-harness.json)")
    ap.add_argument("--batch", default="1", help="batch sizes, e.g. 1,8,32 (gpuc above 1: one --max-batch bundle "
                    "of the largest; the torch peer runs every batch)")
    ap.add_argument("--precision", default="fp32", help="gpuc precisions, e.g. fp32,fp16 (rows gpuc-fp32, gpuc-fp16)")
    ap.add_argument("--skip", default="", help="peers to leave out: litert-gpu, torch (comma-separated)")
    ap.add_argument("--peer", action="append", default=[], metavar="STEM=LIBRARY:ARCH[:nchw|nhwc]",
                    help="map one more model to its PyTorch architecture (besides benchmarks/torch_peer.py's PEERS)")
    a = ap.parse_args(argv)
    precisions = [p.strip() for p in a.precision.split(",") if p.strip()]
    if not precisions or set(precisions) - {"fp32", "fp16"}:
        ap.error("--precision takes fp32 and/or fp16, e.g. fp32,fp16")
    try:
        batches = sorted({int(b) for b in a.batch.split(",") if b.strip()})
    except ValueError:
        batches = []
    if not batches or batches[0] < 1:
        ap.error("--batch takes positive integers, e.g. 1,8,32")
    skip = {s.strip() for s in a.skip.split(",") if s.strip()}
    if skip - {"litert-gpu", "torch"}:
        ap.error("--skip takes litert-gpu and/or torch")
    try:
        extra = dict(torch_peer.parse_peer(p) for p in a.peer)
    except ValueError as e:
        ap.error(str(e))
    paths = []
    for m in a.models:
        p = Path(m)
        paths += sorted(p.glob("*.tflite")) if p.is_dir() else [p]
    rows, device, jobs, unmapped = [], "unknown", [], []
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
                g, ip, out, device = gpuc_run(path, xs, a.runs, a.device, prec)
            except gpuc.errors.GpucError as e:
                rows.append({**base, "system": f"gpuc-{prec}", "note": str(e)[:200]})
                continue
            g["images_per_s"] = base["batch"] / (g["median_ms"] * 1e-3)
            if g.get("fp16_tensors") == 0:
                g["note"] = ("no tensor stored as fp16 (an int8 program, a program whose gemms all keep fp32 "
                             "storage, or the device ran the fp32 fallback)")
            err = rel(out, refs) if refs else None
            rows.append({**base, "system": f"gpuc-{prec}", "device": device, **g, "max_rel_err": err})
            if "median_ms" in ip:
                ip["images_per_s"] = base["batch"] / (ip["median_ms"] * 1e-3)
                ip = {"device": device, **ip, "max_rel_err": err}
            rows.append({**base, "system": f"gpuc-{prec}-in-place", **ip})
        big = [b for b in batches if b > 1]
        stack = batch_stack(xs, max(big)) if big else None
        for prec in precisions if big else ():
            rows += gpuc_batch_rows(path, stack, big, a.runs, a.device, refs, base, prec)
        if cpu:
            rows.append({**base, "system": f"litert-cpu-{a.threads}t", "device": "cpu", **cpu, "max_rel_err": 0.0})
        if "litert-gpu" not in skip:
            try:
                gg, gout = litert_gpu_isolated(path, xs, a.runs)
                rows.append({**base, "system": "litert-gpu", "device": device, **gg,
                             "max_rel_err": rel(gout, refs) if refs else None})
            except Exception as e:  # noqa: BLE001
                rows.append({**base, "system": "litert-gpu", "note": f"unavailable: {str(e)[:160]}"})
        peer = torch_peer.peer_for(name, extra)
        if "torch" in skip:
            pass
        elif peer is None:
            unmapped.append(name)
        elif len(xs) != 1 or base["batch"] != 1:
            rows.append({**base, "system": "torch", "peer": peer.describe(),
                         "note": "the torch peer takes models with one input of batch 1"})
        else:
            jobs.append((name, peer, {b: (stack[0][:b] if b > 1 else xs[0]) for b in batches}))
    rows += torch_rows(jobs, a.runs)
    if unmapped:
        print(f"torch peer: no PyTorch architecture mapped for {', '.join(unmapped)} "
              "(benchmarks/torch_peer.py PEERS, or --peer STEM=LIBRARY:ARCH)")
    order = {p.stem: i for i, p in enumerate(paths)}
    rows.sort(key=lambda r: order.get(r["model"], len(order)))        # stable: each model's rows together
    ratios.attach(rows)
    print(HEADER)
    for r in rows:
        print(format_row(r))
    missing = sorted({(r["system"], r["batch"]) for r in rows if r["system"].endswith("-in-place") and "median_ms" not in r
                      and "run_in_place not supported" in r.get("note", "")})
    if missing:
        print(f"\nNOTE: no like-for-like gpuc row (run_in_place) for {', '.join(f'{s} at batch {b}' for s, b in missing)}: "
              "the --max-batch bundle's input_view does not have the batch's shape (the rows' notes say which), so "
              "run_in_place cannot run that batch; those batches have only run() rows (numpy in and out)")
    lines = ratios.table(rows)
    if lines:
        print()
        print("\n".join(lines))
    if a.json:
        out = Path(a.json)
        out.parent.mkdir(parents=True, exist_ok=True)
    else:
        os.makedirs(a.out, exist_ok=True)
        slug = re.sub(r"[^A-Za-z0-9]+", "-", device).strip("-").lower()
        out = Path(a.out) / f"{slug}-{datetime.date.today().isoformat()}-harness.json"
    out.write_text(json.dumps(rows, indent=1))
    print(f"wrote {out}")


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--litert-gpu-worker":
        sys.exit(_litert_gpu_worker(*sys.argv[2:]))
    sys.exit(main())
