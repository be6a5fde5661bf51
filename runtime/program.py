"""Running a bundle's program: GPU segments, host (CPU) steps and jumps (partial delegation, WHILE, IF).

A bundle without host steps or jumps runs as one recorded command buffer (executor.py).  With a
program, every GPU step is its own command buffer (recorded once, at load); a group of consecutive
host steps is one round trip: a recorded download (arena -> a host-visible exchange buffer laid out
like the arena, so views share bytes as they do there), a wait, the numpy kernels (runtime/cpu_ops.py) on
views of the exchange memory, and a recorded upload of their outputs (exchange -> arena) that the
next submission carries.  A jump reads its condition tensor back the same way.  Work between two
waits goes to the queue in one vkQueueSubmit.

Runs of a program are synchronous: run_async() returns a completed handle and run_in_place()
works as usual; keep_on_device / max-batch bundles and `gpuc profile` need a GPU-only bundle.

A run has one deadline, the model's timeout_s from its start: every GPU wait is cut to it, and host
steps and jumps are checked against it, so a loop that does not end fails with GpuTimeoutError (the
wait for another thread's run of the same model counts too).  A run stops at its next step once the
model is closed (GpucError "model is closed").
"""
from __future__ import annotations

import json
import math
import threading
import time

import numpy as np
import vulkan as vk

from gpuc.errors import BundleError, GpucError
from gpuc.runtime import commands, cpu_ops, iospec
from gpuc.runtime.bundle import ARENA, GPU, HOST, JUMP, JUMP_IF_FALSE, WEIGHTS
from gpuc.runtime.device import MemoryKind
from gpuc.runtime.timeouts import run_timeout_error
from gpuc.runtime.slots import RunHandle, closed_error

MAX_STEPS_PER_RUN = 50_000_000          # a WHILE that never ends is reported, not hung on forever


def needs_program(bundle) -> bool:
    return any(s.kind != GPU for s in bundle.steps)


def _json_attrs(text: str) -> dict:
    def hook(d):
        return bytes.fromhex(d["__bytes__"]) if set(d) == {"__bytes__"} else d
    return json.loads(text or "{}", object_hook=hook)


