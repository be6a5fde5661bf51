"""Weight-only int8 FULLY_CONNECTED (ops/gemm_q8.py, shaders/gemm_q8.comp) against LiteRT.

An FC with symmetric int8 weights (per channel or per tensor) and float activations keeps its weights int8
in the bundle; the kernel quantizes each input row on the fly and multiplies in exact int32, as LiteRT's
default CPU path (XNNPACK qd8-f32-qc8w) does: its outputs match that path's to float rounding (the integer
part is exact), not just within the input-quantization error."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("vulkan")

import gpuc  # noqa: E402
from gpuc.runtime.bundle import WEIGHTS, read_bundle  # noqa: E402
from helpers.builder import ModelBuilder  # noqa: E402
from helpers.litert import run_litert  # noqa: E402

RNG = np.random.default_rng(29)


def fc_model(m, k, n, *, per_channel=True, bias=True, act="NONE", residual=False, zero_point=0, share=False):
    wf = RNG.normal(0, 1, (n, k)).astype(np.float32)
    if per_channel:
        s = (np.abs(wf).max(1) / 127).astype(np.float32)
        q = np.clip(np.round(wf / s[:, None]), -127, 127).astype(np.int8)
        quant = (s, 0, 0)
    else:
        s = np.float32(np.abs(wf).max() / 127)
        q = np.clip(np.round(wf / s) + zero_point, -128, 127).astype(np.int8)
        quant = (s, zero_point)
    mb = ModelBuilder()
    x = mb.input("x", [m, k])
    w = mb.const("w", q, quant=quant)
    y = mb.tensor("y", [m, n])
    b = mb.const("b", RNG.normal(0, 1, n).astype(np.float32)) if bias else -1
    mb.op("FULLY_CONNECTED", [x, w, b], [y], fused_activation_function=act)
    if residual:
        r, z = mb.input("r", [m, n]), mb.tensor("z", [m, n])
        mb.op("ADD", [y, r], [z])
        y = z
    if share:                       # the same int8 weights read by a gather too (a tied embedding)
        idx, e = mb.input("idx", [2], "int32"), mb.tensor("e", [2, k])
        mb.op("EMBEDDING_LOOKUP", [idx, w], [e])
        mb.output(e)
    mb.output(y)
    return mb.finish()


def templates(b) -> set:
    return {b.shaders[d.shader].name.split("+")[0] for d in b.dispatches}


def rel(a, b) -> float:
    return float(np.abs(a.astype(np.float64) - b).max() / max(np.abs(b).max(), 1e-30))


@pytest.mark.parametrize("m,k,n,per_channel", [(1, 64, 24, True), (1, 200, 7, False), (5, 96, 33, True),
                                               (19, 48, 16, True), (3, 2056, 9, True)])
def test_matches_litert_default_path(gpu, m, k, n, per_channel):
    model = fc_model(m, k, n, per_channel=per_channel)
    x = (RNG.normal(0, 1, (m, k)) + RNG.normal(0, 1, (m, 1))).astype(np.float32)
    bundle = gpuc.compile(model)
    assert "gemm_q8" in templates(read_bundle(bundle))
    with gpuc.load(bundle, device=gpu.device) as mod:
        (out,) = mod.run([x])
    (xnn,) = run_litert(model, [x], default=True)
    (builtin,) = run_litert(model, [x])
    assert rel(out, xnn) <= 2e-6                      # the same integers, float rounding only
    assert rel(out, builtin) <= 3 * rel(xnn, builtin) + 1e-6   # builtin: symmetric input quantization


def test_weights_stay_int8_in_the_bundle(gpu):
    model = fc_model(1, 512, 64)
    b = read_bundle(gpuc.compile(model))
    weight_bytes = sum(t.nbytes for t in b.tensors if t.memory == WEIGHTS)
    assert weight_bytes < 512 * 64 * 1.2              # int8 (+ scales, sums, bias), not 4 bytes a weight


def test_epilogue_relu_residual_and_shared_weights(gpu):
    m, k, n = 4, 80, 80
    model = fc_model(m, k, n, act="RELU", residual=True, share=True)
    x = RNG.normal(0, 1, (m, k)).astype(np.float32)
    r = RNG.normal(0, 1, (m, n)).astype(np.float32)
    idx = np.array([3, 70], np.int32)
    with gpuc.load(gpuc.compile(model), device=gpu.device) as mod:
        e, z = mod.run([x, r, idx])
    xe, xz = run_litert(model, [x, r, idx], default=True)
    np.testing.assert_allclose(e, xe, rtol=1e-6, atol=1e-7)
    assert rel(z, xz) <= 2e-6


def test_asymmetric_weights_keep_the_float_path(gpu):
    model = fc_model(2, 40, 8, per_channel=False, zero_point=5)
    b = read_bundle(gpuc.compile(model))
    assert "gemm_q8" not in templates(b)


def test_litert_torch_shaped_llm_against_litert():
    """benchmarks/llm_bench.py's generated Qwen2-shaped model (prefill_N / decode signatures, KV cache by
    DYNAMIC_UPDATE_SLICE, composites, int8 FCs incl. the tied LM head): every signature on the GPU, the
    decode logits and greedy tokens as LiteRT's signature runners give them."""
    from benchmarks import llm_bench
    cfg = llm_bench.CONFIGS["tiny"]
    w = llm_bench.make_weights(cfg, seed=3)
    r = llm_bench.check(cfg, w, llm_bench.write_tflite(cfg, w, [6], 16), 6, 16, steps=3)
    assert r["ok"] and r["rel_err_vs_litert"] <= 1e-5, r
