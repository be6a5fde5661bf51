"""Full-integer quantized models: float32 programs with simulated quantization (passes/quant.py)
against LiteRT's integer kernels, within 1 quantization step."""
import numpy as np
import pytest

pytest.importorskip("vulkan")

import gpuc  # noqa: E402
from helpers.builder import ModelBuilder  # noqa: E402
from helpers.litert import run_litert  # noqa: E402

RNG = np.random.default_rng(7)
I8 = "int8"


def qin(shape, dtype=I8):
    lo, hi = (-128, 127) if dtype == I8 else (0, 255)
    return RNG.integers(lo, hi + 1, size=shape).astype(dtype)


def check(gpu, model, inputs, frac=0.99):
    ref = run_litert(model, inputs)
    out = gpu.run(model, inputs)
    for o, r in zip(out, ref):
        assert o.dtype == r.dtype and o.shape == r.shape
        d = np.abs(o.astype(np.int64) - r.astype(np.int64)) if r.dtype != np.float32 else np.abs(o - r)
        if r.dtype == np.float32:
            assert d.max() <= 1e-5 + 1e-5 * np.abs(r).max()
        else:
            assert (d <= 1).mean() >= frac and d.max() <= 2, (d.max(), (d <= 1).mean())


def conv_model(op, act="NONE"):
    mb = ModelBuilder()
    x = mb.input("x", [1, 8, 8, 4], I8, quant=(0.05, 3))
    if op == "CONV_2D":
        w = mb.const("w", RNG.integers(-127, 128, (6, 3, 3, 4)).astype(np.int8),
                     quant=(RNG.uniform(0.002, 0.01, 6).astype(np.float32), 0, 0))
        ws = 6
    else:
        w = mb.const("w", RNG.integers(-127, 128, (1, 3, 3, 4)).astype(np.int8),
                     quant=(RNG.uniform(0.002, 0.01, 4).astype(np.float32), 0, 3))
        ws = 4
    wscale = mb.tensors[w]["quantization"]["scale"]
    b = mb.const("b", RNG.integers(-2000, 2000, ws).astype(np.int32), quant=(0.05 * wscale, 0, 0))
    y = mb.tensor("y", [1, 8, 8, ws], I8, quant=(0.04, -10))
    opts = dict(padding="SAME", stride_w=1, stride_h=1, fused_activation_function=act)
    if op == "DEPTHWISE_CONV_2D":
        opts["depth_multiplier"] = 1
    mb.op(op, [x, w, b], [y], **opts)
    mb.output(y)
    return mb.finish()


@pytest.mark.parametrize("act", ["NONE", "RELU6"])
def test_conv_per_channel(gpu, act):
    check(gpu, conv_model("CONV_2D", act), [qin((1, 8, 8, 4))])


def test_depthwise_per_channel(gpu):
    check(gpu, conv_model("DEPTHWISE_CONV_2D", "RELU6"), [qin((1, 8, 8, 4))])


def test_fully_connected(gpu):
    mb = ModelBuilder()
    x = mb.input("x", [2, 16], I8, quant=(0.1, -5))
    w = mb.const("w", RNG.integers(-127, 128, (10, 16)).astype(np.int8), quant=(0.01, 0))
    b = mb.const("b", RNG.integers(-500, 500, 10).astype(np.int32), quant=(0.001, 0))
    y = mb.tensor("y", [2, 10], I8, quant=(0.2, 4))
    mb.op("FULLY_CONNECTED", [x, w, b], [y], fused_activation_function="NONE")
    mb.output(y)
    check(gpu, mb.finish(), [qin((2, 16))])


def test_add_different_scales(gpu):
    mb = ModelBuilder()
    a = mb.input("a", [1, 4, 4, 8], I8, quant=(0.03, 2))
    b = mb.input("b", [1, 4, 4, 8], I8, quant=(0.07, -9))
    y = mb.tensor("y", [1, 4, 4, 8], I8, quant=(0.09, 1))
    mb.op("ADD", [a, b], [y], fused_activation_function="NONE")
    mb.output(y)
    check(gpu, mb.finish(), [qin((1, 4, 4, 8)), qin((1, 4, 4, 8))])


def test_mean(gpu):
    mb = ModelBuilder()
    x = mb.input("x", [1, 5, 5, 8], I8, quant=(0.05, -3))
    ax = mb.const("ax", np.array([1, 2], np.int32))
    y = mb.tensor("y", [1, 8], I8, quant=(0.01, 2))
    mb.op("MEAN", [x, ax], [y], keep_dims=False)
    mb.output(y)
    check(gpu, mb.finish(), [qin((1, 5, 5, 8))])


