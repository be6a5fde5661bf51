"""Whole int8 networks in native int8 (passes/quant.py native_int8): bit for bit equal to LiteRT's builtin
kernels (BUILTIN_WITHOUT_DEFAULT_DELEGATES; LiteRT's XNNPACK int8 path differs from those on this model),
and int8 weights stored as int8 (bundle size).  A small MobileNetV2-like block chain built here runs in a
few seconds; the shared mobilenet_v2_224_int8 (~25 s on lavapipe) where the shared models are."""
import numpy as np
import pytest

pytest.importorskip("vulkan")

import gpuc  # noqa: E402
from helpers.builder import ModelBuilder  # noqa: E402
from helpers.litert import run_litert  # noqa: E402

I8 = "int8"


def _conv(mb, rng, x, sx, shape, co, k, s, op="CONV_2D", act="RELU6"):
    n, h, w, ci = shape
    dw = op == "DEPTHWISE_CONV_2D"
    co = ci if dw else co
    ws = rng.uniform(0.003, 0.03, co).astype(np.float32)
    wt = mb.const(f"w{len(mb.tensors)}", rng.integers(-127, 128, (1, k, k, co) if dw else (co, k, k, ci)).astype(np.int8),
                  quant=(ws, 0, 3 if dw else 0))
    b = mb.const(f"b{len(mb.tensors)}", rng.integers(-3000, 3000, co).astype(np.int32), quant=(np.float32(sx) * ws, 0, 0))
    oshape = [n, -(-h // s), -(-w // s), co]
    sy = float(rng.uniform(0.02, 0.08))
    y = mb.tensor(f"t{len(mb.tensors)}", oshape, I8, quant=(sy, int(rng.integers(-40, 0))))
    opts = dict(padding="SAME", stride_w=s, stride_h=s, fused_activation_function=act)
    if dw:
        opts["depth_multiplier"] = 1
    mb.op(op, [x, wt, b], [y], **opts)
    return y, sy, oshape


def small_int8_net(seed=0):
    """conv 3x3/2 -> [1x1 expand, depthwise 3x3, 1x1 project (+ residual ADD)] x 2 -> MEAN -> FC -> SOFTMAX."""
    rng = np.random.default_rng(seed)
    mb = ModelBuilder()
    x = mb.input("x", [1, 24, 24, 3], I8, quant=(0.0078, -1))
    h, s, shape = _conv(mb, rng, x, 0.0078, [1, 24, 24, 3], 16, 3, 2)
    for i in range(2):
        e, se, eshape = _conv(mb, rng, h, s, shape, 48, 1, 1)
        d, sd, dshape = _conv(mb, rng, e, se, eshape, 0, 3, 1, op="DEPTHWISE_CONV_2D")
        p, sp, pshape = _conv(mb, rng, d, sd, dshape, 16, 1, 1, act="NONE")
        so = float(rng.uniform(0.05, 0.1))
        r = mb.tensor(f"res{i}", pshape, I8, quant=(so, int(rng.integers(-10, 10))))
        mb.op("ADD", [h, p], [r], fused_activation_function="NONE")
        h, s, shape = r, so, pshape
    ax = mb.const("ax", np.array([1, 2], np.int32))
    m = mb.tensor("mean", [1, 16], I8, quant=(s, -3))
    mb.op("MEAN", [h, ax], [m], keep_dims=False)
    w = mb.const("fcw", rng.integers(-127, 128, (10, 16)).astype(np.int8), quant=(np.float32(0.01), 0))
    b = mb.const("fcb", rng.integers(-500, 500, 10).astype(np.int32), quant=(np.float32(s * 0.01), 0))
    logits = mb.tensor("logits", [1, 10], I8, quant=(0.1, 5))
    mb.op("FULLY_CONNECTED", [m, w, b], [logits], fused_activation_function="NONE")
    y = mb.tensor("y", [1, 10], I8, quant=(1.0 / 256, -128))
    mb.op("SOFTMAX", [logits], [y], beta=1.0)
    mb.output(y)
    mb.output(logits)
    return mb.finish()


def test_small_int8_net_bit_exact(gpu):
    model = small_int8_net()
    rng = np.random.default_rng(1)
    with gpu.load(model) as m:
        for _ in range(3):
            x = rng.integers(-128, 128, (1, 24, 24, 3)).astype(np.int8)
            for o, r in zip(m.run([x]), run_litert(model, [x])):
                assert o.dtype == r.dtype == np.int8
                np.testing.assert_array_equal(o, r)


def test_mobilenet_v2_int8_bit_exact_and_bundle_size(models_dir, gpu):
    data = (models_dir / "mobilenet_v2_224_int8.tflite").read_bytes()
    bundle = gpuc.compile(data)
    assert len(bundle) <= 1.2 * len(data), (len(bundle), len(data))
    rng = np.random.default_rng(0)
    x0 = np.load(models_dir / "ref" / "mobilenet_v2_224_int8.in0.npy")
    with gpuc.load(bytes(bundle), device=gpu.device) as m:
        for x in (x0, rng.integers(-128, 128, x0.shape).astype(np.int8)):
            np.testing.assert_array_equal(m.run([x])[0], run_litert(data, [x])[0])
