"""The direct grouped-convolution kernel (ops/grouped_conv.py, shaders/grouped_conv.comp): every CONV_2D
with 2+ groups carries it as a measured variant of its gemm dispatch; run as the dispatch's kernel
(made unmeasured here, as a tuning choice would) it matches LiteRT, with bias, activations, a fused
residual, strides, dilation, padding and groups of 1..8 channels, in fp32 and fp16."""
import dataclasses

import numpy as np
import pytest

pytest.importorskip("vulkan")
pytest.importorskip("ai_edge_litert")

import gpuc  # noqa: E402
from gpuc.runtime import bundle as B  # noqa: E402
from gpuc.runtime.variants import resolve  # noqa: E402
from helpers.builder import ModelBuilder  # noqa: E402
from helpers.litert import run_litert  # noqa: E402

CASES = [  # n, h, w, ci, co, groups, k, stride, dilation, padding, act, residual
    (2, 9, 11, 16, 16, 4, 3, 1, 1, "SAME", "RELU", False),
    (1, 8, 8, 12, 24, 3, 3, 2, 1, "SAME", "NONE", True),
    (1, 7, 9, 8, 8, 8, 3, 1, 2, "VALID", "RELU6", False),      # 1 channel a group, dilated
    (3, 6, 5, 6, 10, 2, 1, 2, 1, "VALID", "NONE", True),       # 1x1 strided, 3 in / 5 out a group
    (1, 10, 10, 32, 32, 4, 5, 2, 1, "SAME", "RELU", True),     # 8 channels a group, 5x5
]


def _model(n, h, w, ci, co, groups, k, s, d, pad, act, residual):
    rng = np.random.default_rng(ci * co + k)
    mb = ModelBuilder()
    x = mb.input("x", [n, h, w, ci])
    xh = mb.tensor("xh", [n, h, w, ci])
    mb.op("MUL", [x, mb.const("half", np.full([1, 1, 1, 1], 0.5, np.float32))], [xh], fused_activation_function="NONE")
    eff = (k - 1) * d + 1
    oh, ow = (-(-h // s), -(-w // s)) if pad == "SAME" else ((h - eff) // s + 1, (w - eff) // s + 1)
    y = mb.tensor("y", [n, oh, ow, co])
    wt = rng.standard_normal((co, k, k, ci // groups)).astype(np.float32) * 0.3
    mb.op("CONV_2D", [xh, mb.const("w", wt), mb.const("b", rng.standard_normal(co).astype(np.float32))], [y],
          padding=pad, stride_w=s, stride_h=s, dilation_wfactor=d, dilation_hfactor=d, fused_activation_function=act)
    feeds = [rng.standard_normal((n, h, w, ci)).astype(np.float32)]
    if residual:
        r = mb.input("r", [n, oh, ow, co])
        z = mb.tensor("z", [n, oh, ow, co])
        mb.op("ADD", [y, r], [z], fused_activation_function="NONE")
        feeds.append(rng.standard_normal((n, oh, ow, co)).astype(np.float32))
        y = z
    mb.output(y)
    return mb.finish(), feeds


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
@pytest.mark.parametrize("case", CASES, ids=[str(i) for i in range(len(CASES))])
def test_direct_kernel_matches_litert(gpu, case, precision):
    model, feeds = _model(*case)
    b = B.read_bundle(gpuc.compile(model, cache=False, precision=precision))
    ours = [v for v in b.variants if v.name == "grouped_direct"]
    assert len(ours) == 1 and ours[0].measured
    one = dataclasses.replace(b, variants=[dataclasses.replace(ours[0], measured=False)])
    assert resolve(one, gpu.device).stats["variants_used"] == {"grouped_direct": 1}
    ref = run_litert(model, feeds)[0]
    with gpuc.load(B.write_bundle(one), device=gpu.device) as m:
        assert "grouped_conv+grouped_direct" in {m.bundle.shaders[d.shader].name for d in m.bundle.dispatches}
        out = m.run(feeds)[0]
    tol = 2e-2 if precision == "fp16" else 1e-5
    np.testing.assert_allclose(out, ref, rtol=tol, atol=tol * max(1.0, float(np.abs(ref).max())))


def test_ungrouped_and_depthwise_convolutions_have_no_such_variant():
    model, _ = _model(1, 8, 8, 8, 8, 1, 3, 1, 1, "SAME", "NONE", False)
    assert not [v for v in B.read_bundle(gpuc.compile(model, cache=False)).variants if v.name == "grouped_direct"]
