"""The largest gemm tiles (128 x 128 with 8 x 8 register blocks, the plans big GEMMs get) and the
cooperative-matrix variant's tile families (gemm_coopmat.FAMILIES, one and two shared stages, and the
32-column NARROW_PLANS; the cooperative-matrix operations emulated on lavapipe) forced through the
planners at every edge:
M / N / K not multiples of the tile, CO % 4 != 0, CI % 4 != 0 (scalar A loads), implicit GEMM with
stride and padding, groups, runtime weights (B_T), bias + activation + residual epilogue, and
several K chunks.  Reference: float64 numpy."""
import numpy as np
import pytest

pytest.importorskip("vulkan")

import gpuc  # noqa: E402
from gpuc.compiler.ops import gemm_dispatch, gemm_plan  # noqa: E402
from gpuc.compiler.ops import gemm_candidates  # noqa: E402
from gpuc.compiler.ops import gemm_coopmat as cm_mod  # noqa: E402
from helpers.builder import ModelBuilder  # noqa: E402

PLANS = [(128, 128, 8, 8, 8, 1), (128, 128, 16, 8, 8, 1), (64, 32, 16, 8, 4, 1), (32, 64, 8, 4, 8, 1),
         # SV4 (vec4 shared reads, two stages): the plans large GEMMs get
         (128, 128, 8, 8, 8, 1, True), (64, 128, 16, 8, 8, 1, True), (128, 32, 16, 8, 4, 1, True),
         (16, 16, 8, 4, 4, 1, True)]
COOP = [cm_mod.CoopPlan(*f, st) for f, _, _ in cm_mod.FAMILIES[::2] for st in (1, 2)] + list(gemm_candidates.NARROW_PLANS)


