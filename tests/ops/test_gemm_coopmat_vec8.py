"""The cooperative-matrix gemm's 16-byte loads (CM_AV / CM_BV = 8), its shared layout (one uvec4
array, accumulator staging over the A/B bytes), and the fp16
storage wishes of gemm kernels (passes/precision.py: a plain gemm's tensors stay float32 unless a
coopmat gemm needs them in float16).  The variant runs through the emulated path on lavapipe
(GPUC_TEST_COOPMAT_EMULATE); benchmarks/archive/coopmat_sweep.py checks the real one on a GPU."""
from __future__ import annotations

import numpy as np
import pytest

import gpuc
from gpuc.compiler import normalize_options, options
from gpuc.compiler.driver import prepare_batched
from gpuc.compiler.ir import GPU
from gpuc.compiler.ops import gemm_coopmat as cm
from gpuc.compiler.passes.precision import store_fp16
from helpers.builder import ModelBuilder
from helpers.litert import run_litert
from helpers.precision import compile_coopmat_emulated

TOL16 = 2e-2


def aligned_model(seed=0):
    """3x3 conv CI=16 (IM2COL, 8-aligned k groups), 1x1 conv 16->40 (GNP 40: 8-wide B), FC 40->20
    over the pixels (GNP 20: 4-wide B) and a residual ADD; M = 117 (masked edges)."""
    rng = np.random.default_rng(seed)
    H, W = 13, 9
    mb = ModelBuilder()
    x = mb.input("x", [1, H, W, 16])
    x2 = mb.tensor("x2", [1, H, W, 16])
    mb.op("ADD", [x, x], [x2])

    def conv(name, src, ci, co, k, act):
        w = mb.const(name + "w", rng.normal(0, 0.3, (co, k, k, ci)).astype(np.float32))
        b = mb.const(name + "b", rng.normal(0, 0.1, co).astype(np.float32))
        t = mb.tensor(name, [1, H, W, co])
        mb.op("CONV_2D", [src, w, b], [t], padding="SAME", stride_w=1, stride_h=1, fused_activation_function=act)
        return t
    c1 = conv("c1", x2, 16, 16, 3, "RELU")
    c2 = conv("c2", c1, 16, 40, 1, "NONE")
    f = mb.tensor("f", [H * W, 20])
    mb.op("FULLY_CONNECTED", [c2, mb.const("fw", rng.normal(0, 0.3, (20, 40)).astype(np.float32)), -1], [f])
    mb.output(f)
    return mb.finish(), [rng.uniform(-1, 1, (1, H, W, 16)).astype(np.float32)]


def _gemms(model, monkeypatch, emulate: bool):
    with options.using(options.current().replace(coopmat_emulate=emulate)):
        p = prepare_batched(model, normalize_options({"precision": "fp16"}))
        store_fp16(p.graph, p.program)
    return p.graph, [k for k in p.program if k.kind == GPU and k.template == "gemm"]


def test_vector_widths_follow_alignment(monkeypatch, compile_options):
    m, _ = aligned_model()
    _, gemms = _gemms(m, monkeypatch, emulate=True)
    widths = [cm.vector_widths(k.defines) for k in gemms]
    assert widths == [(8, 8), (8, 8), (8, 4)]
    d = dict(gemms[0].defines)
    assert cm.vector_widths(dict(d, CIG=12)) == (4, 8)           # k groups of 8 would cross pixels
    assert cm.vector_widths(dict(d, VEC_A=0)) == (4, 8)
    assert cm.vector_widths(dict(d, B_T=1)) == (8, 4)
    compile_options(coopmat_vec8=False)
    assert cm.vector_widths(d) == (4, 4)


def test_smem_staging_reuses_the_ab_bytes():
    p = cm.CoopPlan(4, 2, 4, 4, 16, 2)
    assert p.smem_bytes() == 2 * (2 * 256 * 24 + 2 * 128 * 24)
    assert cm.CoopPlan(2, 2, 1, 1, 16, 1).smem_bytes() == 4 * 1024      # 4 subgroups' fp32 tiles dominate
    for M, N, K in ((4096, 4096, 4096), (100352, 96, 384), (49, 512, 4608)):
        assert cm.plan_coopmat(M, N, K, 1, cm.BIG_SMEM).smem_bytes() <= cm.BIG_SMEM


@pytest.mark.parametrize("stages", [1, 2])
def test_emulated_vec8_variant_matches(gpu, monkeypatch, compile_options, stages):
    m, xs = aligned_model()
    refs = run_litert(m, xs)
    orig = cm.plan_coopmat
    monkeypatch.setattr(cm, "plan_coopmat", lambda M, N, K, G=1, lim=cm.WG_SMEM: orig(M, N, K, G, lim)
                        if stages == 2 else cm.CoopPlan(2, 1, 1, 2, 32, 1))
    data = compile_coopmat_emulated(m)
    monkeypatch.setenv("GPUC_VARIANTS", "coopmat=force")
    with gpuc.load(data, device=gpu.device) as lm:
        assert lm.bundle.stats["variants_used"] == {"coopmat": 3}
        out = lm.run(xs)[0]
    assert np.isfinite(out).all()
    assert float(np.abs(out - refs[0]).max()) <= TOL16 * float(np.abs(refs[0]).max())
    compile_options(coopmat_vec8=False)                        # the 8-byte path gives the same sums
    data4 = compile_coopmat_emulated(m)
    with gpuc.load(data4, device=gpu.device) as lm:
        assert np.array_equal(lm.run(xs)[0], out)


def test_plain_gemm_tensors_stay_fp32(monkeypatch, compile_options):
    """Without a coopmat variant (tiny gemms) every gemm binding stays float32 under fp16; with the
    variant, A and B are float16 (the variant needs them), the rest as fp16 storage allows."""
    m, _ = aligned_model()
    g, gemms = _gemms(m, monkeypatch, emulate=False)
    assert all(not k.variants for k in gemms)
    assert {g.t(t).dtype for k in gemms for _, t in k.bindings} == {"float32"}
    g, gemms = _gemms(m, monkeypatch, emulate=True)
    assert all(k.variants for k in gemms)
    for k in gemms:
        dt = {n: g.t(t).dtype for n, t in k.bindings}
        assert dt["w"] == dt["x"] == "float16"
    compile_options(fp16_plain_gemms=True)
    g, gemms = _gemms(m, monkeypatch, emulate=False)
    assert g.t(dict(gemms[1].bindings)["x"]).dtype == "float16"