def test_softmax(gpu):
    mb = ModelBuilder()
    x = mb.input("x", [2, 10], I8, quant=(0.1, 0))
    y = mb.tensor("y", [2, 10], I8, quant=(1 / 256, -128))
    mb.op("SOFTMAX", [x], [y], beta=1.0)
    mb.output(y)
    check(gpu, mb.finish(), [qin((2, 10))])


def test_average_pool(gpu):
    mb = ModelBuilder()
    x = mb.input("x", [1, 6, 6, 4], I8, quant=(0.05, 1))
    y = mb.tensor("y", [1, 3, 3, 4], I8, quant=(0.05, 1))
    mb.op("AVERAGE_POOL_2D", [x], [y], padding="VALID", stride_w=2, stride_h=2, filter_width=2, filter_height=2,
          fused_activation_function="NONE")
    mb.output(y)
    check(gpu, mb.finish(), [qin((1, 6, 6, 4))])


def test_concatenation_different_scales(gpu):
    """uint8 (LiteRT's int8 CONCATENATION requires equal scales; uint8 requantizes)."""
    u8 = "uint8"
    mb = ModelBuilder()
    a = mb.input("a", [1, 3, 3, 2], u8, quant=(0.02, 128))
    b = mb.input("b", [1, 3, 3, 5], u8, quant=(0.08, 100))
    y = mb.tensor("y", [1, 3, 3, 7], u8, quant=(0.05, 131))
    mb.op("CONCATENATION", [a, b], [y], axis=3, fused_activation_function="NONE")
    mb.output(y)
    check(gpu, mb.finish(), [qin((1, 3, 3, 2), u8), qin((1, 3, 3, 5), u8)])


@pytest.mark.parametrize("dtype", ["int8", "uint8"])
def test_quantize_dequantize_float_boundary(gpu, dtype):
    zp = 3 if dtype == "int8" else 128
    mb = ModelBuilder()
    x = mb.input("x", [1, 37], "float32")
    q = mb.tensor("q", [1, 37], dtype, quant=(0.02, zp))
    q2 = mb.tensor("q2", [1, 37], dtype, quant=(0.03, zp - 1))
    y = mb.tensor("y", [1, 37], "float32")
    mb.op("QUANTIZE", [x], [q])
    mb.op("QUANTIZE", [q], [q2])            # requantize
    mb.op("DEQUANTIZE", [q2], [y])
    mb.output(y)
    mb.output(q)
    x0 = RNG.uniform(-3, 3, (1, 37)).astype(np.float32)
    ref = run_litert(mb.finish(), [x0])
    out = gpu.run(mb.finish(), [x0])
    assert out[1].dtype == np.dtype(dtype)
    assert np.abs(out[1].astype(int) - ref[1].astype(int)).max() <= 1
    assert np.abs(out[0] - ref[0]).max() <= 0.03 + 1e-6


def _mobilenet(models_dir):
    name = "mobilenet_v2_224_int8"
    return name, (models_dir / f"{name}.tflite").read_bytes(), np.load(models_dir / "ref" / f"{name}.in0.npy")


def test_mobilenet_v2_int8(models_dir, gpu):
    name, data, x = _mobilenet(models_dir)
    out = gpu.run(data, [x])[0]
    assert out.dtype == np.int8
    for ref in ("out0", "out0.nodelegate"):
        r = np.load(models_dir / "ref" / f"{name}.{ref}.npy")
        d = np.abs(out.astype(int) - r.astype(int))
        assert (d <= 1).mean() >= 0.99, ref


def test_mobilenet_v2_int8_logits(models_dir, gpu):
    """The int8 logits (SOFTMAX input).  With the reference input the network is chaotic: LiteRT's
    own XNNPACK integer path agrees with its builtin kernels on only ~22% of logits within 1 step
    (max 16 steps), so this checks gpuc does no worse than that, and matches the first layers."""
    import gpuc.compiler.driver as drv
    from gpuc.compiler import DEFAULT_OPTIONS
    from gpuc.compiler.frontend.importer import load_tflite
    from gpuc.compiler.passes import run_passes
    from gpuc.compiler.prepare import lower_graph
    name, data, x = _mobilenet(models_dir)
    g = load_tflite(data).main
    sm = [n for n in g.nodes if n.op == "SOFTMAX"][-1]
    g.outputs = [sm.inputs[0]]
    g.nodes = g.nodes[:g.nodes.index(sm)]
    run_passes(g)
    bundle = drv.build_bundle(g, lower_graph(g), name, dict(DEFAULT_OPTIONS), "test", {})
    ref = np.load(models_dir / "ref" / f"{name}.out0.preact.nodelegate.npy")
    with gpuc.load(bundle, device=gpu.device) as m:
        out = m.run([x])[0]
    assert out.dtype == np.int8 and out.shape == ref.shape
    d = np.abs(out.astype(int) - ref.astype(int))
    assert (d <= 1).mean() >= 0.18 and d.max() <= 24
