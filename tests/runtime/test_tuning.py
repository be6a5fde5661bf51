"""Kernels chosen by measurement (runtime/tuning.py): a load times each dispatch's candidate kernels
on the device, keeps the fastest, and caches the choice per bundle and device; `measured` variants
(candidates the cost model did not pick) run only where a measurement chose them."""
from __future__ import annotations

import dataclasses
import json
import os

import numpy as np
import pytest

pytest.importorskip("vulkan")

import gpuc  # noqa: E402
from gpuc.compiler import compile_model  # noqa: E402
from gpuc.errors import GpucError  # noqa: E402
from gpuc.runtime import bundle as B  # noqa: E402
from gpuc.runtime import tuning  # noqa: E402
from gpuc.runtime.executor import LoadedModel  # noqa: E402
from gpuc.runtime.variants import resolve  # noqa: E402
from helpers.builder import ModelBuilder  # noqa: E402


def reductions(fixed: bool = False):
    """Two long reductions (each with a `subgroup` variant on lavapipe); `fixed`: and a MUL (no variants)."""
    mb = ModelBuilder()
    x = mb.input("x", [2, 300])
    ax = mb.const("ax", np.array([1], np.int32))
    for op in ("SUM", "REDUCE_MAX"):
        t = mb.tensor(op.lower(), [2])
        mb.op(op, [x, ax], [t], keep_dims=False)
        mb.output(t)
    if fixed:
        y = mb.tensor("y", [2, 300])
        mb.op("MUL", [x, x], [y])
        mb.output(y)
    return compile_model(mb.finish(), cache=False)


@pytest.fixture(scope="module")
def data():
    return reductions()


@pytest.fixture(scope="module")
def with_fixed():
    """reductions() plus a MUL with no variants: a dispatch every round runs with round 0's kernel."""
    return reductions(fixed=True)


def as_measured(data: bytes, which) -> bytes:
    """The bundle with variants `which` (positions) turned into measured-only candidates."""
    b = B.read_bundle(data)
    b = dataclasses.replace(b, variants=[dataclasses.replace(v, measured=i in which) for i, v in enumerate(b.variants)])
    return B.write_bundle(b)


def test_measured_flag_round_trips_and_is_never_run_unchosen(gpu, data):
    b = B.read_bundle(as_measured(data, {0}))
    assert [v.measured for v in b.variants] == [True, False]
    plain = resolve(b, gpu.device)                         # the cost model: dispatch of variant 0 stays plain
    assert plain.stats["variants_used"] == {"subgroup": 1}
    d0 = b.variants[0].dispatch
    assert plain.dispatches[d0].shader == next(i for i, s in enumerate(plain.shaders) if "subgroup" not in s.name)
    both = resolve(b, gpu.device, choice={d0: 0})
    assert both.stats["variants_used"] == {"subgroup": 2}
    none = resolve(b, gpu.device, choice={d0: None, b.variants[1].dispatch: None})
    assert none.stats.get("variants_used") == {}


def test_load_measures_then_reads_the_cache(gpu, data, monkeypatch):
    x = np.random.default_rng(0).standard_normal((2, 300)).astype(np.float32)
    monkeypatch.setenv("GPUC_TUNE", "off")
    with gpuc.load(data, device=gpu.device) as m:
        assert "tuning" not in m.load_info
        ref = m.run([x])
    monkeypatch.setenv("GPUC_TUNE", "on")
    with gpuc.load(data, device=gpu.device) as m:
        rec = m.load_info["tuning"]
        assert rec["how"] == "measured" and rec["dispatches"] == 2
        out = m.run([x])
    path = tuning.cache_file(B.read_bundle(data), gpu.device)
    cached = json.loads(open(path).read())
    assert set(cached["choice"]) == {str(v.dispatch) for v in B.read_bundle(data).variants}
    assert all(set(t) == {"plain", str(i)} for i, t in enumerate(cached["us"].values()))
    with gpuc.load(data, device=gpu.device) as m:
        assert m.load_info["tuning"]["how"] == "cached"
        again = m.run([x])
    for a, b, c in zip(ref, out, again):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-4)
        np.testing.assert_array_equal(c, b)


def test_a_cache_file_that_does_not_fit_is_measured_again(gpu, data, monkeypatch):
    monkeypatch.setenv("GPUC_TUNE", "on")
    path = tuning.cache_file(B.read_bundle(data), gpu.device)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    for junk in (b"\x00garbage", b'{"choice": {"0": 7}}', b'{"choice": []}', b'{"choice": {"x": null}}'):
        with open(path, "wb") as f:
            f.write(junk)
        with gpuc.load(data, device=gpu.device) as m:
            assert m.load_info["tuning"]["how"] == "measured", junk


def test_auto_leaves_cpu_devices_and_bundles_without_candidates_alone(gpu, data, monkeypatch):
    monkeypatch.setenv("GPUC_TUNE", "auto")
    b = B.read_bundle(data)
    assert not tuning.wanted(b, gpu.device)                            # no measured candidates
    measured = B.read_bundle(as_measured(data, {0, 1}))
    assert tuning.wanted(measured, gpu.device) == (not gpu.device.is_cpu)
    monkeypatch.setenv("GPUC_TUNE", "sometimes")
    with pytest.raises(GpucError, match="GPUC_TUNE"):
        tuning.mode()


