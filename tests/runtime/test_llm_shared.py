"""The shared litert-torch LLM (../shared/models/llm/qwen_tiny_q8_kv128.tflite: prefill_8 and decode
signatures, KV cache threaded through DYNAMIC_UPDATE_SLICE, composites, int8 weights) compiled into one
multi-signature bundle: every signature on the GPU, the cache on the device (a step moves the token,
its position and the logits only), and the 8 greedy decode steps of the LiteRT reference."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("vulkan")

import gpuc  # noqa: E402
from gpuc.errors import GpucError  # noqa: E402
from gpuc.runtime.bundle import read_bundle  # noqa: E402

# Acceptance (issue 29): 1e-4 x max|logit|.  gpuc is at ~1.2e-7 of the reference: its int8-weight FCs
# (ops/gemm_q8.py) quantize the activations per row as LiteRT's XNNPACK path does, and attention follows the
# composite's attributes as XNNPACK does (ops/sdpa_composite.py; inlining litert-torch's decomposition put
# gpuc at ~4.8e-4).
REL_TOL = 1e-4
CACHES = sorted(f"kv_cache_{a}_{i}" for a in "kv" for i in range(2))


@pytest.fixture(scope="module")
def llm(models_dir):
    path = models_dir / "llm" / "qwen_tiny_q8_kv128.tflite"
    if not path.exists():
        pytest.skip(f"{path} not found")
    ref = np.load(models_dir / "llm" / "ref" / "qwen_tiny_q8_kv128.greedy.npz")
    return gpuc.compile(str(path)), ref


def test_every_signature_on_the_gpu_cache_is_state(llm):
    bundle, _ = llm
    b = read_bundle(bundle)
    assert [b.signature] + [s.signature for s in b.signatures] == ["prefill_8", "decode", "decode_greedy"]
    for sb in [b] + b.signatures:
        assert sb.stats["cpu_nodes"] == 0 and not sb.steps
        assert sorted(sb.stats["state"]) == CACHES
    for sb in [b, b.signatures[0]]:
        assert [sb.tensors[i].name for i in sb.inputs] == ["tokens", "input_pos"]
    assert [b.signatures[0].tensors[i].name for i in b.signatures[0].outputs] == ["logits"]
    greedy = b.signatures[1]                  # derived: no inputs, the next token out, token and position as state
    assert greedy.stats["derived_from"] == "decode" and greedy.inputs == []
    assert [(greedy.tensors[i].name, greedy.tensors[i].dtype) for i in greedy.outputs] == [("next_token", "int32")]
    assert b.outputs == []                    # prefill only fills the cache


def test_greedy_decode_matches_litert_reference(llm):
    bundle, ref = llm
    with gpuc.load(bundle) as m:
        decode = m.signature("decode")
        m.run({"tokens": ref["prompt"].astype(np.int32), "input_pos": np.arange(8, dtype=np.int32)})
        token, logits = int(ref["prompt"][0, -1]), []
        for step in range(8):
            out = decode.run({"tokens": np.array([[token]], np.int32), "input_pos": np.array([8 + step], np.int32)})
            logits.append(out[0].reshape(-1))
            token = int(np.argmax(logits[-1]))
    logits = np.array(logits)
    assert list(np.argmax(logits, -1)) == list(ref["decode_tokens"])
    err = np.abs(logits - ref["decode_logits"]).max() / np.abs(ref["decode_logits"]).max()
    assert err <= REL_TOL, err


def test_generate_streams_greedy_tokens(llm):
    bundle, ref = llm
    prompt = [int(t) for t in ref["prompt"][0]]
    with gpuc.load(bundle) as m:
        gen = m.generate(prompt, 2)
        first = next(gen)                     # streamed: the first token before the second is made
        assert [first] + list(gen) == list(ref["decode_tokens"][:2])


def test_device_greedy_matches_litert_reference(llm):
    """decode_greedy (the argmax on the device); stop tokens and the host path: tests/runtime/test_decode_greedy.py."""
    bundle, ref = llm
    with gpuc.load(bundle) as m:              # the reference's tokens are LiteRT's host-greedy ones
        assert list(m.generate([int(t) for t in ref["prompt"][0]], 8)) == list(ref["decode_tokens"])
        m.set_state("var:greedy/input_pos", np.array([3], np.int32))
        with pytest.raises(GpucError, match="set_state"):
            m.set_state("var:greedy/input_pos", np.array([3.0], np.float32))
