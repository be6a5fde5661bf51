"""litert-torch generative exports of several architectures (tests/data/llm/*.tflite, each with its
LiteRT CPU reference NAME.ref.npz; tests/data/llm/make_llm_fixtures.py and the other helpers' generators
rebuild them): every signature compiles onto the GPU with the KV cache as device state, prefill + 8 greedy
decode steps through the signature runners give LiteRT's tokens and logits, and `generate` (the derived
device-greedy `decode_greedy` signature) gives the same tokens as the host path and as LiteRT.

A fixture joins by being there: NAME.tflite with NAME.ref.npz holding `prompt` [1, 8] int32,
`decode_logits` [8, V] and `decode_tokens` [8] (prefill over the prompt at positions 0..7, then greedy
decode steps from the prompt's last token at position 8), optionally `generate_tokens` [8] (LiteRT under
generate's protocol: the prompt but its last token prefilled, padded with token 0).  An export with a
`mask` input (litert-torch's mask_as_input) is fed the causal mask (decode_greedy computes it on the device)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("vulkan")

import gpuc  # noqa: E402
from gpuc.runtime.bundle import read_bundle  # noqa: E402
from gpuc.runtime.generate import step_feeds  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / "data" / "llm"
FIXTURES = sorted(p.name[:-len(".tflite")] for p in DATA.glob("*.tflite") if (DATA / (p.name[:-7] + ".ref.npz")).exists())

# Issue 29's bound.  The int8 exports meet it too (gpuc at ~3e-7 of max|logit| on these, lavapipe): their FCs
# quantize each activation row as LiteRT's XNNPACK does, and no value here lands near an int8 rounding step
# (the shared Qwen export has one: tests/runtime/test_llm_shared.py holds it to 1e-3).
REL_TOL = 1e-4


@pytest.fixture(scope="module", params=FIXTURES)
def llm(request):
    name = request.param
    return name, gpuc.compile(str(DATA / f"{name}.tflite")), dict(np.load(DATA / f"{name}.ref.npz"))


def test_fixtures_present():
    assert FIXTURES, f"no NAME.tflite + NAME.ref.npz pairs in {DATA}"


def test_every_signature_on_the_gpu(llm):
    _, bundle, _ = llm
    b = read_bundle(bundle)
    names = [b.signature] + [s.signature for s in b.signatures]
    assert "decode" in names and any(n.startswith("prefill_") for n in names)
    assert "decode_greedy" in names                  # (with a mask input too: ops/greedy_feed.py builds it)
    for sb in [b] + b.signatures:
        assert sb.stats["cpu_nodes"] == 0 and not sb.steps, sb.signature
        assert sb.stats["state"] and all(s.startswith(("kv_cache_", "var:greedy/")) for s in sb.stats["state"])


def _run(runner, tokens, pos):
    """A signature run; an export with a mask input (mask_as_input) gets the causal mask of `pos`."""
    return runner.run(step_feeds(runner, tokens, pos))


def test_decode_and_generate_match_litert(llm):
    """One load: prefill + greedy decode steps through the signature runners against LiteRT's tokens and
    logits; then `generate` on the host path and on the device (decode_greedy) give the same tokens."""
    name, bundle, ref = llm
    prompt = ref["prompt"].astype(np.int32)
    n = len(ref["decode_tokens"])
    with gpuc.load(bundle) as m:
        _run(m.signature(f"prefill_{prompt.shape[1]}"), prompt, np.arange(prompt.shape[1], dtype=np.int32))
        decode = m.signature("decode")
        token, logits = int(prompt[0, -1]), []
        for step in range(n):
            out = _run(decode, np.array([[token]], np.int32), np.array([prompt.shape[1] + step], np.int32))
            logits.append(out[0].reshape(-1))
            token = int(np.argmax(logits[-1]))
        host = list(m.generate([int(t) for t in prompt[0]], n, device_greedy=False))
        device = list(m.generate([int(t) for t in prompt[0]], n))
    logits = np.array(logits)
    assert list(np.argmax(logits, -1)) == list(ref["decode_tokens"]), name
    err = np.abs(logits - ref["decode_logits"]).max() / np.abs(ref["decode_logits"]).max()
    assert err <= REL_TOL, (name, err)
    assert device == host, name
    if "generate_tokens" in ref:
        assert host == [int(t) for t in ref["generate_tokens"]], name
