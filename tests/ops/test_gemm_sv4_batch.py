"""SV4 gemm tiles (shaders/gemm.comp SV4: vec4 shared reads, two shared stages) in batch-native
bundles: a --max-batch 4 bundle run for 3 and 4 items, with the SV4 plans forced through the planner on a
1x1 conv (rows = pixels, item-major), an implicit-GEMM 3x3 conv and a FULLY_CONNECTED layer; each item
matches its own batch-1 run within fp32 rounding (the batch-1 bundle is forced onto the same plan)."""
import numpy as np
import pytest

pytest.importorskip("vulkan")

import gpuc  # noqa: E402
from gpuc.compiler.ops import gemm_dispatch, gemm_plan  # noqa: E402
from helpers.builder import ModelBuilder  # noqa: E402

PLANS = [gemm_plan.GemmPlan(64, 64, 8, 8, 4, 1, True), gemm_plan.GemmPlan(32, 128, 8, 8, 4, 1, True)]


def _model(kind):
    rng = np.random.default_rng(5)
    mb = ModelBuilder()
    if kind == "fc":
        x = mb.input("x", [1, 37, 20])
        y = mb.tensor("y", [1, 37, 70])
        mb.op("FULLY_CONNECTED", [x, mb.const("w", rng.normal(0, 0.3, (70, 20)).astype(np.float32)),
                                  mb.const("b", rng.normal(0, 0.1, 70).astype(np.float32))], [y])
        mb.output(y)
        return mb.finish(), [1, 37, 20]
    k = 1 if kind == "pointwise" else 3
    x = mb.input("x", [1, 9, 11, 12])
    y = mb.tensor("y", [1, 9, 11, 70])
    mb.op("CONV_2D", [x, mb.const("w", rng.normal(0, 0.3, (70, k, k, 12)).astype(np.float32)),
                      mb.const("b", rng.normal(0, 0.1, 70).astype(np.float32))], [y], padding="SAME",
          stride_h=1, stride_w=1, fused_activation_function="RELU")
    mb.output(y)
    return mb.finish(), [1, 9, 11, 12]


@pytest.mark.parametrize("plan", PLANS, ids=["64x64", "32x128"])
@pytest.mark.parametrize("kind", ["pointwise", "im2col", "fc"])
def test_items_match_batch_one(monkeypatch, plan, kind):
    monkeypatch.setattr(gemm_dispatch, "plan_gemm", lambda *a, **k: plan)
    model, shape = _model(kind)
    many = gpuc.load(gpuc.compile(model, cache=False, max_batch=4))
    one = gpuc.load(gpuc.compile(model, cache=False))
    try:
        for n in (3, 4):
            x = np.random.default_rng(n).uniform(-1, 1, [n] + shape[1:]).astype(np.float32)
            out = many.run([x])[0]
            for i in range(n):
                ref = one.run([x[i:i + 1]])[0]
                np.testing.assert_allclose(out[i:i + 1], ref, rtol=1e-5, atol=1e-6)
    finally:
        many.close()
        one.close()
