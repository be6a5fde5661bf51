"""Kernels chosen by measurement: where a bundle offers a dispatch more than one kernel (its plain
kernel and `Bundle.variants`: the cooperative-matrix gemm, other tile plans, subgroup reductions),
the first load on a device times each candidate there and keeps the fastest.  The compiler's cost
model picks without a device; it also marks the candidates it did not pick as `measured`, which run
only where a measurement chose them (runtime/variants.py).

How: the candidates are measured in rounds, each a whole program with one kernel per dispatch
(round 0: every plain kernel; round r: each dispatch's r-th candidate the device can run), with
per-dispatch timestamps (runtime/profile.py) over a few runs on generated inputs.  A round whose
dispatches that run round 0's kernels again took SLOW_ROUND longer than in round 0 (the GPU's clocks
moved) is timed again.  Each dispatch keeps the fastest kernel; the compiler's own pick wins ties
within `MARGIN`.  The picks are then confirmed on the whole program (`whole_ms`: the cost model's
choice and the picks, whole runs in turns): where the program is not faster with them, the cost
model's choice stays.  Rounds time dispatches
in their real neighbourhood (caches, clocks), and a program of N dispatches costs as many rounds as
its most-offered dispatch has candidates, not N x candidates.

The choice is cached under the cache directory's `tuning/`, keyed by the bundle's checksum and the
device (vendor, device id, driver version, pipeline-cache UUID): a later load reads it in a few
microseconds.  A cache file that does not fit the bundle is ignored and measured again.

GPUC_TUNE: "auto" (default: tune bundles with `measured` candidates on a GPU, not on a CPU
implementation such as lavapipe, where timings say nothing of a GPU), "on" (tune every bundle with
variants, on any device), "off" (the cost model's choice, as without a device).
"""
from __future__ import annotations

import json
import os
import time
import warnings

import numpy as np

from gpuc.errors import GpucError

VERSION = 1
MODES = ("auto", "on", "off")
MARGIN = 0.03          # another kernel must be 3% faster than the cost model's pick to replace it
RUNS = 7               # timed runs per round (medians per dispatch), after one warm-up
CONFIRM_RUNS = 9       # whole-program runs of the cost model's and the measured choice each, in turns: the
#                        per-dispatch picks are kept only where the program is faster with them (H100, a dense-block
#                        CNN at batch 32 fp16: three loads kept the plain kernel on 17, 46 and 75 convolutions, 9.1 to
#                        10.4 ms, where the cost model's choice took 9.7; rounds timed with timestamps between
#                        dispatches that run side by side, and clocks that move, mislead the per-dispatch rows)
WARM_S = 0.2           # round 0 first runs this long untimed: a GPU left idle while the host compiled clocks
#                        down, and the rounds timed while it clocked up favoured later candidates (H100,
#                        a batch-1 fp16 CNN: the choice measured warm ran 0.719 ms against 0.729)
ROUND_WARM_S = 0.05    # ... and every later round this long: its pipelines are created with the GPU idle, and without
#                        it the plans timed in rounds 11-15 of a batch-1 fp16 CNN came out 2-4x their warm times (H100,
#                        benchmarks/archive/tuning_round_warm_ab.py)
SLOW_ROUND = 1.10      # a round whose unchanged dispatches (those running round 0's kernel) took this much longer than
#                        in round 0 is timed again, after WARM_S more runs, at most ROUND_RETRIES times, keeping the
#                        attempt closest to round 0.  On the H200 (session 20, batch-32 fp16 CNNs, a process's first
#                        load, each round's pipelines compiled with the GPU idle): every dispatch of a dense-block
#                        CNN's round 1 timed 3.78x its time in the next load (candidates of 214 us at 925), and its
#                        picks ran 5.29 against 5.16 ms; a basic-block CNN's round 3 1.43x
ROUND_RETRIES = 2
MIN_REF_US = 20.0      # ... judged only where those dispatches took at least this long in round 0


def mode() -> str:
    from gpuc.runtime import settings
    m = settings.current().tune
    if m not in MODES:
        raise GpucError(f"GPUC_TUNE={m!r}: must be one of {', '.join(MODES)}")
    return m


def wanted(bundle, device, m: str | None = None) -> bool:
    """Whether loading `bundle` on `device` measures its kernels (see GPUC_TUNE)."""
    m = mode() if m is None else m
    if not bundle.variants or m == "off":
        return False
    return m == "on" or (not device.is_cpu and any(v.measured for v in bundle.variants))


def candidates(bundle, device, spec=None) -> dict:
    """{dispatch: [positions in bundle.variants the device can run]} for dispatches with any."""
    from gpuc.runtime.capabilities import missing
    from gpuc.runtime.variants import mode_of, modes
    given, out = modes(spec), {}
    for vi, v in enumerate(bundle.variants):
        if mode_of(given, v.name) != "off" and missing(v.requires, device) is None:
            out.setdefault(v.dispatch, []).append(vi)
    return out


