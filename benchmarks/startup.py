"""Startup comparison for any model, on whatever Vulkan device this machine has.

    python -m benchmarks.startup MODEL.tflite [--runs 50] [--repeat 3] [--device N|NAME] [--json OUT.json]

Every measured process is fresh (median of --repeat processes).  Rows:
- `gpuc compile` as a command (the console script's code path, wall time of the whole process),
  cold (empty compile cache) and on a cache hit, with the interpreter's own start (`python -c pass`)
  for scale; and the compile time the command reports itself (in-process, after imports).
- `gpuc bench`: load cold (no pipeline cache) / warm, the driver's start-up alone, first and median run.
- LiteRT CPU (load + first invoke) and LiteRT's GPU path (CompiledModel, WebGPU on Vulkan: load
  + first run), when ai-edge-litert is installed.
- Time to first result, whole fresh process: `python -c` that imports, loads and runs once
  (gpuc on the compiled bundle with its pipeline cache; LiteRT GPU on the .tflite).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

import numpy as np

from benchmarks.timing import once

HERE = os.path.dirname(os.path.abspath(__file__))
CLI = "import sys; from gpuc.launch import main; sys.exit(main())"     # what the `gpuc` script runs


def wall(argv, env=None) -> tuple:
    """(seconds, stdout) of one fresh process."""
    r, dt = once(subprocess.run, argv, capture_output=True, text=True, env=dict(os.environ, **(env or {})))
    if r.returncode:
        lines = [ln for ln in r.stderr.strip().splitlines() if ln.strip() and not ln.startswith(("INFO:", "WARNING:"))]
        raise SystemExit(lines[-1][-160:] if lines else f"exit {r.returncode}")
    return dt, r.stdout


def reported_ms(stdout: str) -> float:
    """The 'N ms' a `gpuc compile` line reports."""
    line = [ln for ln in stdout.splitlines() if ln.startswith("wrote ")][-1]
    return float(line.split(" ms")[0].rsplit(" ", 1)[-1])


FIRST_RESULT_GPUC = """
import numpy as np, gpuc
m = gpuc.load({bundle!r})
m.run([np.zeros(s.shape, s.dtype) for s in m.inputs])
"""

LITERT_CPU = """
import json, time
import numpy as np
t0 = time.perf_counter()
from ai_edge_litert.interpreter import Interpreter
it = Interpreter(model_path={model!r})
it.allocate_tensors()
t1 = time.perf_counter()
for d in it.get_input_details():
    it.set_tensor(d["index"], np.zeros(d["shape"], d["dtype"]))
