"""Greedy decoding on the device: the `decode_greedy` signature (compiler/ops/greedy_feed.py) keeps
the token and its position as state and feeds its own argmax back, so a step needs no host input.
generate() (runtime/generate.py) seeds the state after the prefill and keeps `depth` steps queued
(the queue runs them in order); the host reads 4 bytes per step, the token, while the next step runs.

The seeds go in through LoadedModel.set_state (any signature runner: they share the state region), in
the queue's order after the runs already submitted.
"""
from __future__ import annotations

from collections import deque

import numpy as np

from gpuc.errors import GpucError

# the derived signature's names (compiler/ops/greedy_feed.py writes them; a runtime-only install reads them)
DERIVED, SOURCE = "decode_greedy", "decode"
STATE_TOKENS, STATE_POS = "var:greedy/tokens", "var:greedy/input_pos"      # passes/variables.py names: var:<name>
NEXT_TOKEN = "next_token"


def greedy_runner(model):
    """The model's device-greedy runner (decode_greedy, no inputs, the next token out), or None."""
    if DERIVED not in model.signatures:
        return None
    r = model.signature(DERIVED)
    names = {r.bundle.tensors[d].name for d, _ in r.bundle.state_init}
    if r.inputs or [s.name for s in r.outputs] != [NEXT_TOKEN] or not {STATE_TOKENS, STATE_POS} <= names:
        return None
    return r


def run(runner, token: int, pos: int, steps: int, stop_ids=(), depth: int | None = None):
    """Yield up to `steps` greedy tokens after feeding `token` at position `pos` (the KV cache holds
    every earlier position), stopping after one in stop_ids.  Steps queued past a stop are waited for
    and dropped (they only write cache rows past the sequence, and the next generate resets the state)."""
    runner.set_state(STATE_TOKENS, np.array([[token]], np.int32))
    runner.set_state(STATE_POS, np.array([pos], np.int32))
    depth = max(1, min(depth or runner.n_slots, runner.n_slots))
    pending, submitted = deque(), 0
    try:
        while submitted < min(depth, steps):
            pending.append(runner.run_async({}))
            submitted += 1
        while pending:
            out = pending.popleft().wait()
            if submitted < steps:                 # keep the queue full while the host reads this one
                pending.append(runner.run_async({}))
                submitted += 1
            tok = int(np.asarray(out[0]).reshape(-1)[0])
            yield tok
            if tok in stop_ids:
                return
    finally:
        for h in pending:
            try:
                h.wait()
            except GpucError:
                pass
