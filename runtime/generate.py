"""Token generation with a multi-signature LLM bundle (litert-torch's `prefill_N` and `decode`
signatures, the KV cache kept on the device as state: compiler/signatures.py).

`generate(model, prompt_ids, max_new_tokens, sampler)` yields token ids as they are made.  The prompt
but its last token is prefilled in chunks (the largest prefill signature while the rest is longer,
then the smallest one that holds what is left, padded with token 0 at the following positions: those
cache rows are rewritten by the decode steps before any mask lets them be read); then each decode step
feeds one token at the next position and samples the next from the logits.  A signature that also takes
`mask` (litert-torch's mask_as_input export) is fed the causal mask of its positions (0 on the keys up to
each position, -inf past it).  Per step only the token,
its position and the logits cross between host and device.  The state is reset first.

Greedy sampling (temperature 0) with a bundle that has `decode_greedy` (compiler/ops/greedy_feed.py)
skips the host: the token and position are seeded as state after the prefill and the steps run
queued on the device, 4 bytes (the token) read back per step (runtime/decode_loop.py).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from gpuc.errors import GpucError
from gpuc.runtime import decode_loop

TOKENS, POSITIONS, MASK = "tokens", "input_pos", "mask"


@dataclass
class Sampler:
    """Greedy when temperature is 0; else softmax(logits / temperature), cut to the top_k most likely
    (0: all) and to the smallest set reaching top_p of the probability, drawn with a seeded generator."""
    temperature: float = 0.0
    top_k: int = 0
    top_p: float = 1.0
    seed: int | None = None

    def __post_init__(self):
        if self.temperature < 0 or self.top_k < 0 or not 0 < self.top_p <= 1:
            raise GpucError(f"sampler: temperature {self.temperature} (>= 0), top_k {self.top_k} (>= 0), "
                            f"top_p {self.top_p} (in (0, 1]) out of range")
        self._rng = np.random.default_rng(self.seed)

    def __call__(self, logits: np.ndarray) -> int:
        z = np.asarray(logits, np.float64).reshape(-1)
        if self.temperature == 0:
            return int(np.argmax(z))
        order = np.argsort(-z, kind="stable")
        if self.top_k:
            order = order[:self.top_k]
        p = np.exp((z[order] - z[order[0]]) / self.temperature)
        p /= p.sum()
        keep = int(np.searchsorted(np.cumsum(p), self.top_p) + 1)
        order, p = order[:keep], p[:keep] / p[:keep].sum()
        return int(order[self._rng.choice(len(order), p=p)])


def _steps(model) -> tuple[dict, object, int | None]:
    """({prompt length: prefill runner}, decode runner, the cache length or None)."""
    names = model.signatures
    if "decode" not in names:
        raise GpucError(f"generate needs a bundle with a 'decode' signature (this one has: {names or 'none'}); "
                        "compile a litert-torch generative export")
    prefill = {}
    for n in names:
        m = re.fullmatch(r"prefill_(\d+)", n)
        if m:
            prefill[int(m.group(1))] = model.signature(n)
    decode = model.signature("decode")
    for r in [decode, *prefill.values()]:
        got = sorted(s.name for s in r.inputs)
        if got not in (sorted([TOKENS, POSITIONS]), sorted([TOKENS, POSITIONS, MASK])):
            raise GpucError(f"generate: signature {r.bundle.signature!r} takes inputs {got}; expected "
                            f"{[TOKENS, POSITIONS]} (the KV cache threaded as state), and optionally {MASK!r}")
    if len(decode.outputs) != 1:
        raise GpucError(f"generate: the decode signature has {len(decode.outputs)} outputs; expected the logits")
    for r in [decode, *prefill.values()]:
        tok = next(s for s in r.inputs if s.name == TOKENS)
        if len(tok.shape) != 2 or tok.shape[0] != 1:
            raise GpucError(f"generate: signature {r.bundle.signature!r} takes {TOKENS} of shape {list(tok.shape)}: a "
                            f"batch of {tok.shape[0] if tok.shape else 0} sequences (litert-torch decode_batch_size); "
                            "generate runs one sequence, [1, N]")
    if decode.bundle.stats.get("kv_positions"):   # compiler/signatures.py cache_positions: either cache layout
        return prefill, decode, int(decode.bundle.stats["kv_positions"])
    state = decode.bundle.stats.get("state") or []
    shapes = [t.shape for t in decode.bundle.tensors if t.name in state and len(t.shape) >= 2]
    return prefill, decode, (int(shapes[0][1]) if shapes else None)


def step_feeds(runner, tokens: np.ndarray, pos: np.ndarray) -> dict:
    """A signature's inputs for `tokens` [1, n] at positions `pos` [n]; an export that takes a mask
    (litert-torch's mask_as_input: [1, 1, n, KV]) gets the causal mask over those positions."""
    feeds = {TOKENS: tokens, POSITIONS: pos}
    for spec in runner.inputs:
        if spec.name == MASK:
            keys = np.arange(int(spec.shape[-1]))
            feeds[MASK] = np.where(keys[None, :] <= pos[:, None], 0, -np.inf).astype(np.float32).reshape(spec.shape)
    return feeds


def _run(runner, tokens: list[int], start: int, length: int):
    toks = np.zeros((1, length), np.int32)
    toks[0, :len(tokens)] = tokens
    return runner.run(step_feeds(runner, toks, np.arange(start, start + length, dtype=np.int32)))


def generate(model, prompt_ids, max_new_tokens: int, sampler=None, stop_ids=(), device_greedy: bool = True):
    """Yield up to max_new_tokens token ids (stopping after one in stop_ids).  Greedy sampling with a
    bundle that has the derived `decode_greedy` signature runs on the device (device_greedy=False:
    the host path, the logits read back and argmax'd per step; the same tokens)."""
    prompt = [int(t) for t in prompt_ids]
    if not prompt:
        raise GpucError("generate: the prompt is empty (give at least one token id)")
    if max_new_tokens < 0:
        raise GpucError(f"generate: max_new_tokens {max_new_tokens} is negative")
    sampler = sampler or Sampler()
    prefill, decode, max_len = _steps(model)
    if max_len is not None and len(prompt) + max_new_tokens > max_len:
        raise GpucError(f"generate: {len(prompt)} prompt + {max_new_tokens} new tokens exceed the KV cache's "
                        f"{max_len} positions")
    model.reset_state()
    pos, rest = 0, prompt[:-1]
    while rest:
        fits = [n for n in prefill if n >= len(rest)]
        n = min(fits) if fits else max(prefill, default=0)
        if not n:               # no prefill signature: the prompt goes through decode steps
            n = 1
        chunk = rest[:n]
        if max_len is not None and pos + n > max_len:
            raise GpucError(f"generate: prefill of {n} tokens at position {pos} passes the KV cache's {max_len}")
        _run(prefill[n] if n in prefill else decode, chunk, pos, n)
        pos, rest = pos + len(chunk), rest[n:]
    token = prompt[-1]
    greedy = decode_loop.greedy_runner(model) if sampler.temperature == 0 and device_greedy else None
    if greedy is not None:                  # the argmax on the device, steps queued (runtime/decode_loop.py)
        yield from decode_loop.run(greedy, token, pos, max_new_tokens, stop_ids)
        return
    for _ in range(max_new_tokens):
        logits = _run(decode, [token], pos, 1)[0]
        pos += 1
        token = sampler(logits)
        yield token
        if token in stop_ids:
            return
