"""Pooling with large windows (>= 256 cells: global pools, MediaPipe's squeeze-excite blocks) runs one
workgroup per output element (shaders/pool2d.comp WG_PER_OUT, compiler/ops/conv.py lower_pool), against
LiteRT: SAME / VALID, strides, fused activations, several outputs per channel, int8 simulated quant."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("vulkan")

import gpuc  # noqa: E402
from gpuc.compiler.ops.conv import POOL_WG_MIN  # noqa: E402
from gpuc.runtime.bundle import read_bundle  # noqa: E402
from helpers.builder import ModelBuilder  # noqa: E402
from helpers.litert import run_litert  # noqa: E402

RNG = np.random.default_rng(11)


def pool_model(op, shape, k, s, padding, act="NONE", dtype="float32", quant=None):
    n, h, w, c = shape
    if padding == "SAME":
        oh, ow = -(-h // s[0]), -(-w // s[1])
    else:
        oh, ow = (h - k[0]) // s[0] + 1, (w - k[1]) // s[1] + 1
    mb = ModelBuilder()
    x = mb.input("x", list(shape), dtype, quant=quant)
    y = mb.tensor("y", [n, oh, ow, c], dtype, quant=quant)
    mb.op(op, [x], [y], padding=padding, stride_h=s[0], stride_w=s[1], filter_height=k[0], filter_width=k[1],
          fused_activation_function=act)
    mb.output(y)
    return mb.finish()


@pytest.mark.parametrize("op", ["AVERAGE_POOL_2D", "MAX_POOL_2D"])
@pytest.mark.parametrize("shape,k,s,padding,act", [
    ((1, 32, 24, 5), (32, 24), (1, 1), "VALID", "NONE"),          # global pool, C not a multiple of 4
    ((2, 20, 20, 3), (16, 16), (4, 4), "VALID", "RELU"),           # several windows, batch 2
    ((1, 30, 17, 4), (20, 17), (7, 5), "SAME", "RELU6"),           # SAME: windows cut by the border
])
def test_large_window_pools_match_litert(gpu, op, shape, k, s, padding, act):
    assert k[0] * k[1] >= POOL_WG_MIN
    model = pool_model(op, shape, k, s, padding, act)
    x = RNG.uniform(-4, 4, shape).astype(np.float32)
    (out,) = gpu.run(model, [x])
    (ref,) = run_litert(model, [x])
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5 * max(1.0, float(np.abs(ref).max())))


def test_large_window_pool_uses_a_workgroup_per_output():
    big = read_bundle(gpuc.compile(pool_model("AVERAGE_POOL_2D", (1, 32, 32, 8), (32, 32), (1, 1), "VALID"),
                                   cache=False))
    small = read_bundle(gpuc.compile(pool_model("AVERAGE_POOL_2D", (1, 8, 8, 8), (8, 8), (1, 1), "VALID"),
                                     cache=False))
    (d_big,), (d_small,) = big.dispatches, small.dispatches
    assert d_big.groups[0] * d_big.groups[1] >= 8          # one workgroup for each of the 8 outputs
    assert d_small.groups[0] * d_small.groups[1] == 1      # 8 outputs: one invocation each, one group
    assert any(v.name == "subgroup" for v in big.variants)


def test_large_window_pool_int8(gpu):
    q = (0.05, -3)
    model = pool_model("AVERAGE_POOL_2D", (1, 24, 24, 4), (24, 24), (1, 1), "VALID", dtype="int8", quant=q)
    x = RNG.integers(-128, 128, (1, 24, 24, 4)).astype(np.int8)
    (out,) = gpu.run(model, [x])
    (ref,) = run_litert(model, [x])
    assert np.abs(out.astype(np.int32) - ref.astype(np.int32)).max() <= 1


def test_large_window_pool_fp16(gpu):
    model = pool_model("AVERAGE_POOL_2D", (1, 64, 64, 4), (64, 64), (1, 1), "VALID")
    x = RNG.uniform(-1, 1, (1, 64, 64, 4)).astype(np.float32)
    with gpuc.load(gpuc.compile(model, precision="fp16", cache=False), device=gpu.device) as m:
        (out,) = m.run([x])
    (ref,) = run_litert(model, [x])
    np.testing.assert_allclose(out, ref, atol=2e-2 * float(np.abs(ref).max()) + 1e-3)
