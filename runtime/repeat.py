"""A model without inputs run k times back to back in one command buffer and one submission
(LoadedModel.run_repeated_async): the device-greedy decode loop (runtime/decode_loop.py) runs k
decode steps per submission, each step's state (token, position, KV cache) read by the next, so the
GPU goes from step to step with one barrier between them instead of a submission, a fence and the
host's turn.

Recording (Recorder.record_repeated): wait for earlier work, then per run its dispatches (the same
barriers as one run), a barrier, and its outputs and status words copied into the slot's repeat
staging at r * stride (stride: the slot's output staging size); a compute -> compute barrier between
runs.  Per slot, the command buffers of the last CACHED values of k are kept (k -> recorded, alike in
every slot for the wait estimate: Slots._key); another k re-records the least recently used one.
The repeat staging holds `cap` runs, a power of two >= the largest k asked of the slot (at most
MAX_K): a larger k replaces it, the old one freed with the model, so a slot never holds more than
twice its largest k's staging.

A run-time check failing (runtime/status.py) raises RunError naming the run (0..k-1) it failed in.
The timestamps (last_gpu_ms) cover the k runs together.  Runs go through the slots as run_async's
do: in queue order with the other runs and set_state, waited for or cancelled at close.
"""
from __future__ import annotations

import numpy as np
import vulkan as vk

from gpuc.errors import GpucError
from gpuc.runtime import iospec, status
from gpuc.runtime.device import MemoryKind
from gpuc.runtime.outputs import Outputs
from gpuc.runtime.slots import RunHandle

MAX_K = 256         # runs in one submission
CACHED = 2          # recorded command buffers kept per slot (the loop's k and one other)


class RepeatStaging:
    """One slot's output staging for up to `cap` runs: run r's outputs (and status words) at r * stride."""

    def __init__(self, model, cap: int):
        b = model.bundle
        specs, self.stride = iospec.layout(b, b.outputs + status.tensors(b))
        n = len(b.outputs)
        self.buf, root = model.resources.mapped(cap * self.stride, vk.VK_BUFFER_USAGE_TRANSFER_DST_BIT,
                                                MemoryKind.HOST)
        self.cap = cap
        self.views = [iospec.views(root[r * self.stride:(r + 1) * self.stride], specs[:n]) for r in range(cap)]
        self.recorded = set()           # the k whose cached command buffer copies into this staging
        self.status = None
        if b.checks:                    # the status words of every run: rows r * stride apart
            s = specs[n]
            words = int(np.prod(s.shape, dtype=np.int64))
            rows = np.ndarray((cap, words), s.dtype, root, s.staging, (self.stride, s.dtype.itemsize))
            self.status = status.StatusWords(b.checks, rows, "run")


def unsupported(model) -> str | None:
    """Why `model` cannot run repeated, or None."""
    if model.inputs:
        return (f"the model takes inputs {[s.name for s in model.inputs]}; repeated runs are for a model without "
                "inputs (its state feeds each run, e.g. decode_greedy)")
    if model.program is not None:
        return "the program has host (CPU) or control-flow steps; repeated runs need a program that runs fully on the GPU"
    if model.dims is not None or model.max_batch > 1 or model.bundle.output_sizes:
        return "the bundle has dynamic dims, a --max-batch or outputs trimmed per run"
    return None


def command(model, slot, k: int):
    """The slot's command buffer of k runs (cached; recorded on first use, or re-recorded into the least
    recently used one past CACHED values of k), its repeat staging large enough for k."""
    st = slot.repeat_out
    if st is None or st.cap < k:
        st = slot.repeat_out = RepeatStaging(model, min(MAX_K, 1 << (k - 1).bit_length()))
    cmd = slot.repeats.pop(k, None)
    if cmd is None or k not in st.recorded:
        if cmd is None and len(slot.repeats) >= CACHED:          # re-record the least recently used
            old = next(iter(slot.repeats))
            cmd = slot.repeats.pop(old)
            st.recorded.discard(old)
        cmd = model.recorder.record_repeated(k, st.buf, st.stride, slot.pool, slot.command_pool(), cmd)
        st.recorded.add(k)
    slot.repeats[k] = cmd               # the most recently used last
    return cmd


def run_async(model, k: int) -> RunHandle:
    """LoadedModel.run_repeated_async: submit k runs in one command buffer; wait() gives a list of k
    `Outputs` (runtime/outputs.py), run by run."""
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k <= MAX_K:
        raise GpucError(f"run_repeated_async: k {k!r} is not an integer in 1..{MAX_K}")
    k = int(k)
    model._check_open()
    why = unsupported(model)
    if why:
        raise GpucError(f"run_repeated_async: {why}")
    slots = model.slots
    slot = slots.acquire()
    saved = slot.status
    try:
        cmd = command(model, slot, k)
        st = slot.repeat_out
        slot.status = st.status         # Slots.wait checks the k runs' status words
        slots.submit(slot, [cmd])
    except BaseException:
        slot.status = saved
        slot.free()
        raise
    names = [s.name for s in model.outputs]

    def collect():
        return [Outputs([slot.copier.copy_out(v) for v in st.views[r]], names) for r in range(k)]

    def cleanup():
        slot.status = saved
    h = RunHandle(slots, slot, collect, cleanup)
    slot.handle = h
    return h