def _conv_ref(x, w, b, s, groups):
    """float64 NHWC conv, SAME padding (TFLite's split), w: [CO, KH, KW, CI / groups]."""
    n, h, wd, ci = x.shape
    co, kh, kw, cig = w.shape
    oh, ow = -(-h // s), -(-wd // s)
    pt = max((oh - 1) * s + kh - h, 0) // 2
    pl = max((ow - 1) * s + kw - wd, 0) // 2
    xp = np.zeros((n, h + kh + s * oh, wd + kw + s * ow, ci))
    xp[:, pt:pt + h, pl:pl + wd] = x
    out = np.zeros((n, oh, ow, co))
    cog = co // groups
    for gi in range(groups):
        for ky in range(kh):
            for kx in range(kw):
                patch = xp[:, ky:ky + s * oh:s, kx:kx + s * ow:s, gi * cig:(gi + 1) * cig]
                out[..., gi * cog:(gi + 1) * cog] += patch @ w[gi * cog:(gi + 1) * cog, ky, kx, :].T
    return out + b


def _run(gpu, model, inputs, precision="fp32"):
    m = gpuc.load(gpuc.compile(model, cache=False, precision=precision), device=gpu.device)
    try:
        return m.run(inputs)[0]
    finally:
        m.close()


# (input NHWC, CO, kernel, stride, groups)
CONVS = [([2, 9, 11, 5], 7, 3, 2, 1),        # CI % 4 != 0: scalar im2col loads; CO % 4 != 0
         ([1, 12, 10, 16], 36, 3, 1, 1),     # vec4 im2col loads, K = 144: several chunks
         ([1, 8, 8, 16], 12, 3, 1, 2),       # groups
         ([3, 7, 7, 24], 20, 1, 1, 1)]       # 1x1: A is x itself


@pytest.mark.parametrize("plan", PLANS, ids=["x".join(map(str, p[:6])) + ("-sv4" if p[6:] else "") for p in PLANS])
@pytest.mark.parametrize("case", CONVS, ids=lambda c: f"{'x'.join(map(str, c[0]))}-co{c[1]}-k{c[2]}s{c[3]}g{c[4]}")
def test_conv_large_tiles(gpu, monkeypatch, plan, case):
    monkeypatch.setattr(gemm_dispatch, "plan_gemm", lambda *a, **k: gemm_plan.GemmPlan(*plan))
    _conv_case(gpu, case, "fp32", 1e-4)


@pytest.mark.parametrize("plan", COOP, ids=lambda p: f"{p.BM}x{p.BN}x{p.BK}-st{p.ST}")
@pytest.mark.parametrize("case", CONVS, ids=lambda c: f"{'x'.join(map(str, c[0]))}-co{c[1]}-k{c[2]}s{c[3]}g{c[4]}")
def test_conv_coopmat_families_emulated(gpu, monkeypatch, compile_options, plan, case):
    monkeypatch.setattr(cm_mod, "plan_coopmat", lambda *a, **k: plan)
    compile_options(coopmat_emulate=True)
    monkeypatch.setenv("GPUC_VARIANTS", "coopmat=force")
    _conv_case(gpu, case, "fp16", 1e-2)


def _conv_case(gpu, case, precision, tol):
    shape, co, k, s, g = case
    rng = np.random.default_rng(sum(shape) + co)
    x = rng.uniform(-1, 1, shape).astype(np.float32)
    w = rng.normal(0, 0.3, (co, k, k, shape[3] // g)).astype(np.float32)
    b = rng.normal(0, 0.1, co).astype(np.float32)
    oh, ow = -(-shape[1] // s), -(-shape[2] // s)
    res = rng.uniform(-1, 1, (shape[0], oh, ow, co)).astype(np.float32)
    mb = ModelBuilder()
    xi, ri = mb.input("x", shape), mb.input("r", res.shape)
    y, z = mb.tensor("y", res.shape), mb.tensor("z", res.shape)
    mb.op("CONV_2D", [xi, mb.const("w", w), mb.const("b", b)], [y], padding="SAME", stride_h=s, stride_w=s,
          fused_activation_function="RELU")
    mb.op("ADD", [y, ri], [z], fused_activation_function="RELU6")
    mb.output(z)
    out = _run(gpu, mb.finish(), [x, res], precision)
    ref = np.clip(np.maximum(_conv_ref(x.astype(np.float64), w.astype(np.float64), b, s, g), 0) + res, 0, 6)
    if precision == "fp32":
        np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5 * max(1.0, float(np.abs(ref).max())))
    else:
        assert float(np.abs(out - ref).max()) <= tol * float(np.abs(ref).max())


@pytest.mark.parametrize("plan", PLANS, ids=["x".join(map(str, p[:6])) + ("-sv4" if p[6:] else "") for p in PLANS])
@pytest.mark.parametrize("rows,k,o,const_w", [(70, 37, 33, True), (130, 64, 9, False), (5, 200, 130, True)])
def test_fully_connected_large_tiles(gpu, monkeypatch, plan, rows, k, o, const_w):
    monkeypatch.setattr(gemm_dispatch, "plan_gemm", lambda *a, **kw: gemm_plan.GemmPlan(*plan))
    rng = np.random.default_rng(rows + k + o)
    x = rng.uniform(-1, 1, (rows, k)).astype(np.float32)
    w = rng.normal(0, 0.3, (o, k)).astype(np.float32)
    b = rng.normal(0, 0.1, o).astype(np.float32)
    mb = ModelBuilder()
    xi = mb.input("x", [rows, k])
    wi = mb.const("w", w) if const_w else mb.input("w", [o, k])
    y = mb.tensor("y", [rows, o])
    mb.op("FULLY_CONNECTED", [xi, wi, mb.const("b", b)], [y])
    mb.output(y)
    out = _run(gpu, mb.finish(), [x] + ([] if const_w else [w]))
    ref = x.astype(np.float64) @ w.T.astype(np.float64) + b
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5 * max(1.0, float(np.abs(ref).max())))


def test_coopmat_plans_by_shape():
    """Big GEMMs get 128 x 256 tiles of 16 subgroups (32 x 64 each), double-buffered in 48 KiB (the
    portable plan: at most 8 subgroups); a 64-wide N gets 128 x 64 tiles; every plan fits its limit."""
    p = cm_mod.plan_coopmat(4096, 4096, 4096, 1, cm_mod.BIG_SMEM)
    assert (p.BM, p.BN) == (128, 256) and p.threads == 512 and p.ST == 2 and p.smem_bytes() <= cm_mod.BIG_SMEM
    assert cm_mod.plan_coopmat(4096, 4096, 4096).threads <= 256
    assert cm_mod.plan_coopmat(100352, 64, 576, 1, cm_mod.BIG_SMEM).BN == 64
    for M, N, K in [(1, 1, 1), (49, 2048, 512), (12544, 32, 27), (4096, 4096, 4096)]:
        assert cm_mod.plan_coopmat(M, N, K).smem_bytes() <= cm_mod.WG_SMEM
