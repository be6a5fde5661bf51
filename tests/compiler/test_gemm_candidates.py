"""Which fp16 gemms carry cooperative-matrix candidates (ops/gemm_coopmat.py, ops/gemm_candidates.py): the 32-column NARROW_PLANS for gemms
of at most NARROW_N columns, the variants as `measured` candidates for big gemms whose N or K is 16..31 (`slim`),
none below 16; and the float16 storage such a gemm's A needs although a plain gemm upstream would pin it to float32
(passes/precision.py plain_gemm_values: a squeeze-excited tensor after a plain grouped convolution)."""
import numpy as np
import pytest

pytest.importorskip("vulkan")

from gpuc.compiler.ops import gemm_candidates as cand  # noqa: E402
from gpuc.compiler.ops import gemm_coopmat as cm  # noqa: E402
from helpers.builder import ModelBuilder  # noqa: E402
from helpers.litert import run_litert  # noqa: E402
from helpers.precision import assert_close16, dtype_of, run16  # noqa: E402


def _plans(variants) -> list:
    return [(v.measured, v.make) for v in variants]


@pytest.mark.parametrize("M,N,K", [(401408, 64, 16), (100352, 24, 216), (100352, 16, 96)])
def test_slim_gemms_carry_measured_candidates(M, N, K):
    vs = cand.coopmat_variants(M, N, K)
    assert vs and all(v.measured for v in vs) and not cm.worthwhile(M, N, K) and cand.slim(M, N, K)


@pytest.mark.parametrize("M,N,K", [(401408, 8, 16), (401408, 64, 8), (64, 24, 216), (100352, 24, 216)])
def test_slim_needs_16_and_size(M, N, K):
    big = M * N * K >= cm.MIN_MACS and min(N, K) >= cand.SLIM_DIM
    assert bool(cand.coopmat_variants(M, N, K)) == big


def test_narrow_plans_for_narrow_gemms_only():
    assert cand.narrow_plans(100352, 32) == list(cand.NARROW_PLANS)
    assert cand.narrow_plans(100, 32) == [p for p in cand.NARROW_PLANS if p.BM <= 200]
    assert cand.narrow_plans(100352, 64) == [] and cand.narrow_plans(100352, 8) == []
    assert all(p.BN == 32 and p.smem_bytes() <= cm.WG_SMEM and p.threads <= 256 for p in cand.NARROW_PLANS)
    n = len(cand.coopmat_variants(100352, 32, 1152))      # worthwhile: the narrow plans ride along, measured
    assert n >= len(cand.NARROW_PLANS) + 2 and sum(v.measured for v in cand.coopmat_variants(100352, 32, 1152)) >= 4


def se_model():
    """x -> grouped 3x3 conv (8 channels a group: a plain gemm) -> * per-channel scale -> 1x1 conv 64 -> 256 (big
    enough for the tensor cores), at batch 8."""
    rng = np.random.default_rng(3)
    mb = ModelBuilder()
    x = mb.input("x", [8, 32, 32, 64])
    g = mb.tensor("g", [8, 32, 32, 64])
    mb.op("CONV_2D", [x, mb.const("gw", rng.normal(0, 0.3, (64, 3, 3, 8)).astype(np.float32)),
                      mb.const("gb", rng.normal(0, 0.1, 64).astype(np.float32))], [g],
          padding="SAME", stride_w=1, stride_h=1, fused_activation_function="RELU")
    se = mb.tensor("se", [8, 32, 32, 64])
    mb.op("MUL", [g, mb.const("scale", rng.uniform(0.2, 1.0, 64).astype(np.float32))], [se])
    y = mb.tensor("y", [8, 32, 32, 256])
    mb.op("CONV_2D", [se, mb.const("pw", rng.normal(0, 0.2, (256, 1, 1, 64)).astype(np.float32)),
                      mb.const("pb", rng.normal(0, 0.1, 256).astype(np.float32))], [y],
          padding="SAME", stride_w=1, stride_h=1)
    mb.output(y)
    return mb.finish(), [rng.uniform(-1, 1, (8, 32, 32, 64)).astype(np.float32)]


def test_tensor_core_a_stays_float16(gpu):
    model, xs = se_model()
    assert not cand.coopmat_variants(8192, 8, 72, 8) and cm.worthwhile(8192, 256, 64)
    outs, b = run16(gpu, model, xs)
    assert not any(t.name == "g" for t in b.tensors)   # (the MUL is the grouped conv's epilogue)
    assert dtype_of(b, "se") == "float16"           # the 1x1 conv's A: its coopmat variants need it so
    assert any(v.name == "coopmat" for v in b.variants)
    assert_close16(outs, run_litert(model, xs))
