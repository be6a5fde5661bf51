"""Dynamic-range ("hybrid") models: int8 weights with quantization parameters, float activations
(FULLY_CONNECTED / CONV_2D / DEPTHWISE_CONV_2D / BATCH_MATMUL, with and without
`asymmetric_quantize_inputs`).  gpuc dequantizes the weights once at compile time
(passes/quant.py) and computes in float.

Tolerance.  LiteRT's hybrid kernels also quantize the float *input* to int8 on the fly (per row,
symmetric or asymmetric), so they differ from the exact product by the input's quantization error;
its builtin kernel and its default (XNNPACK) path differ from each other the same way.  gpuc is
compared (1) with LiteRT running the float-dequantized model (same weights as float32 constants):
rtol 1e-4 / atol 1e-5 * max|ref|, i.e. exact up to fp32 summation order; and (2) with LiteRT's hybrid
kernels: within LiteRT's own spread, max over its two kernels of |hybrid - float-dequantized|,
times 1.05 plus 1e-5 * max|ref|.
"""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("vulkan")

import gpuc  # noqa: E402
from helpers.builder import ModelBuilder  # noqa: E402
from helpers.litert import run_litert  # noqa: E402


def quantize(w, axis=None, asym=False):
    """int8 weights + (scale, zero_point[, axis]) as the converter writes them."""
    if axis is None:
        lo, hi = min(float(w.min()), 0.0), max(float(w.max()), 0.0)
        if asym:
            s = (hi - lo) / 255
            zp = int(np.round(-128 - lo / s))
        else:
            s, zp = max(abs(lo), hi) / 127, 0
        q = np.clip(np.round(w / s) + zp, -128, 127).astype(np.int8)
        return q, (np.float32(s), zp), (q.astype(np.float32) - zp) * np.float32(s)
    red = tuple(i for i in range(w.ndim) if i != axis)
    s = (np.abs(w).max(axis=red) / 127).astype(np.float32)
    shape = [1] * w.ndim
    shape[axis] = -1
    q = np.clip(np.round(w / s.reshape(shape)), -127, 127).astype(np.int8)
    return q, (s, 0, axis), q.astype(np.float32) * s.reshape(shape)


def build(make, quantized: bool):
    mb = ModelBuilder()
    y = make(mb, quantized)
    mb.output(y)
    return mb.finish()


def check(gpu, make, xs):
    hybrid, dequant = build(make, True), build(make, False)
    bundle = gpuc.compile(hybrid)
    with gpuc.load(bundle, device=gpu.device) as m:
        (out,) = m.run(xs)
    (ref,) = run_litert(dequant, xs)
    scale = float(np.abs(ref).max())
    from gpuc.runtime.bundle import read_bundle
    b = read_bundle(bundle)
    q8 = any(b.shaders[d.shader].name.startswith("gemm_q8") for d in b.dispatches)
    if q8:  # int8 weights kept (ops/gemm_q8.py): LiteRT's default (XNNPACK) hybrid arithmetic, to float rounding
        np.testing.assert_allclose(out, run_litert(hybrid, xs, default=True)[0], rtol=1e-5, atol=2e-6 * scale)
    else:
        np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5 * scale)
    kernels = [run_litert(hybrid, xs)[0], run_litert(hybrid, xs, default=True)[0]]
    spread = max(float(np.abs(k.astype(np.float64) - ref).max()) for k in kernels)
    for k in kernels:       # (q8: the distance between LiteRT's two kernels is at most twice the spread)
        assert float(np.abs(out.astype(np.float64) - k).max()) <= (2.1 if q8 else 1.05) * spread + 1e-5 * scale
    return out


RNG = np.random.default_rng(7)


@pytest.mark.parametrize("asym_inputs", [False, True])
@pytest.mark.parametrize("per_channel", [False, True])
def test_fully_connected(gpu, asym_inputs, per_channel):
    wf = RNG.normal(0, 1, (12, 20)).astype(np.float32)
    bias = RNG.normal(0, 1, 12).astype(np.float32)
    q, quant, deq = quantize(wf, axis=0 if per_channel else None)

    def make(mb, quantized):
        x = mb.input("x", [3, 20])
        w = mb.const("w", q, quant=quant) if quantized else mb.const("w", deq)
        y = mb.tensor("y", [3, 12])
        mb.op("FULLY_CONNECTED", [x, w, mb.const("b", bias)], [y], fused_activation_function="RELU",
              asymmetric_quantize_inputs=asym_inputs)
        return y
    check(gpu, make, [RNG.normal(0, 1, (3, 20)).astype(np.float32)])


