"""Long reductions (a workgroup per output: MEAN / SUM / REDUCE_* with >= 256 elements per output,
SOFTMAX / LOG_SOFTMAX / L2_NORMALIZATION rows >= 64) and their `subgroup` variant (GL_KHR_shader_subgroup_arithmetic; lavapipe has
it, subgroup size 8): both paths against LiteRT, within fp32 rounding of each other; a device
without subgroup arithmetic (GPUC_DISABLE_SUBGROUP_OPS=1) runs the shared-memory tree."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("vulkan")

import gpuc  # noqa: E402
from gpuc.compiler import compile_model  # noqa: E402
from gpuc.runtime import bundle as B  # noqa: E402
from helpers.builder import ModelBuilder  # noqa: E402
from helpers.litert import run_litert  # noqa: E402


def reduce_model():
    rng = np.random.default_rng(3)
    mb = ModelBuilder()
    x = mb.input("x", [2, 3, 300])
    last = mb.const("last", np.array([2], np.int32))
    two = mb.const("two", np.array([0, 2], np.int32))
    for op in ("MEAN", "SUM", "REDUCE_MAX", "REDUCE_MIN", "REDUCE_PROD"):
        t = mb.tensor(op, [2, 3])
        mb.op(op, [x, last], [t], keep_dims=False)
        mb.output(t)
    k = mb.tensor("mean_keep", [1, 3, 1])
    mb.op("MEAN", [x, two], [k], keep_dims=True)               # two reduced axes, strided
    mb.output(k)
    for op, attrs in (("SOFTMAX", dict(beta=0.7)), ("LOG_SOFTMAX", {}), ("L2_NORMALIZATION", {})):
        s = mb.tensor(op.lower(), [2, 3, 300])
        mb.op(op, [x], [s], **attrs)
        mb.output(s)
    xs = rng.normal(0, 1, (2, 3, 300)).astype(np.float32)
    xs[1, 2, :] = rng.uniform(0.9, 1.1, 300)                  # a product row that stays finite
    return mb.finish(), [xs]


def test_subgroup_and_tree_reductions_match_litert(gpu, monkeypatch):
    model, xs = reduce_model()
    refs = run_litert(model, xs)
    data = compile_model(model, cache=False)
    b = B.read_bundle(data)
    assert [v.name for v in b.variants] == ["subgroup"] * 9
    assert all(v.requires == {"subgroup_arithmetic": True} for v in b.variants)
    runs = {}
    for mode in ("off", "auto"):
        monkeypatch.setenv("GPUC_VARIANTS", mode)
        with gpuc.load(data, device=gpu.device) as m:
            assert m.bundle.stats["variants_used"] == ({} if mode == "off" else {"subgroup": 9})
            runs[mode] = m.run(xs)
    for mode, outs in runs.items():
        for o, r in zip(outs, refs):
            fin = np.isfinite(r)
            assert np.array_equal(np.isfinite(o), fin)
            assert float(np.abs(o[fin] - r[fin]).max()) <= 1e-5 * max(float(np.abs(r[fin]).max()), 1.0), mode
    for a, c in zip(runs["off"], runs["auto"]):                 # same values up to fp32 summation order
        fin = np.isfinite(a)
        assert float(np.abs(a[fin] - c[fin]).max()) <= 1e-5 * max(float(np.abs(a[fin]).max()), 1.0)
    assert np.array_equal(runs["off"][2], runs["auto"][2]) and np.array_equal(runs["off"][3], runs["auto"][3])


def test_device_without_subgroup_arithmetic_runs_the_tree(monkeypatch):
    model, xs = reduce_model()
    data = compile_model(model, cache=False)
    monkeypatch.setenv("GPUC_DISABLE_SUBGROUP_OPS", "1")
    with gpuc.load(data) as m:                                 # a fresh device reads the variable
        assert not m.device.subgroup_ops and m.bundle.stats["variants_used"] == {}
        assert all("+subgroup" not in s.name for s in m.bundle.shaders)
        m.run(xs)
    monkeypatch.setenv("GPUC_VARIANTS", "subgroup=force")
    with pytest.raises(gpuc.errors.DeviceError, match="no subgroup arithmetic"):
        gpuc.load(data)


def test_short_reductions_keep_one_invocation_per_output():
    mb = ModelBuilder()
    x = mb.input("x", [4, 50])
    t = mb.tensor("m", [4])
    mb.op("MEAN", [x, mb.const("a", np.array([1], np.int32))], [t], keep_dims=False)
    mb.output(t)
    b = B.read_bundle(compile_model(mb.finish(), cache=False))
    assert not b.variants and b.dispatches[0].groups == (1, 1, 1)
