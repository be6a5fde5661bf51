"""`gpuc bench`: load and run timings, each load measured in a fresh process.

load_cold_ms: no pipeline cache (ours off, and the drivers' own disk caches off);
load_warm_ms: with our persisted pipeline cache (drivers' disk caches still off, so the figure
is what our cache buys).  Both are `gpuc.load()` in a process with no device open yet, so they
include the driver's start-up (vkCreateInstance + vkCreateDevice), which the runtime runs in a
thread while it reads and checks the bundle; that start-up alone is device_open_ms, and
model_load_*_ms = load - device_open_ms is the part of the load not hidden behind it.  Run timings
come from the warm process.
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from contextlib import nullcontext

from gpuc import progress
from gpuc.errors import GpucError, GpuTimeoutError
from gpuc.progress import Terminal
from gpuc.runtime import settings

DRIVER_CACHES_OFF = {"__GL_SHADER_DISK_CACHE": "0", "MESA_SHADER_CACHE_DISABLE": "true"}


def worker(bundle: str, runs: int, device, progress: bool) -> dict:
    """Runs inside the fresh process."""
    t0 = time.perf_counter()
    import numpy as np
    import gpuc
    import gpuc.runtime.executor  # noqa: F401  (vulkan, cffi: measured as import, not load)
    t_import = time.perf_counter() - t0
    t0 = time.perf_counter()
    m = gpuc.load(bundle, device=device)  # opens the device (in a thread, beside reading the bundle)
    t_load = time.perf_counter() - t0
    t_dev = m.device.open_ms / 1e3        # the driver's start-up alone
    rng = np.random.default_rng(0)
    xs = [rng.uniform(-1, 1, s.shape).astype(s.dtype) if s.dtype.kind == "f"
          else np.zeros(s.shape, s.dtype) for s in m.inputs]
    t0 = time.perf_counter()
    m.run(xs)
    t_first = time.perf_counter() - t0
    times = []
    with (Terminal().counter(f"{runs} timed runs", runs) if progress else nullcontext()) as bar:
        for _ in range(runs):
            t0 = time.perf_counter()
            m.run(xs)
            times.append(time.perf_counter() - t0)
            if bar is not None:
                bar.advance()
    info = m.device.describe()
    out = {"import_ms": t_import * 1e3, "load_ms": t_load * 1e3, "device_ms": t_dev * 1e3, "first_run_ms": t_first * 1e3,
           "pipeline_cache": m.load_info.get("pipeline_cache"), "load_steps_ms": m.load_info.get("steps_ms"),
           "device_open_steps_ms": m.device.open_steps_ms,
           "device": info["name"],
           "driver_version": info["driver_version"], "api_version": info["api_version"]}
    if times:
        times.sort()
        out.update(median_ms=statistics.median(times) * 1e3, p90_ms=times[int(0.9 * (len(times) - 1))] * 1e3,
                   min_ms=times[0] * 1e3, runs_per_s=len(times) / sum(times), runs=len(times))
    m.close()
    return out


def _spawn(bundle, runs, device, env_extra, show=False) -> dict:
    """worker() in a fresh process (show: its progress bar on our stderr, a terminal)."""
    env = settings.child_env(**env_extra)
    cmd = [sys.executable, "-m", "gpuc.bench", bundle, str(runs), "" if device is None else str(device),
           "1" if show else "0"]
    r = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=None if show else subprocess.PIPE, text=True)
    if r.returncode != 0:
        err = (r.stderr or "").strip().splitlines()
        cls = GpuTimeoutError if r.returncode == GpuTimeoutError.exit_code else GpucError
        raise cls(f"benchmark process failed: {err[-1] if err else f'exit code {r.returncode} (see above)'}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def bench(bundle: str, runs: int = 100, device=None) -> dict:
    """The figures; on a terminal (gpuc.progress reporting on) each process's stage and the runs show."""
    show = progress.active()
    progress.stage("load in a fresh process, no pipeline cache")
    cold = _spawn(bundle, 0, device, dict(DRIVER_CACHES_OFF, GPUC_PIPELINE_CACHE="0"))
    progress.stage("load in a fresh process, writing the pipeline cache")
    _spawn(bundle, 0, device, dict(DRIVER_CACHES_OFF, GPUC_PIPELINE_CACHE="1"))        # writes the cache
    progress.stage(f"load with the pipeline cache, a first run and {runs} timed runs")
    warm = _spawn(bundle, runs, device, dict(DRIVER_CACHES_OFF, GPUC_PIPELINE_CACHE="1"), show)
    r = {"bundle": os.path.basename(bundle), "device": warm["device"], "driver_version": warm["driver_version"],
         "import_ms": warm["import_ms"],
         "load_cold_ms": cold["load_ms"], "load_warm_ms": warm["load_ms"],
         "device_open_ms": warm["device_ms"], "model_load_cold_ms": cold["load_ms"] - cold["device_ms"],
         "model_load_warm_ms": warm["load_ms"] - warm["device_ms"],
         "first_run_cold_ms": cold["first_run_ms"], "first_run_ms": warm["first_run_ms"],
         "pipeline_cache": warm["pipeline_cache"], "load_steps_warm_ms": warm["load_steps_ms"],
         "device_open_steps_ms": warm["device_open_steps_ms"]}
    for k in ("median_ms", "p90_ms", "min_ms", "runs_per_s", "runs"):
        if k in warm:
            r[k] = warm[k]
    return {k: round(v, 3) if isinstance(v, float) else v for k, v in r.items()}


if __name__ == "__main__":
    b, n, dev, prog = sys.argv[1], int(sys.argv[2]), sys.argv[3] or None, sys.argv[4] == "1"
    try:
        print(json.dumps(worker(b, n, dev, prog)))
    except GpucError as e:                      # one line for _spawn, and the CLI's exit code
        print(f"gpuc: error: {str(e).splitlines()[0] if str(e) else type(e).__name__}", file=sys.stderr)
        sys.exit(e.exit_code)