def test_fully_connected_asymmetric_weights(gpu):
    """Weights with a non-zero zero point (uint8-style range mapped to int8)."""
    wf = RNG.uniform(-0.2, 1.0, (6, 9)).astype(np.float32)
    q, quant, deq = quantize(wf, asym=True)
    assert quant[1] != 0

    def make(mb, quantized):
        x = mb.input("x", [2, 9])
        w = mb.const("w", q, quant=quant) if quantized else mb.const("w", deq)
        y = mb.tensor("y", [2, 6])
        mb.op("FULLY_CONNECTED", [x, w, -1], [y])
        return y
    hybrid, dequant = build(make, True), build(make, False)
    xs = [RNG.normal(0, 1, (2, 9)).astype(np.float32)]
    with gpuc.load(gpuc.compile(hybrid), device=gpu.device) as m:
        (out,) = m.run(xs)
    (ref,) = run_litert(dequant, xs)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5 * float(np.abs(ref).max()))


@pytest.mark.parametrize("asym_inputs", [False, True])
def test_conv2d_per_channel(gpu, asym_inputs):
    wf = RNG.normal(0, 0.5, (8, 3, 3, 4)).astype(np.float32)
    bias = RNG.normal(0, 0.1, 8).astype(np.float32)
    q, quant, deq = quantize(wf, axis=0)

    def make(mb, quantized):
        x = mb.input("x", [1, 7, 7, 4])
        w = mb.const("w", q, quant=quant) if quantized else mb.const("w", deq)
        y = mb.tensor("y", [1, 4, 4, 8])
        mb.op("CONV_2D", [x, w, mb.const("b", bias)], [y], padding="SAME", stride_w=2, stride_h=2,
              fused_activation_function="RELU6")
        return y
    check(gpu, make, [RNG.uniform(-1, 1, (1, 7, 7, 4)).astype(np.float32)])


def test_depthwise_per_channel(gpu):
    wf = RNG.normal(0, 0.5, (1, 3, 3, 6)).astype(np.float32)
    bias = RNG.normal(0, 0.1, 6).astype(np.float32)
    q, quant, deq = quantize(wf, axis=3)

    def make(mb, quantized):
        x = mb.input("x", [1, 6, 6, 6])
        w = mb.const("w", q, quant=quant) if quantized else mb.const("w", deq)
        y = mb.tensor("y", [1, 6, 6, 6])
        mb.op("DEPTHWISE_CONV_2D", [x, w, mb.const("b", bias)], [y], padding="SAME", stride_w=1, stride_h=1,
              depth_multiplier=1)
        return y
    hybrid, dequant = build(make, True), build(make, False)
    xs = [RNG.uniform(-1, 1, (1, 6, 6, 6)).astype(np.float32)]
    with gpuc.load(gpuc.compile(hybrid), device=gpu.device) as m:
        (out,) = m.run(xs)
    (ref,) = run_litert(dequant, xs)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5 * float(np.abs(ref).max()))


def test_batch_matmul_constant_rhs(gpu):
    wf = RNG.normal(0, 1, (10, 5)).astype(np.float32)
    q, quant, deq = quantize(wf)

    def make(mb, quantized):
        x = mb.input("x", [2, 3, 10])
        w = mb.const("w", q, quant=quant) if quantized else mb.const("w", deq)
        y = mb.tensor("y", [2, 3, 5])
        mb.op("BATCH_MATMUL", [x, w], [y], asymmetric_quantize_inputs=True)
        return y
    check(gpu, make, [RNG.normal(0, 1, (2, 3, 10)).astype(np.float32)])


def test_dynamic_range_fp16(gpu, compile_options):
    """Dynamic-range weights also go to fp16 storage with --precision fp16 (where gemms store float16:
    a gemm this small keeps float32 tensors unless the fp16_plain_gemms option, ops/gemm_coopmat.py)."""
    compile_options(fp16_plain_gemms=True)
    from gpuc.runtime.bundle import WEIGHTS, read_bundle
    wf = RNG.normal(0, 1, (12, 20)).astype(np.float32)
    q, quant, deq = quantize(wf, axis=0)

    def make(mb, quantized):
        x = mb.input("x", [3, 20])
        w = mb.const("w", q, quant=quant) if quantized else mb.const("w", deq)
        h, y = mb.tensor("h", [3, 12]), mb.tensor("y", [3, 12])
        mb.op("FULLY_CONNECTED", [x, w, -1], [h])
        mb.op("RELU", [h], [y])
        return y
    bundle = gpuc.compile(build(make, True), precision="fp16")
    assert "float32" not in {t.dtype for t in read_bundle(bundle).tensors if t.memory == WEIGHTS}  # (int8 FC: gemm_q8)
    xs = [RNG.normal(0, 1, (3, 20)).astype(np.float32)]
    with gpuc.load(bundle, device=gpu.device) as m:
        (out,) = m.run(xs)
    (ref,) = run_litert(build(make, False), xs)
    assert float(np.abs(out - ref).max()) <= 2e-2 * float(np.abs(ref).max())