def test_pick_keeps_the_cost_models_choice_within_the_margin():
    times = {0: {None: 10.0, 3: 9.9}, 1: {None: 10.0, 4: 5.0}, 2: {None: 4.0, 5: 8.0}}
    assert tuning.pick(times, {0: None, 1: None, 2: 5}) == {0: None, 1: 4, 2: None}


def test_fp16_gemms_carry_other_tile_plans_as_measured_candidates(gpu):
    from gpuc.compiler.ops import gemm_candidates as cand
    from gpuc.compiler.ops import gemm_coopmat as cm
    from gpuc.compiler.options import CompileOptions
    M, N, K = 4096, 1024, 256                      # (tiles that fill the GPU: no small-M plans beside them)
    assert not cand.underfilled(M, N, K, 1) and cand.underfilled(512, 512, 512, 1)
    small = cand.small_candidates(512, 512, 512, 1)    # a gemm leaving SMs idle: the small-M plans measured too
    assert len(cand.coopmat_variants(512, 512, 512)) == 2 + 2 + len(small) and len(small) >= 3
    alts = cm.alternative_plans(M, N, K, 1, 2)
    picked = {cm.plan_coopmat(M, N, K, 1, cm.BIG_SMEM), cm.plan_coopmat(M, N, K, 1, cm.WG_SMEM)}
    assert len(alts) == 2 and not picked & set(alts)
    mb = ModelBuilder()
    x0 = mb.input("x", [M, K])
    x = mb.tensor("x2", [M, K])
    mb.op("ADD", [x0, x0], [x])                    # the gemm reads a float16 activation, as in a network
    w = mb.const("w", (np.random.default_rng(1).standard_normal((N, K)) * 0.05).astype(np.float32))
    y = mb.tensor("y", [M, N])
    mb.op("FULLY_CONNECTED", [x, w, -1], [y])
    mb.output(y)
    model = mb.finish()
    for n in (2, 0):
        b = B.read_bundle(compile_model(model, cache=False, options=CompileOptions(precision="fp16", tune_candidates=n)))
        flags = [v.measured for v in b.variants if v.name == "coopmat"]
        assert flags.count(True) == n and flags.count(False) >= 1
        assert len({v.dispatch for v in b.variants}) == 1
        plain = resolve(b, gpu.device)              # lavapipe has no cooperative matrices: the plain kernel
        assert "coopmat" not in plain.stats["variants_used"]


@pytest.mark.parametrize("whole, kept", [((1.0, 2.0), False), ((2.0, 1.0), True)])
def test_per_dispatch_picks_are_kept_only_where_the_whole_program_is_faster(gpu, monkeypatch, tmp_path, whole,
                                                                            kept):
    monkeypatch.setenv("GPUC_TUNE", "on")
    monkeypatch.setenv("GPUC_CACHE_DIR", str(tmp_path))
    data = as_measured(reductions(), {0, 1})               # the cost model: both dispatches plain
    b = B.read_bundle(data)
    picked = {v.dispatch: i for i, v in enumerate(b.variants)}
    monkeypatch.setattr(tuning, "pick", lambda times, default: dict(picked))
    seen = []

    def whole_ms(bundle, device, choices, model_class, spec=None):
        seen.append(choices)
        return list(whole)
    monkeypatch.setattr(tuning, "whole_ms", whole_ms)
    with gpuc.load(data, device=gpu.device) as m:
        rec = m.load_info["tuning"]
    assert seen and seen[0][1] == picked and all(v is None for v in seen[0][0].values())
    assert rec["how"] == "measured" and rec["whole_ms"] == list(whole)
    assert rec["changed"] == (len(picked) if kept else 0)
    cached = json.loads(open(tuning.cache_file(b, gpu.device)).read())["choice"]
    assert cached == {str(d): (i if kept else None) for d, i in picked.items()}


def test_whole_ms_times_each_choice_on_the_device(gpu, data):
    b = B.read_bundle(data)
    cands = tuning.candidates(b, gpu.device)
    ms = tuning.whole_ms(b, gpu.device, [tuning.default_choice(b, cands), {d: lst[0] for d, lst in cands.items()}],
                         gpuc.runtime.executor.LoadedModel)
    assert ms is not None and len(ms) == 2 and all(t > 0 for t in ms)


