"""A LayerNorm folded into the FULLY_CONNECTED gemm that reads it (ops/ln_fold.py, gemm.comp LN_FOLD): one
dispatch, LiteRT's results within fp16 storage rounding through the plain kernel and the (emulated)
cooperative-matrix plans, rows whose mean is far from zero, K not a multiple of the K chunk; no fold in fp32,
nor where another op reads the LayerNorm's output."""
from __future__ import annotations

import numpy as np
import pytest

import gpuc
from gpuc.compiler.ops import gemm_coopmat
from gpuc.runtime.bundle import read_bundle
from helpers.builder import ModelBuilder
from helpers.litert import run_litert
from helpers.models import layer_norm_chain

RNG = np.random.default_rng(21)


def ln_fc_model(shape=(1, 24, 64), n=40, act="NONE", second_reader=False):
    """x + c -> LayerNorm chain over the last axis -> FC (+ bias, act); second_reader: the LayerNorm's output
    is also an input of an ADD."""
    mb = ModelBuilder()
    x0 = mb.input("x", list(shape))
    x = mb.tensor("xa", list(shape))                 # (model inputs stay float32 under fp16)
    mb.op("ADD", [x0, mb.const("c0", np.full(shape[-1:], 0.25, np.float32))], [x])
    y = layer_norm_chain(mb, x, shape, RNG, eps=1e-5)
    w = mb.const("w", (RNG.standard_normal((n, shape[-1])) / np.sqrt(shape[-1])).astype(np.float32))
    o = mb.tensor("o", list(shape[:-1]) + [n])
    mb.op("FULLY_CONNECTED", [y, w, mb.const("b", RNG.standard_normal(n).astype(np.float32))], [o],
          fused_activation_function=act, keep_num_dims=True)
    mb.output(o)
    if second_reader:
        z = mb.tensor("z", list(shape))
        mb.op("ADD", [y, x], [z])
        mb.output(z)
    return mb.finish()


def run(model, x, **opts):
    data = gpuc.compile(model, cache=False, **opts)
    with gpuc.load(data) as m:
        return m.run([x]), read_bundle(data)


def close(outs, refs, rel):
    for o, r in zip(outs, refs):
        assert np.isfinite(o).all()
        assert float(np.abs(o - r).max()) <= rel * float(np.abs(r).max()), float(np.abs(o - r).max())


CASES = [dict(shape=(1, 24, 64), n=40, mean=0.0, act="RELU"),
         dict(shape=(2, 9, 200), n=20, mean=30.0, act="NONE")]       # K = 200: a partial last K chunk


@pytest.mark.parametrize("variants", ["off", "force"])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_fp16_fold_is_one_gemm_and_matches_litert(compile_options, monkeypatch, variants, case):
    """The plain kernel (coopmat off) and the emulated cooperative-matrix kernel (forced) both fold."""
    c = CASES[case]
    monkeypatch.setenv("GPUC_VARIANTS", f"coopmat={variants}")
    compile_options(coopmat_emulate=True)
    model = ln_fc_model(c["shape"], c["n"], c["act"])
    x = (RNG.standard_normal(c["shape"]) * 2 + c["mean"]).astype(np.float32)
    outs, b = run(model, x, precision="fp16")
    assert len(b.dispatches) == 2                   # the ADD, the folded gemm
    assert any(v.name == "coopmat" for v in b.variants)
    close(outs, run_litert(model, [x]), 2e-2 if c["mean"] else 5e-3)


@pytest.mark.parametrize("plan", [gemm_coopmat.CoopPlan(1, 4, 1, 1, 64, 2, 2), gemm_coopmat.CoopPlan(2, 2, 2, 2, 32, 2),
                                  gemm_coopmat.CoopPlan(2, 2, 1, 1, 32, 1)])
def test_fp16_fold_small_m_plans(compile_options, monkeypatch, plan):
    """16-row tiles with K slices across subgroups, the mid-size tiles, one shared stage (emulated)."""
    monkeypatch.setenv("GPUC_VARIANTS", "coopmat=force")
    monkeypatch.setattr(gemm_coopmat, "plan_coopmat", lambda *a, **k: plan)
    compile_options(coopmat_emulate=True)
    model = ln_fc_model((1, 40, 96), 48)
    x = (RNG.standard_normal((1, 40, 96)) + 3.0).astype(np.float32)
    outs, b = run(model, x, precision="fp16")
    assert len(b.dispatches) == 2
    close(outs, run_litert(model, [x]), 5e-3)


def test_no_fold_in_fp32_or_with_another_reader(compile_options):
    compile_options(coopmat_emulate=True)
    model = ln_fc_model()
    x = RNG.standard_normal((1, 24, 64)).astype(np.float32)
    outs, b = run(model, x)
    assert len(b.dispatches) == 3                   # ADD, LAYER_NORM, FC
    close(outs, run_litert(model, [x]), 1e-5)
    model = ln_fc_model(second_reader=True)
    outs, b = run(model, x, precision="fp16")
    assert any(d.label.startswith("LAYER_NORM") for d in b.dispatches)
    close(outs, run_litert(model, [x]), 2e-2)