it.invoke()
t2 = time.perf_counter()
print(json.dumps({{"load_ms": (t1 - t0) * 1e3, "first_run_ms": (t2 - t1) * 1e3}}))
"""

LITERT_GPU = """
import json, time
import numpy as np
from ai_edge_litert.compiled_model import CompiledModel
from ai_edge_litert.hardware_accelerator import HardwareAccelerator
t0 = time.perf_counter()
cm = CompiledModel.from_file({model!r}, hardware_accel=HardwareAccelerator.GPU)
ins, outs = cm.create_input_buffers(0), cm.create_output_buffers(0)
t1 = time.perf_counter()
cm.run_by_index(0, ins, outs)
t2 = time.perf_counter()
print(json.dumps({{"load_ms": (t1 - t0) * 1e3, "first_run_ms": (t2 - t1) * 1e3}}))
"""

FIRST_RESULT_LITERT_GPU = """
from ai_edge_litert.compiled_model import CompiledModel
from ai_edge_litert.hardware_accelerator import HardwareAccelerator
cm = CompiledModel.from_file({model!r}, hardware_accel=HardwareAccelerator.GPU)
ins, outs = cm.create_input_buffers(0), cm.create_output_buffers(0)
cm.run_by_index(0, ins, outs)
"""


def input_specs(bundle):
    from gpuc.runtime.bundle import read_bundle
    with open(bundle, "rb") as f:
        b = read_bundle(f.read())
    return [(b.tensors[t].shape, b.tensors[t].dtype) for t in b.inputs]


def med(xs):
    return statistics.median(xs)


def fresh_json(code: str, repeat: int) -> dict:
    rows = [json.loads(wall([sys.executable, "-c", code])[1].strip().splitlines()[-1]) for _ in range(repeat)]
    return {k: med([r[k] for r in rows]) for k in rows[0]}


def compile_rows(model, tmp, repeat) -> list:
    out = os.path.join(tmp, "m.bundle")
    rows, cold_w, cold_r, hit_w, hit_r = [], [], [], [], []
    for i in range(repeat):
        env = {"GPUC_CACHE_DIR": os.path.join(tmp, f"cold{i}")}
        dt, so = wall([sys.executable, "-c", CLI, "compile", model, "-o", out], env)
        cold_w.append(dt * 1e3)
        cold_r.append(reported_ms(so))
    env = {"GPUC_CACHE_DIR": os.path.join(tmp, "cache")}
    wall([sys.executable, "-c", CLI, "compile", model, "-o", out], env)
    for _ in range(repeat):
        dt, so = wall([sys.executable, "-c", CLI, "compile", model, "-o", out], env)
        assert "(compile cache hit)" in so, so
        hit_w.append(dt * 1e3)
        hit_r.append(reported_ms(so))
    floor = med([wall([sys.executable, "-c", "pass"])[0] * 1e3 for _ in range(repeat)])
    rows += [("python -c pass (interpreter start, for scale)", floor, "ms"),
             ("gpuc compile, cold: whole process", med(cold_w), "ms"),
             ("gpuc compile, cache hit: whole process", med(hit_w), "ms"),
             ("  speed-up, whole process", med(cold_w) / med(hit_w), "x"),
             ("gpuc compile, cold: as reported (after imports)", med(cold_r), "ms"),
             ("gpuc compile, cache hit: as reported", med(hit_r), "ms"),
             ("  speed-up, as reported", med(cold_r) / med(hit_r), "x")]
    return rows, out, env


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--device")
    ap.add_argument("--json")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp()
    rows, bundle, env = compile_rows(os.path.abspath(a.model), tmp, a.repeat)
    os.environ.update(env)
    from gpuc.bench import bench
    b = bench(bundle, a.runs, a.device)
    rows += [("gpuc load, cold (no pipeline cache)", b["load_cold_ms"], "ms"),
             ("gpuc load, warm (pipeline cache)", b["load_warm_ms"], "ms"),
             ("  of which the driver's start-up (device open)", b["device_open_ms"], "ms"),
             ("  model load not hidden behind it", b["model_load_warm_ms"], "ms"),
             ("gpuc first run (warm process)", b["first_run_ms"], "ms"),
             ("gpuc load warm + first run", b["load_warm_ms"] + b["first_run_ms"], "ms"),
             ("gpuc median run", b.get("median_ms", float("nan")), "ms")]
    first = [wall([sys.executable, "-c", FIRST_RESULT_GPUC.format(bundle=bundle)])[0] * 1e3 for _ in range(a.repeat)]
    rows.append(("gpuc time to first result, whole process", med(first), "ms"))
    args = []
    for i, (shape, dtype) in enumerate(input_specs(bundle)):
        p = os.path.join(tmp, f"in{i}.npy")
        np.save(p, np.zeros(shape, dtype))
        args += ["--input", p]
    runs = [wall([sys.executable, "-c", CLI, "run", bundle] + args)[0] * 1e3 for _ in range(a.repeat)]
    rows.append(("gpuc run BUNDLE --input ... (CLI), whole process", med(runs), "ms"))
    try:
        lr = fresh_json(LITERT_CPU.format(model=a.model), a.repeat)
        rows += [("LiteRT CPU load", lr["load_ms"], "ms"), ("LiteRT CPU first invoke", lr["first_run_ms"], "ms")]
        lg = fresh_json(LITERT_GPU.format(model=a.model), a.repeat)
        rows += [("LiteRT GPU load", lg["load_ms"], "ms"), ("LiteRT GPU first run", lg["first_run_ms"], "ms"),
                 ("LiteRT GPU load + first run / gpuc load warm + first run",
                  (lg["load_ms"] + lg["first_run_ms"]) / (b["load_warm_ms"] + b["first_run_ms"]), "x")]
        lf = [wall([sys.executable, "-c", FIRST_RESULT_LITERT_GPU.format(model=a.model)])[0] * 1e3
              for _ in range(a.repeat)]
        rows.append(("LiteRT GPU time to first result, whole process", med(lf), "ms"))
    except SystemExit as e:
        rows.append((f"LiteRT: {str(e)[-120:]}", float("nan"), ""))
    print(f"model: {os.path.basename(a.model)}   device: {b['device']}   pipeline cache: {b['pipeline_cache']}")
    for name, v, unit in rows:
        print(f"  {name:<60} {v:10.2f} {unit}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"model": os.path.basename(a.model), **b, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