def default_choice(bundle, cands: dict) -> dict:
    """The cost model's pick per dispatch: its first candidate not `measured`, else its plain kernel."""
    return {d: next((vi for vi in lst if not bundle.variants[vi].measured), None) for d, lst in cands.items()}


def device_key(device) -> str:
    p = device.props
    return f"{p.vendorID:x}-{p.deviceID:x}-{p.driverVersion:x}-{bytes(p.pipelineCacheUUID).hex()}"


def cache_file(bundle, device) -> str | None:
    ident = bundle.checksum or bundle.fingerprint
    if not ident:
        return None
    import xxhash
    from gpuc.runtime import cachedir
    key = xxhash.xxh64(f"{VERSION}|{ident}|{device.name}|{device_key(device)}".encode()).hexdigest()
    return os.path.join(cachedir.cache_path("tuning", create=False), key + ".json")


def read_cached(path: str | None, bundle, cands: dict) -> dict | None:
    """The cached choice when it fits `bundle` and `cands` exactly, else None."""
    if not path:
        return None
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        raw = data["choice"]
        choice = {int(d): (None if vi is None else int(vi)) for d, vi in raw.items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    if set(choice) != set(cands) or any(vi is not None and vi not in cands[d] for d, vi in choice.items()):
        return None
    return choice


def write_cached(path: str | None, choice: dict, times: dict) -> None:
    if not path:
        return
    from gpuc.runtime import cachedir
    body = {"version": VERSION, "choice": {str(d): vi for d, vi in sorted(choice.items())},
            "us": {str(d): {("plain" if k is None else str(k)): round(v, 3) for k, v in t.items()}
                   for d, t in sorted(times.items())}}
    try:
        cachedir.cache_path("tuning")
        cachedir.atomic_write(path, json.dumps(body).encode(), sync=False)
    except OSError:
        pass                          # an unwritable cache costs a measurement next time, nothing else


def sample_inputs(specs, items: int) -> list:
    """Inputs for timing: small normal values for floats, zeros for integers and booleans (indices
    stay in range)."""
    rng = np.random.default_rng(0)
    out = []
    for s in specs:
        shape = list(s.shape)
        if items > 1 and shape:
            shape[0] = items
        dt = np.dtype(s.dtype)
        out.append((rng.standard_normal(shape) * 0.5).astype(dt) if dt.kind == "f" else np.zeros(shape, dt))
    return out


def slowdown(rows, base: dict, same) -> float | None:
    """How much longer dispatches `same` took in a round's profile `rows` than in round 0 (`base`: {dispatch:
    raw us}), as a ratio of sums; None where they took under MIN_REF_US in round 0."""
    now = {row["index"]: row["raw_us"] for row in rows}
    ds = [d for d in same if d in now and d in base]
    ref = sum(base[d] for d in ds)
    return None if ref <= 0 or ref < MIN_REF_US else sum(now[d] for d in ds) / ref


def _warm(m, inputs, seconds: float) -> None:
    """Untimed runs of `m` for `seconds`."""
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        m.run(inputs)


def _timed_round(m, inputs, r: int, base: dict, same, stats: dict) -> list:
    """Round r's profile rows: after its warm-up runs, and timed again where it ran slow (SLOW_ROUND)."""
    from gpuc.runtime.profile import profile
    _warm(m, inputs, WARM_S if r == 0 else ROUND_WARM_S)
    rows = profile(m, inputs, RUNS)["rows"]
    ratio = None if r == 0 else slowdown(rows, base, same)
    for _ in range(ROUND_RETRIES):
        if ratio is None or ratio <= SLOW_ROUND:
            break
        stats["retimed"] = stats.get("retimed", 0) + 1
        _warm(m, inputs, WARM_S)
        again = profile(m, inputs, RUNS)["rows"]
        r2 = slowdown(again, base, same)
        if r2 is not None and r2 < ratio:
            rows, ratio = again, r2
    return rows


def measure(bundle, device, cands: dict, model_class, spec=None, stats: dict | None = None) -> dict | None:
    """{dispatch: {position or None: microseconds}} over the rounds, or None where this program
    cannot be timed per dispatch (host steps, control flow, sizes known only at run time, no
    timestamp queries).  `model_class` (executor.LoadedModel) loads each round's program; the rounds
    share the first round's arenas, so the weights are uploaded once.  A round whose dispatches that run
    round 0's kernels again took SLOW_ROUND longer is timed again; `stats` gets "retimed": how often."""
    from gpuc.runtime.variants import resolve
    stats = {} if stats is None else stats
    rounds = 1 + max(len(lst) for lst in cands.values())
    times = {d: {} for d in cands}
    base = {}                    # round 0's time of every dispatch, the reference of the later rounds
    first = None                 # round 0's model: later rounds share its arenas (weights uploaded once)
    try:
        for r in range(rounds):
            choice = {d: (lst[r - 1] if 0 < r <= len(lst) else None) for d, lst in cands.items()}
            m = model_class(resolve(bundle, device, spec, choice), device=device, slots=1,
                            arenas=None if first is None else first.arenas)
            try:
                if m.program is not None or m.dims is not None or not m.timestamps:
                    return None
                inputs = sample_inputs(m.inputs, m.max_batch)
                same = {i for i in base if i not in choice or choice[i] is None}      # (round 0's kernels)
                rows = _timed_round(m, inputs, r, base, same, stats)
            finally:
                if first is None:
                    first = m
                else:
                    m.close()
            if r == 0:
                base = {row["index"]: row["raw_us"] for row in rows}
            for row in rows:
                d = row["index"]
                if d in times and (r == 0 or choice[d] is not None):
                    times[d][choice[d]] = row["raw_us"]
    finally:
        if first is not None:
            first.close()
    return times


def whole_ms(bundle, device, choices: list, model_class, spec=None) -> list | None:
    """The GPU time (ms, median of CONFIRM_RUNS runs, taken in turns) of the whole program under each of
    `choices` (runtime/variants.resolve's `choice`), or None where it cannot be timed."""
    from gpuc.runtime.variants import resolve
    models, times = [], [[] for _ in choices]
    try:
        for c in choices:
            models.append(model_class(resolve(bundle, device, spec, c), device=device, slots=1,
                                      arenas=models[0].arenas if models else None))
        if not models[0].timestamps:
            return None
        inputs = sample_inputs(models[0].inputs, models[0].max_batch)
        for m in models:
            m.run(inputs)
        for _ in range(CONFIRM_RUNS):
            for m, t in zip(models, times):
                m.run(inputs)
                t.append(m.last_gpu_ms)
    finally:
        for m in models[::-1]:
            m.close()
    if any(x is None for t in times for x in t):
        return None
    return [float(np.median(t)) for t in times]


def pick(times: dict, default: dict) -> dict:
    """Each dispatch's fastest kernel; the cost model's pick unless another beats it by MARGIN."""
    out = {}
    for d, t in times.items():
        best = min(t, key=t.get)
        base = t.get(default.get(d), float("inf"))
        out[d] = best if t[best] < base * (1 - MARGIN) else default.get(d)
    return out


def choose(bundle, device, info: dict | None = None, spec=None, model_class=None) -> dict | None:
    """The measured (or cached) choice for `bundle` on `device` (runtime/variants.resolve's
    `choice`), or None: the cost model's.  `info` (a LoadedModel's load_info) gets a "tuning"
    record.  A failure to measure is a warning, never a failed load.  `model_class`: what loads the
    candidate programs (the loading LoadedModel's class); without one, nothing is measured."""
    if model_class is None or not wanted(bundle, device):
        return None
    cands = candidates(bundle, device, spec)
    if not cands:
        return None
    t0 = time.perf_counter()
    default = default_choice(bundle, cands)
    path = cache_file(bundle, device)
    choice = read_cached(path, bundle, cands)
    how, whole_ms_pair, stats = "cached", None, {}
    if choice is None:
        try:
            times = measure(bundle, device, cands, model_class, spec, stats)
        except GpucError as e:
            warnings.warn(f"gpuc: measuring kernel choices failed ({e}); using the cost model's", RuntimeWarning,
                          stacklevel=2)
            times = None
        if times is None:
            how, choice = "not measurable", None
        else:
            choice, how = pick(times, default), "measured"
            if choice != default:             # the per-dispatch picks, confirmed on the whole program
                try:
                    whole = whole_ms(bundle, device, [default, choice], model_class, spec)
                except GpucError as e:
                    warnings.warn(f"gpuc: timing the kernel choice failed ({e}); using the cost model's",
                                  RuntimeWarning, stacklevel=2)
                    whole, choice = None, dict(default)
                if whole is not None:
                    whole_ms_pair = [round(whole[0], 4), round(whole[1], 4)]
                    if not whole[1] < whole[0]:
                        choice = dict(default)
            write_cached(path, choice, times)
    if info is not None:
        info["tuning"] = {"how": how, "ms": round((time.perf_counter() - t0) * 1e3, 3), "dispatches": len(cands),
                          "changed": sum(choice[d] != default[d] for d in cands) if choice else 0}
        if whole_ms_pair is not None:         # [the cost model's choice, the per-dispatch picks]: ms a run
            info["tuning"]["whole_ms"] = whole_ms_pair
        if stats.get("retimed"):              # rounds timed again (SLOW_ROUND)
            info["tuning"]["retimed_rounds"] = stats["retimed"]
    return choice
