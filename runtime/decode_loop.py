"""Greedy decoding on the device: the `decode_greedy` signature (compiler/ops/greedy_feed.py) keeps
the token and its position as state and feeds its own argmax back, so a step needs no host input.
generate() (runtime/generate.py) seeds the state after the prefill and keeps `depth` submissions
queued (the queue runs them in order); the host reads 4 bytes per step, the token, while the next
submission runs.  A submission holds STEPS_PER_SUBMIT steps in one command buffer
(LoadedModel.run_repeated_async, runtime/repeat.py: one barrier between steps, no submit or fence),
after a first single step, so the first token comes out after one step; a tail shorter than
STEPS_PER_SUBMIT goes as single steps (their command buffer is recorded already).

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
STEPS_PER_SUBMIT = 4        # decode steps per submission (1: one submission per step)


def greedy_runner(model):
    """The model's device-greedy runner (decode_greedy, no inputs, the next token out), or None."""
    if DERIVED not in model.signatures:
        return None
    r = model.signature(DERIVED)
    names = {r.bundle.tensors[d].name for d, _ in r.bundle.state_init}
    if r.inputs or [s.name for s in r.outputs] != [NEXT_TOKEN] or not {STATE_TOKENS, STATE_POS} <= names:
        return None
    return r


def seed(runner, token: int, pos: int) -> None:
    """Set the greedy state: the next step feeds `token` at position `pos`."""
    runner.set_state(STATE_TOKENS, np.array([[token]], np.int32))
    runner.set_state(STATE_POS, np.array([pos], np.int32))


def plan(steps: int, k: int) -> list[int]:
    """Steps per submission: one (the first token streams out after one step), then k at a time, then
    the rest (< k) one by one; never more than `steps` in all."""
    if steps <= 0:
        return []
    full, rest = divmod(steps - 1, k)
    return [1] + [k] * full + [1] * rest


def _single(handle):
    return lambda: [handle.wait()]


def run(runner, token: int, pos: int, steps: int, stop_ids=(), depth: int | None = None,
        steps_per_submit: int | None = None):
    """Yield up to `steps` greedy tokens after feeding `token` at position `pos` (the KV cache holds
    every earlier position), stopping after one in stop_ids.  `steps_per_submit` (default
    STEPS_PER_SUBMIT) steps run per submission, `depth` (default: the runner's slots) submissions
    queued; each token is yielded once its submission completes.  Steps run past a stop are waited for
    and dropped (they only write cache rows past the sequence, and the next generate resets the state)."""
    k = STEPS_PER_SUBMIT if steps_per_submit is None else steps_per_submit
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise GpucError(f"decode loop: steps_per_submit {k!r} is not a positive integer")
    seed(runner, token, pos)
    depth = max(1, min(depth or runner.n_slots, runner.n_slots))
    sizes, pending = deque(plan(steps, int(k))), deque()      # pending: wait() of each submission, in order

    def submit():
        n = sizes.popleft()
        pending.append(_single(runner.run_async({})) if n == 1 else runner.run_repeated_async(n).wait)
    try:
        while sizes and len(pending) < depth:
            submit()
        while pending:
            outs = pending.popleft()()
            if sizes:                             # keep the queue full while the host reads these
                submit()
            for out in outs:
                tok = int(np.asarray(out[0]).reshape(-1)[0])
                yield tok
                if tok in stop_ids:
                    return
    finally:
        for wait in pending:
            try:
                wait()
            except GpucError:
                pass
