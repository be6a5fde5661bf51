"""Blockwise int4 FULLY_CONNECTED weights (TFLite BlockwiseQuantization, as litert-torch's dynamic_int4_block32 /
_block128 exports write them: compiler/frontend/blockwise.py, compiler/ops/blockwise_fc.py): the activations
quantized per row as LiteRT's default CPU path (XNNPACK) does, so gpuc gives its outputs to float rounding;
a malformed block layout is one ModelFormatError naming the tensor.  The LLM-level check is the
tiny_llama_q4b32 fixture of tests/runtime/test_llm_archs.py; here too its decode step's dispatch count and
weight bytes with the one-kernel path (compiler/ops/gemm_qb.py) against the plain-op rewrite."""
from __future__ import annotations

import numpy as np
import pytest

from pathlib import Path

from gpuc.compiler.frontend.importer import load_tflite
from gpuc.compiler.ops import gemm_qb
from gpuc.errors import ModelFormatError
from helpers.builder import ModelBuilder

pytest.importorskip("vulkan")

import gpuc  # noqa: E402
from gpuc.runtime.bundle import read_bundle  # noqa: E402
from helpers.litert import run_litert  # noqa: E402

N, K, M = 24, 64, 3
LLAMA = Path(__file__).resolve().parents[1] / "data" / "llm" / "tiny_llama_q4b32.tflite"


def model(block=32, seed=0, k=K, m=M, act=0) -> bytes:
    r = np.random.default_rng(seed)
    q = r.integers(-8, 8, (N, k)).astype(np.int8)
    nib = (q.reshape(-1) & 0xF).astype(np.uint8)
    packed = (nib[0::2] | (nib[1::2] << 4)).astype(np.uint8)          # two a byte, the low nibble first
    nb = k // block if k % block == 0 else k // 32                      # (a bad block size: 32's count)
    scales = (r.uniform(0.01, 0.05, (N, nb))).astype(np.float16)
    mb = ModelBuilder()
    x = mb.input("x", [m, k])
    s = mb.const("w_scales", scales)
    w = mb.tensor("w", [N, k], "int4", data=packed)
    mb.tensors[w]["quantization"] = {"details": ("BlockwiseQuantization",
                                                 {"scales": s, "zero_points": -1, "block_size": block})}
    b = mb.const("bias", r.standard_normal(N).astype(np.float32))
    y = mb.tensor("y", [m, N])
    mb.op("FULLY_CONNECTED", [x, w, b], [y], version=5, fused_activation_function=act)
    mb.output(y)
    return mb.finish()


@pytest.mark.parametrize("kernel", [False, True])
def test_int4_blockwise_fc_matches_litert_default(kernel):
    """Both paths: the plain-op rewrite (compiler/ops/blockwise_fc.py) and the int4 kernel."""
    pytest.importorskip("ai_edge_litert")
    data = model()
    r = np.random.default_rng(1)
    x = r.standard_normal((M, K)).astype(np.float32)
    x[1] = np.abs(x[1])                              # a row with no negative value (rmin = 0)
    ref = run_litert(data, [x], default=True)[0]
    bundle = gpuc.compile(data, cache=False, blockwise_kernel=kernel)
    got = gpuc.load(bundle).run([x])[0]
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5 * np.abs(ref).max())
    assert (len(read_bundle(bundle).dispatches) == 1) == kernel


def test_bad_block_size_is_a_format_error():
    with pytest.raises(ModelFormatError, match="'w'.*block size 24"):
        load_tflite(model(block=24))


@pytest.mark.parametrize("block,k,m,act,sms", [(32, 64, 1, 0, 0), (32, 160, 3, 0, 0), (128, 256, 1, 0, 0),
                                               (128, 256, 11, 0, 0), (32, 64, 3, 1, 0), (32, 2048, 1, 0, 1),
                                               (32, 2048, 3, 0, 1)])
def test_int4_kernel_matches_litert_default(block, k, m, act, sms, monkeypatch):
    """The one-kernel path (compiler/ops/gemm_qb.py: int4 weights in the bundle, one dispatch) for block
    32 and 128, one row and several, a fused RELU; `sms` (a 1-SM GPU) plans several channel rounds a
    workgroup."""
    pytest.importorskip("ai_edge_litert")
    if sms:
        monkeypatch.setattr(gemm_qb, "GPU_SMS", sms)
        assert gemm_qb._plan(m, N, k, k // block)[2] > 1     # (RN: rounds of one channel each)
    data = model(block, seed=block + k + m, k=k, m=m, act=act)
    r = np.random.default_rng(k + m)
    x = (r.standard_normal((m, k)) * 3).astype(np.float32)
    x[-1] = np.abs(x[-1])                            # a row with no negative value (rmin = 0)
    ref = run_litert(data, [x], default=True)[0]
    bundle = gpuc.compile(data, cache=False)
    got = gpuc.load(bundle).run([x])[0]
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5 * np.abs(ref).max())
    b = read_bundle(bundle)
    assert len(b.dispatches) == 1 and b.stats["weights_bytes"] < 2 * N * k    # (float32: 4 N k)


def test_tiny_llama_decode_runs_one_kernel_an_fc():
    """The int4 Llama's decode step: far fewer dispatches and weight bytes than the plain-op rewrite."""
    stats = {}
    for kernel in (True, False):
        b = read_bundle(gpuc.compile(str(LLAMA), cache=False, blockwise_kernel=kernel))
        stats[kernel] = next(s.stats for s in [b] + b.signatures if s.signature == "decode")
    assert stats[True]["dispatches"] <= 40 < 150 <= stats[False]["dispatches"], stats
    assert stats[True]["weights_bytes"] * 3 < stats[False]["weights_bytes"], stats
