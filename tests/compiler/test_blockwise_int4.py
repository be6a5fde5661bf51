"""Blockwise int4 FULLY_CONNECTED weights (TFLite BlockwiseQuantization, as litert-torch's dynamic_int4_block32 /
_block128 exports write them: compiler/frontend/blockwise.py, compiler/ops/blockwise_fc.py): the activations
quantized per row as LiteRT's default CPU path (XNNPACK) does, so gpuc gives its outputs to float rounding;
a malformed block layout is one ModelFormatError naming the tensor.  The LLM-level check is the
tiny_llama_q4b32 fixture of tests/runtime/test_llm_archs.py."""
from __future__ import annotations

import numpy as np
import pytest

from gpuc.compiler.frontend.importer import load_tflite
from gpuc.errors import ModelFormatError
from helpers.builder import ModelBuilder

pytest.importorskip("vulkan")

import gpuc  # noqa: E402
from helpers.litert import run_litert  # noqa: E402

N, K, M = 24, 64, 3


def model(block=32, seed=0) -> bytes:
    r = np.random.default_rng(seed)
    q = r.integers(-8, 8, (N, K)).astype(np.int8)
    nib = (q.reshape(-1) & 0xF).astype(np.uint8)
    packed = (nib[0::2] | (nib[1::2] << 4)).astype(np.uint8)          # two a byte, the low nibble first
    scales = (r.uniform(0.01, 0.05, (N, K // 32))).astype(np.float16)   # (32: the real block count below)
    mb = ModelBuilder()
    x = mb.input("x", [M, K])
    s = mb.const("w_scales", scales)
    w = mb.tensor("w", [N, K], "int4", data=packed)
    mb.tensors[w]["quantization"] = {"details": ("BlockwiseQuantization",
                                                 {"scales": s, "zero_points": -1, "block_size": block})}
    b = mb.const("bias", r.standard_normal(N).astype(np.float32))
    y = mb.tensor("y", [M, N])
    mb.op("FULLY_CONNECTED", [x, w, b], [y], version=5)
    mb.output(y)
    return mb.finish()


def test_int4_blockwise_fc_matches_litert_default():
    pytest.importorskip("ai_edge_litert")
    data = model()
    r = np.random.default_rng(1)
    x = r.standard_normal((M, K)).astype(np.float32)
    x[1] = np.abs(x[1])                              # a row with no negative value (rmin = 0)
    ref = run_litert(data, [x], default=True)[0]
    got = gpuc.load(gpuc.compile(data)).run([x])[0]
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5 * np.abs(ref).max())


def test_bad_block_size_is_a_format_error():
    with pytest.raises(ModelFormatError, match="'w'.*block size 24"):
        load_tflite(model(block=24))
