"""The one timing helper of the benchmarks: `timed` for repeated calls (median / p90 / min after a
warm-up), `once` for a single timed call (compile, load, first run, a whole decode), `cuda_us` for a
CUDA call's GPU time (the PyTorch peers), `warm_profile` for a loaded gpuc model's per-dispatch GPU times,
`in_place_gpu_ms` for the GPU time of its last run_in_place."""
from __future__ import annotations

import statistics
import time

WARMUP_S = 0.5   # GPU and CPU clocks ramp up under load: a model timed right after idling reads 2-3x slow


def timed(fn, runs: int, warmup_s: float = WARMUP_S) -> dict:
    """Median / p90 / min ms of `runs` calls of fn(), after warmup_s seconds of untimed calls (at least
    one): the keys of the harness's rows."""
    if runs < 1:
        raise ValueError(f"timed: runs must be >= 1, got {runs}")
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
    return {"median_ms": statistics.median(ts) * 1e3, "p90_ms": ts[int(0.9 * (len(ts) - 1))] * 1e3,
            "min_ms": ts[0] * 1e3}


def once(fn, *args, **kwargs):
    """(fn(*args, **kwargs), seconds it took): one call, no warm-up."""
    t0 = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - t0


def in_place_gpu_ms(model, slot: int = 0):
    """The GPU time (ms, gpuc's timestamps) of the last run_in_place of a loaded gpuc model on `slot`: read
    from the slot's timestamps, since run_in_place leaves last_gpu_ms at the last run()'s.  None where
    there is none: no timestamps on the device, or a bundle with host steps (whose runs have no one
    GPU time: last_gpu_ms is None there too)."""
    sl = model.slots[slot]
    if model.program is not None or sl.pool is None:
        return None
    from gpuc.runtime import commands
    return commands.read_ms(model.device, sl.pool, 2)[-1]


def cuda_us(fn, runs: int, warm: int = 3) -> float:
    """Median microseconds of fn() between two CUDA events, after `warm` calls (the PyTorch side's GPU
    time; torch is imported here only)."""
    import torch
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(runs):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1e3)
    return statistics.median(times)


def warm_profile(model, runs: int, warm_s: float = 1.0):
    """(outputs of one run as float64, `gpuc.runtime.profile.profile` of `runs` runs) of a loaded gpuc model on
    seeded random inputs, after `warm_s` of runs: a GPU left idle while the host compiled clocks down."""
    import numpy as np
    from gpuc.runtime.profile import profile
    rng = np.random.default_rng(0)
    inputs = [rng.standard_normal(list(s.shape)).astype(s.dtype) for s in model.inputs]
    outs = [np.asarray(o, np.float64) for o in model.run(inputs)]
    t0 = time.time()
    while time.time() - t0 < warm_s:
        model.run(inputs)
    return outs, profile(model, inputs, runs)


def profiles_in_turns(models: dict, inputs, rounds: int = 3, warm_runs: int = 20, runs: int = 10):
    """({name: [GPU ms of each round]}, {name: the last round's profile}) of the loaded gpuc `models` ({name:
    model}), timed in turns for `rounds` rounds -- each model `warm_runs` untimed runs, then a
    `gpuc.runtime.profile.profile` of `runs` -- so that clock drift hits every model alike (A/B runs)."""
    from gpuc.runtime.profile import profile
    ms, last = {name: [] for name in models}, {}
    for _ in range(rounds):
        for name, m in models.items():
            for _ in range(warm_runs):
                m.run(inputs)
            last[name] = profile(m, inputs, runs)
            ms[name].append(round(last[name]["run_gpu_ms"], 3))
    return ms, last