def test_every_round_runs_warm_before_it_is_timed(gpu, data, monkeypatch):
    """Each round's program runs untimed first (WARM_S for round 0, ROUND_WARM_S after): a round's pipelines are
    created with the GPU idle, and a GPU that clocked down meanwhile made the later rounds' candidates look slower
    (H100, 15 rounds of a batch-1 fp16 CNN: the last rounds' gemms 2-4x their warm times)."""
    from gpuc.runtime import profile as P
    from gpuc.runtime.executor import LoadedModel
    warm_runs, runs = [], {}

    class Counting(LoadedModel):
        def run(self, *a, **k):
            runs[id(self)] = runs.get(id(self), 0) + 1
            return super().run(*a, **k)

    real = P.profile

    def spy(model, inputs, n, *a, **k):
        warm_runs.append(runs.get(id(model), 0))
        return real(model, inputs, n, *a, **k)

    monkeypatch.setattr(P, "profile", spy)
    monkeypatch.setattr(tuning, "WARM_S", 0.01)
    monkeypatch.setattr(tuning, "ROUND_WARM_S", 0.01)
    b = B.read_bundle(as_measured(data, {0, 1}))
    times = tuning.measure(b, gpu.device, tuning.candidates(b, gpu.device), Counting)
    assert times is not None and len(warm_runs) == 2 and all(n >= 1 for n in warm_runs)


def _synthetic_rounds(monkeypatch, slow_calls, factor=3.0):
    """Profiles whose rows all read 100 + k us at the k-th call (0-based), times `factor` at the calls in
    `slow_calls` (a round timed while the GPU ran slow); returns the list of the calls' rows."""
    from gpuc.runtime import profile as P
    real, calls = P.profile, []

    def spy(model, inputs, n, *a, **k):
        p = real(model, inputs, n, *a, **k)
        us = (100.0 + len(calls)) * (factor if len(calls) in slow_calls else 1.0)
        p = dict(p, rows=[dict(r, raw_us=us) for r in p["rows"]])
        calls.append(p["rows"])
        return p

    monkeypatch.setattr(P, "profile", spy)
    monkeypatch.setattr(tuning, "WARM_S", 0.01)
    monkeypatch.setattr(tuning, "ROUND_WARM_S", 0.01)
    return calls


def test_a_round_that_ran_slow_is_timed_again(gpu, with_fixed, monkeypatch):
    """A round whose dispatches running round 0's kernel took SLOW_ROUND longer than in round 0 is timed again,
    and the candidates keep the retimed figures (H200: a process's first load timed one round of a dense-block CNN
    at 3.78x, and its picks ran 2.5% slower)."""
    calls = _synthetic_rounds(monkeypatch, slow_calls={1})
    b = B.read_bundle(as_measured(with_fixed, {0, 1}))
    stats = {}
    times = tuning.measure(b, gpu.device, tuning.candidates(b, gpu.device), LoadedModel, stats=stats)
    assert len(calls) == 3 and stats == {"retimed": 1}
    assert {d: t[next(k for k in t if k is not None)] for d, t in times.items()} == {0: 102.0, 1: 102.0}
    assert all(t[None] == 100.0 for t in times.values())


def test_retiming_is_bounded_and_keeps_the_attempt_nearest_round_0(gpu, with_fixed, monkeypatch):
    calls = _synthetic_rounds(monkeypatch, slow_calls={1, 2, 3}, factor=2.0)
    b = B.read_bundle(as_measured(with_fixed, {0, 1}))
    stats = {}
    times = tuning.measure(b, gpu.device, tuning.candidates(b, gpu.device), LoadedModel, stats=stats)
    assert len(calls) == 2 + tuning.ROUND_RETRIES and stats == {"retimed": tuning.ROUND_RETRIES}
    assert all(t[k] == 202.0 for t in times.values() for k in t if k is not None)   # (202 < 204 < 206)


def test_rounds_without_a_reference_or_not_slow_are_timed_once(gpu, data, with_fixed, monkeypatch):
    """No retiming where the round ran as fast as round 0, nor where no dispatch runs round 0's kernel again
    (every dispatch has a candidate in that round: nothing to compare with)."""
    calls = _synthetic_rounds(monkeypatch, slow_calls=set())
    b = B.read_bundle(as_measured(with_fixed, {0, 1}))
    stats = {}
    assert tuning.measure(b, gpu.device, tuning.candidates(b, gpu.device), LoadedModel, stats=stats) is not None
    assert len(calls) == 2 and stats == {}
    calls.clear()
    monkeypatch.setattr(tuning, "ROUND_RETRIES", 2)
    calls = _synthetic_rounds(monkeypatch, slow_calls={1})
    b = B.read_bundle(as_measured(data, {0, 1}))
    assert tuning.measure(b, gpu.device, tuning.candidates(b, gpu.device), LoadedModel, stats=stats) is not None
    assert len(calls) == 2 and stats == {}


def test_slowdown_is_a_ratio_of_sums_over_the_unchanged_dispatches(monkeypatch):
    rows = [{"index": 0, "raw_us": 30.0}, {"index": 1, "raw_us": 500.0}, {"index": 2, "raw_us": 90.0}]
    base = {0: 10.0, 1: 100.0, 2: 50.0}
    assert tuning.slowdown(rows, base, {0, 2}) == pytest.approx(120.0 / 60.0)
    assert tuning.slowdown(rows, base, {0}) is None                  # under MIN_REF_US in round 0
    monkeypatch.setattr(tuning, "MIN_REF_US", 0.0)
    assert tuning.slowdown(rows, base, {0}) == pytest.approx(3.0) and tuning.slowdown(rows, base, set()) is None