class Program:
    def __init__(self, model):
        self.m = m = model
        b = m.bundle
        if m.max_batch > 1:
            raise GpucError("this bundle runs ops on the CPU (host steps), which --max-batch bundles cannot do; "
                            "recompile without --max-batch")
        self.steps = b.steps
        self.lock = threading.Lock()
        try:
            self.attrs = [_json_attrs(s.attrs) if s.kind == HOST else None for s in b.steps]
        except (ValueError, TypeError, AttributeError) as e:
            raise BundleError(f"corrupt bundle: host step attributes: {e}") from None
        # the exchange buffer mirrors the arena's layout (same offsets), so views and tensors that
        # share arena bytes share exchange bytes too; only the byte ranges host steps touch are copied
        touched = sorted({t for s in b.steps if s.kind in (HOST, JUMP_IF_FALSE) for t in s.inputs + s.outputs
                          if t >= 0 and b.tensors[t].memory == ARENA})
        size = max((b.tensors[t].offset + b.tensors[t].nbytes for t in touched), default=4)
        self.xbuf, mapped = m.resources.mapped(max(size, 4), vk.VK_BUFFER_USAGE_TRANSFER_SRC_BIT
                                               | vk.VK_BUFFER_USAGE_TRANSFER_DST_BIT, MemoryKind.HOST)
        self.views = {}
        for t in touched:
            ti = b.tensors[t]
            self.views[t] = np.frombuffer(mapped, np.dtype(ti.dtype), int(np.prod(ti.shape, dtype=np.int64)),
                                          ti.offset).reshape(ti.shape)
        # groups of consecutive host steps (one round trip each); jumps are their own group
        self.group_end, self.down, self.up = {}, {}, {}
        k = 0
        while k < len(self.steps):
            s = self.steps[k]
            if s.kind in (HOST, JUMP_IF_FALSE):
                end = k + 1
                if s.kind == HOST:
                    while end < len(self.steps) and self.steps[end].kind == HOST and not self._is_target(end):
                        end += 1
                self.group_end[k] = end
                self._record_group(k, end)
                k = end
            else:
                k += 1
        self.gpu = {k: self._record_gpu(s) for k, s in enumerate(self.steps) if s.kind == GPU and s.count}
        self.slot_cmds = {id(sl): (self._record_io(sl, True), self._record_io(sl, False)) for sl in m.slots}

    def _is_target(self, k):
        return any(s.kind in (JUMP, JUMP_IF_FALSE) and s.target == k for s in self.steps)

    # -- recording -----------------------------------------------------------------------------
    def _regions(self, tensors):
        """Copy regions (same offset in arena and exchange) covering the tensors' bytes, merged so
        that no two regions overlap."""
        b, spans = self.m.bundle, []
        for t in set(tensors):
            if b.tensors[t].nbytes:
                spans.append((b.tensors[t].offset, b.tensors[t].offset + b.tensors[t].nbytes))
        merged = []
        for lo, hi in sorted(spans):
            if merged and lo <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], hi)
            else:
                merged.append([lo, hi])
        return [vk.VkBufferCopy(srcOffset=lo, dstOffset=lo, size=hi - lo) for lo, hi in merged]

    def _record_group(self, k, end):
        b = self.m.bundle
        produced, reads, writes = set(), [], []
        for s in self.steps[k:end]:
            reads += [t for t in s.inputs if t >= 0 and b.tensors[t].memory == ARENA and t not in produced]
            writes += s.outputs if s.kind == HOST else []
            produced.update(s.outputs if s.kind == HOST else [])
        self.down[k] = self._copy_cmd(self._regions(reads), True) if reads else None
        self.up[k] = self._copy_cmd(self._regions(writes), False) if writes else None

    def _copy_cmd(self, regions, down):
        arena = self.m.arenas.arena()
        cmd = self.m.recorder.begin()
        if down:
            commands.barrier(cmd, commands.C | commands.T, commands.T, vk.VK_ACCESS_SHADER_WRITE_BIT
                             | vk.VK_ACCESS_TRANSFER_WRITE_BIT, vk.VK_ACCESS_TRANSFER_READ_BIT)
            if regions:
                vk.vkCmdCopyBuffer(cmd, arena, self.xbuf, len(regions), regions)
            commands.barrier(cmd, commands.T, commands.H, vk.VK_ACCESS_TRANSFER_WRITE_BIT, vk.VK_ACCESS_HOST_READ_BIT)
        else:
            commands.wait_all(cmd)          # earlier readers of these arena bytes are done
            if regions:
                vk.vkCmdCopyBuffer(cmd, self.xbuf, arena, len(regions), regions)
            commands.barrier(cmd, commands.T, commands.C | commands.T, vk.VK_ACCESS_TRANSFER_WRITE_BIT,
                             commands.RW | vk.VK_ACCESS_TRANSFER_READ_BIT | vk.VK_ACCESS_TRANSFER_WRITE_BIT)
        vk.vkEndCommandBuffer(cmd)
        return cmd

    def _record_gpu(self, s):
        cmd = self.m.recorder.begin()
        commands.wait_all(cmd)
        self.m.recorder.dispatches(cmd, 1, None, s.first, s.count)
        vk.vkEndCommandBuffer(cmd)
        return cmd

    def _record_io(self, slot, inputs: bool):
        rec = self.m.recorder
        cmd = rec.begin()
        if inputs:
            commands.wait_all(cmd)
            rec.copy_in(cmd, slot.in_buf)
            commands.barrier(cmd, commands.T, commands.C | commands.T, vk.VK_ACCESS_TRANSFER_WRITE_BIT,
                             commands.RW | vk.VK_ACCESS_TRANSFER_READ_BIT | vk.VK_ACCESS_TRANSFER_WRITE_BIT)
        else:
            commands.barrier(cmd, commands.C | commands.T, commands.T, vk.VK_ACCESS_SHADER_WRITE_BIT
                             | vk.VK_ACCESS_TRANSFER_WRITE_BIT, vk.VK_ACCESS_TRANSFER_READ_BIT)
            rec.copy_out(cmd, slot.out_buf)
            commands.barrier(cmd, commands.T, commands.H, vk.VK_ACCESS_TRANSFER_WRITE_BIT, vk.VK_ACCESS_HOST_READ_BIT)
        vk.vkEndCommandBuffer(cmd)
        return cmd

    # -- running -------------------------------------------------------------------------------
    def _value(self, t):
        b = self.m.bundle
        if t < 0:
            return None
        ti = b.tensors[t]
        if ti.memory == WEIGHTS:
            n = int(np.prod(ti.shape, dtype=np.int64))
            return np.frombuffer(b.weights, np.dtype(ti.dtype), n, ti.offset).reshape(ti.shape)
        return self.views[t]

    def _host(self, k):
        s, b = self.steps[k], self.m.bundle
        ins = [None if t < 0 else np.array(self._value(t)) for t in s.inputs]
        specs = [cpu_ops.Spec(tuple(b.tensors[t].shape), b.tensors[t].dtype) for t in s.outputs]
        try:
            outs = cpu_ops.run(s.op, self.attrs[k], ins, specs)
        except (ValueError, IndexError, TypeError, KeyError, AttributeError, OverflowError, ZeroDivisionError,
                FloatingPointError) as e:
            raise GpucError(f"CPU kernel {s.label or s.op} failed: {e}") from None
        for t, v in zip(s.outputs, outs):
            self.views[t][...] = np.asarray(v).astype(self.views[t].dtype, copy=False).reshape(self.views[t].shape)

    def release(self) -> None:
        """The model closed: let go of the exchange memory's views (runtime/resources.py Mapped)."""
        self.views = {}

    def run(self, slot, mode="passive"):
        """Execute the program for `slot` (its inputs staged), leaving outputs in its staging."""
        m = self.m
        cin, cout = self.slot_cmds[id(slot)]
        timeout_s = m.slots.timeout_s
        deadline = None if timeout_s == math.inf else time.perf_counter() + timeout_s
        if not self.lock.acquire(timeout=-1 if deadline is None else timeout_s):
            raise run_timeout_error(timeout_s)          # another thread's run of this model held it throughout
        try:
            self._run(slot, mode, cin, cout, deadline, timeout_s)
        finally:
            self.lock.release()
        m.last_gpu_ms = None

    def _run(self, slot, mode, cin, cout, deadline, timeout_s):
        dev, slots = self.m.device, self.m.slots
        pending, k, n_steps = [cin], 0, 0
        while k < len(self.steps):
            n_steps += 1
            if n_steps > MAX_STEPS_PER_RUN:
                raise GpucError(f"program ran more than {MAX_STEPS_PER_RUN} steps (a WHILE loop that does not end?)")
            if slots.closed:
                raise closed_error()                 # close() waits for this run: it stops here
            if deadline is not None and time.perf_counter() > deadline:
                raise run_timeout_error(timeout_s)   # nothing of this run is in flight here
            s = self.steps[k]
            if s.kind == GPU:
                if s.count:
                    pending.append(self.gpu[k])
                k += 1
            elif s.kind == JUMP:
                k = s.target
            else:
                if self.down[k] is not None:
                    pending.append(self.down[k])
                if pending:
                    dev.submit(pending, slot.fence)
                    slots.wait(slot, mode, deadline)
                    pending = []
                if s.kind == JUMP_IF_FALSE:
                    cond = self.views[s.inputs[0]].reshape(-1)
                    k = k + 1 if cond.size and bool(cond[0]) else s.target
                    continue
                end = self.group_end[k]
                for j in range(k, end):
                    self._host(j)
                if self.up[k] is not None:
                    pending.append(self.up[k])
                k = end
        pending.append(cout)
        dev.submit(pending, slot.fence)
        slots.wait(slot, mode, deadline)


def run_async(model, inputs, keep_on_device=False):
    """A program run: synchronous; returns a completed RunHandle."""
    if keep_on_device or iospec.has_device_tensors(inputs):
        raise GpucError("keep_on_device / DeviceTensor inputs need a bundle that runs fully on the GPU; "
                        "this one has host (CPU) steps")
    arrays, _ = iospec.normalize(model.inputs, inputs)
    slot = model.slots.acquire()
    try:
        slot.write_inputs(arrays)
        model.program.run(slot)
        outs = slot.read_outputs()
    finally:
        slot.free()
    return RunHandle.completed(outs)
