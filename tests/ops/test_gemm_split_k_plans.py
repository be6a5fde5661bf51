"""The gemm planner's register model for in-workgroup split-K plans (compiler/ops/gemm_plan.py REG_FACTOR,
CompileOptions.reg_factor: KS > 1 plans are charged that factor x the counted registers, KS = 1 plans are not), and the plans it
now picks for small-M FULLY_CONNECTED layers (batch-1 transformer MLPs) computed correctly on the
device, bias + activation + residual epilogue included.  Reference: float64 numpy."""
import numpy as np
import pytest

from gpuc.compiler.ops import gemm_plan

# small-M GEMMs (M <= 256 rows: batch-1 token counts) with K and N up to 4x the width
SMALL_M = [(M, N, K) for M in (49, 64, 196, 256) for N, K in ((384, 96), (96, 384), (1536, 384), (384, 1536),
                                                                   (3072, 768), (768, 3072), (2304, 768))]


def _fresh(compile_options, factor):
    compile_options(reg_factor=factor)           # (CompileOptions.reg_factor; plans are cached per factor)


def test_factor_leaves_single_slice_plans_alone(compile_options):
    p = gemm_plan.GemmPlan(128, 128, 16, 8, 8, 1)
    costs = []
    for f in (1, 2, 4):
        _fresh(compile_options, f)
        costs.append(gemm_plan.gemm_cost(p, 6272, 1024, 256, 1, True, True, False))
    assert costs[0] == costs[1] == costs[2]


def test_factor_charges_split_k_plans(compile_options):
    # 8x8 blocks, 128 invocations, KS = 8: register-bound occupancy, so a larger factor costs more
    p = gemm_plan.GemmPlan(32, 32, 8, 8, 8, 8)
    costs = []
    for f in (1, 2):
        _fresh(compile_options, f)
        costs.append(gemm_plan.gemm_cost(p, 196, 1536, 384, 1, True, True, False))
    assert costs[1] > costs[0]


def test_small_m_plans_fit():
    for M, N, K in SMALL_M:
        p = gemm_plan.plan_gemm(M, N, K, 1, True, True, False)
        assert p is not None, (M, N, K)
        assert p.threads <= gemm_plan.MAX_THREADS and 4 * p.smem_floats() <= gemm_plan.WG_SMEM, ((M, N, K), p)


def test_measured_slow_plan_no_longer_picked(compile_options):
    """H100 (benchmarks/archive/gemm_plan_sweep.py): at 196x1536x384 the 32x32 tile with 8x8 blocks and KS = 8
    (the pick at REG_FACTOR 1) ran 1.7x slower than 32x32 with 8x4 blocks and KS = 4."""
    slow = gemm_plan.GemmPlan(32, 32, 8, 8, 8, 8)
    _fresh(compile_options, 1)
    assert gemm_plan.plan_gemm(196, 1536, 384, 1, True, True, False) == slow
    _fresh(compile_options, 2)
    assert gemm_plan.plan_gemm(196, 1536, 384, 1, True, True, False) != slow


def test_large_gemms_keep_their_plans(compile_options):
    """Big single-slice GEMMs (batch-32 convs, square matrices) plan as before the factor existed."""
    shapes = [(4096, 4096, 4096), (100352, 256, 64), (25088, 128, 1152), (6272, 1024, 256), (1568, 2048, 512)]
    _fresh(compile_options, 2)
    now = [gemm_plan.plan_gemm(*s, 1, True, True, False) for s in shapes]
    _fresh(compile_options, 1)
    before = [gemm_plan.plan_gemm(*s, 1, True, True, False) for s in shapes]
    assert now == before
    assert all(p.KS == 1 for p in now)


# (M, N, K): each gets the planner's split-K plan; run at full size on the device
DEVICE = [(49, 96, 384), (20, 40, 1000), (33, 130, 260)]


@pytest.mark.parametrize("shape", DEVICE, ids=lambda s: "x".join(map(str, s)))
def test_small_m_fc_split_k_on_device(gpu, shape):
    pytest.importorskip("vulkan")
    import gpuc
    from helpers.builder import ModelBuilder
    M, N, K = shape
    p = gemm_plan.plan_gemm(M, N, K, 1, K % 4 == 0, True, False)
    assert p.KS > 1, p                                   # the in-workgroup split-K path is what runs
    rng = np.random.default_rng(M * N + K)
    xs = rng.uniform(-1, 1, (1, M, K)).astype(np.float32)
    r = rng.uniform(-1, 1, (1, M, N)).astype(np.float32)
    w = rng.normal(0, 1 / np.sqrt(K), (N, K)).astype(np.float32)
    b = rng.normal(0, 1, (N,)).astype(np.float32)
    mb = ModelBuilder()
    x, res = mb.input("x", [1, M, K]), mb.input("r", [1, M, N])
    y, z = mb.tensor("y", [1, M, N]), mb.tensor("z", [1, M, N])
    mb.op("FULLY_CONNECTED", [x, mb.const("w", w), mb.const("b", b)], [y], fused_activation_function="RELU")
    mb.op("ADD", [y, res], [z])
    mb.output(z)
    m = gpuc.load(gpuc.compile(mb.finish(), cache=False), device=gpu.device)
    try:
        out = m.run([xs, r])[0]
    finally:
        m.close()
    ref = np.maximum(xs.astype(np.float64)[0] @ w.T.astype(np.float64) + b, 0) + r[0]
    np.testing.assert_allclose(out.reshape(M, N), ref, rtol=1e-5, atol=1e-5 * np.abs(ref).max())
