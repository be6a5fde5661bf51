"""Startup comparison for any model, on whatever Vulkan device this machine has.

    python benchmarks/startup.py MODEL.tflite [--runs 50] [--device N|NAME] [--json OUT.json]

Rows: gpuc compile (no cache, fresh process), gpuc compile (cache hit, fresh process, and the
in-process figure), gpuc load cold / warm (pipeline cache), first run, median run; LiteRT CPU
(load + first invoke) when ai-edge-litert is installed.  Every measured process is fresh.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile


HERE = os.path.dirname(os.path.abspath(__file__))


def fresh(code: str, env=None) -> dict:
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=dict(os.environ, **(env or {})))
    if r.returncode:
        raise SystemExit(r.stderr)
    return json.loads(r.stdout.strip().splitlines()[-1])


COMPILE = """
import json, time
t0 = time.perf_counter()
import gpuc
from gpuc.compiler import compile_model, last_compile
t1 = time.perf_counter()
compile_model({model!r}, output={out!r}, cache={cache})
t2 = time.perf_counter()
print(json.dumps({{"import_ms": (t1 - t0) * 1e3, "compile_ms": (t2 - t1) * 1e3, "cache": last_compile["cache"]}}))
"""

LITERT = """
import json, time
import numpy as np
t0 = time.perf_counter()
from ai_edge_litert.interpreter import Interpreter
it = Interpreter(model_path={model!r}, num_threads=os.cpu_count() if False else None)
it.allocate_tensors()
t1 = time.perf_counter()
for d in it.get_input_details():
    it.set_tensor(d["index"], np.zeros(d["shape"], d["dtype"]))
it.invoke()
t2 = time.perf_counter()
print(json.dumps({{"load_ms": (t1 - t0) * 1e3, "first_run_ms": (t2 - t1) * 1e3}}))
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--device")
    ap.add_argument("--json")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp()
    env = {"GPUC_CACHE_DIR": os.path.join(tmp, "cache")}
    out = os.path.join(tmp, "m.bundle")
    cold = fresh(COMPILE.format(model=a.model, out=out, cache=True), env)
    hit = fresh(COMPILE.format(model=a.model, out=out, cache=True), env)
    assert cold["cache"] == "miss" and hit["cache"] == "hit", (cold, hit)
    sys.path.insert(0, os.path.dirname(HERE))
    os.environ.update(env)
    from gpuc.bench import bench
    b = bench(out, a.runs, a.device)
    rows = [
        ("gpuc compile, cold (fresh process)", cold["compile_ms"]),
        ("gpuc compile, cache hit (fresh process)", hit["compile_ms"]),
        ("gpuc compile speed-up on a hit", cold["compile_ms"] / hit["compile_ms"]),
        ("gpuc load, cold (no pipeline cache)", b["load_cold_ms"]),
        ("gpuc load, warm (pipeline cache)", b["load_warm_ms"]),
        ("gpuc first run (warm process)", b["first_run_ms"]),
        ("gpuc load warm + first run", b["load_warm_ms"] + b["first_run_ms"]),
        ("gpuc median run", b.get("median_ms", float("nan"))),
    ]
    try:
        lr = fresh("import os\n" + LITERT.format(model=a.model))
        rows += [("LiteRT CPU load", lr["load_ms"]), ("LiteRT CPU first invoke", lr["first_run_ms"])]
    except SystemExit:
        pass
    print(f"model: {os.path.basename(a.model)}   device: {b['device']}   pipeline cache: {b['pipeline_cache']}")
    for name, v in rows:
        unit = "x" if "speed-up" in name else "ms"
        print(f"  {name:<44} {v:10.2f} {unit}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"model": os.path.basename(a.model), **b, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
