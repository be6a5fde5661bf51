"""Bounded batch and the general run path (batched runs, device-tensor inputs and outputs).

A bundle compiled with `--max-batch N` is batch-native where the compiler could rewrite the graph
(compiler/passes/batching.py; options `batch_native`): one arena whose tensors hold the N items, and
each dispatch computes every item, so a run of b <= N items is the batch-1 dispatch count.  Otherwise
it is the batch-1 program plus `max_batch = N` in its options, and the runtime replicates it: N arenas
(weights shared), one descriptor set per dispatch per item,
and for a batch of b items a command buffer (cached per slot and b) that runs the b items'
dispatches layer by layer - one barrier per layer, the items of a layer independent.  Every I/O
tensor has batch dimension 1 per item; runs stack items along axis 0, so a run with inputs of shape
(b, ...) gives outputs of shape (b, ...), row i the batch-1 result for row i (exactly when replicated;
within float rounding when batch-native, whose GEMMs tile the items' rows together).  Variable
tensors (state) are per item.

Runs with DeviceTensor inputs or keep_on_device=True submit three command buffers at once: copies
in (host staging or device tensors -> arenas), the cached dispatches, copies out (arenas -> host
staging or new device tensors).
"""
from __future__ import annotations

import vulkan as vk

from gpuc.errors import BundleError, GpucError
from gpuc.runtime import commands, iospec, upload
from gpuc.runtime.device_tensor import DeviceTensor
from gpuc.runtime.slots import RunHandle

LIMIT = 4096


def arena_count(bundle) -> int:
    """Arenas a bundle needs: one per batch item when the batch-1 program is replicated, else one."""
    return 1 if iospec.batch_native(bundle) else max_batch(bundle)


def max_batch(bundle) -> int:
    """The bundle's max_batch (1 unless compiled with --max-batch), checked against its I/O."""
    n = bundle.options.get("max_batch", 1)
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= LIMIT:
        raise BundleError(f"corrupt bundle: max_batch {n!r} is not an integer in 1..{LIMIT}")
    problem = io_problem(bundle) if n > 1 else None
    if problem:
        raise BundleError(f"bundle has max_batch {n}, but {problem}")
    return n


def host_steps(bundle) -> int:
    """Program steps that are not plain GPU dispatch ranges (host CPU ops, control flow)."""
    return sum(1 for st in getattr(bundle, "steps", None) or () if getattr(st, "kind", 0) != 0)


def io_problem(bundle) -> str | None:
    """Why the bundle cannot be batched along axis 0, or None."""
    if host_steps(bundle):
        return (f"the program has {host_steps(bundle)} host (CPU) or control-flow step(s); batching "
                "needs a program that runs fully on the GPU")
    lead = bundle.options.get("max_batch", 1) if iospec.batch_native(bundle) else 1
    for kind, idx in (("input", bundle.inputs), ("output", bundle.outputs)):
        for i in idx:
            t = bundle.tensors[i]
            if not t.shape or t.shape[0] != lead:
                return (f"{kind} {t.name!r} has shape {list(t.shape)} (batching stacks items along axis 0 "
                        "and needs batch dimension 1 on every input and output)")
    return None


def batch_command(model, slot, b):
    """The cached command buffer of a whole b-item run through slot's staging (run_in_place)."""
    return _batch_cmd(model, slot, b)


def _batch_cmd(model, slot, b):
    """The cached host-I/O command buffer for b items."""
    if b == 1:
        return slot.cmd
    if b not in slot.cmds:
        slot.cmds[b] = model.recorder.record(slot, slot.pool, items=b, cmd_pool=slot.command_pool())
    return slot.cmds[b]


def _body(model, slot, b):
    """The cached dispatches-only command buffer for b items (timestamps around it)."""
    if b not in slot.bodies:
        cmd = model.recorder.begin(slot.command_pool())
        if slot.pool is not None:
            vk.vkCmdResetQueryPool(cmd, slot.pool, 0, 2)
            vk.vkCmdWriteTimestamp(cmd, vk.VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, slot.pool, 0)
        model.recorder.dispatches(cmd, b)
        if slot.pool is not None:
            vk.vkCmdWriteTimestamp(cmd, vk.VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, slot.pool, 1)
        vk.vkEndCommandBuffer(cmd)
        slot.bodies[b] = cmd
    return slot.bodies[b]


def _begin_again(cmd):
    vk.vkResetCommandBuffer(cmd, 0)
    vk.vkBeginCommandBuffer(cmd, vk.VkCommandBufferBeginInfo(flags=vk.VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT))


def _record_in(model, slot, vals, b):
    """slot.pre: host inputs from staging, device-tensor inputs device->device, into the b arenas."""
    rec, cmd = model.recorder, slot.pre
    _begin_again(cmd)
    commands.wait_all(cmd)          # also orders the producer's copies into a device tensor before ours
    rec.copy_in(cmd, slot.in_buf, b, [s for s, v in zip(model.inputs, vals) if not isinstance(v, DeviceTensor)])
    for s, v in zip(model.inputs, vals):
        if isinstance(v, DeviceTensor):
            for i in range(b):
                rec.copy_tensor(cmd, s.tensor, i, v.buffer, to_arena=True)
    commands.barrier(cmd, commands.T, commands.C, vk.VK_ACCESS_TRANSFER_WRITE_BIT, commands.RW)
    vk.vkEndCommandBuffer(cmd)
    return cmd


def _record_out(model, slot, b, outs):
    """slot.post: outputs into host staging, or (outs given) into those device tensors."""
    rec, cmd = model.recorder, slot.post
    _begin_again(cmd)
    commands.barrier(cmd, commands.C | commands.T, commands.T,
                     vk.VK_ACCESS_SHADER_WRITE_BIT | vk.VK_ACCESS_TRANSFER_WRITE_BIT, vk.VK_ACCESS_TRANSFER_READ_BIT)
    if outs is None:
        rec.copy_out(cmd, slot.out_buf, b)
    else:
        for s, dt in zip(model.outputs, outs):
            for i in range(b):
                rec.copy_tensor(cmd, s.tensor, i, dt.buffer, to_arena=False)
        rec.copy_out(cmd, slot.out_buf, b, first=len(model.outputs))    # the status words (runtime/status.py)
    commands.barrier(cmd, commands.T, commands.H | commands.T | commands.C, vk.VK_ACCESS_TRANSFER_WRITE_BIT,
                     vk.VK_ACCESS_HOST_READ_BIT | vk.VK_ACCESS_TRANSFER_READ_BIT | commands.RW)
    vk.vkEndCommandBuffer(cmd)
    return cmd


def run_async(model, inputs, keep_on_device=False, borrow=False):
    """LoadedModel.run_async for batched runs and runs with device tensors in or out.  borrow: the
    caller waits for the run before it returns (run()): large host inputs may be read in place."""
    slots = model.slots
    slots.check_open()
    if host_steps(model.bundle):
        raise GpucError("keep_on_device and device-tensor inputs are not supported yet for bundles with "
                        "host (CPU) or control-flow steps; pass host arrays")
    vals, b = iospec.normalize(model.inputs, inputs, model.max_batch, model.device)
    batched = model.max_batch > 1
    dts = [v for v in vals if isinstance(v, DeviceTensor)]
    spans = model.imports.spans(vals) if borrow and not (dts or keep_on_device) else None
    slot = slots.acquire()
    used, outs = [], None
    try:
        for dt in dts:
            dt.use()
            used.append(dt)
        ranges = None if spans or dts or keep_on_device or not batched else upload.chunks(model, slot, b)
        if spans:                       # read from the caller's memory (runtime/host_import.py)
            upload.submit_imported(model, slot, vals, spans, b if batched else 1)
        elif ranges:                    # host-memory staging: chunk copies overlap (runtime/upload.py)
            upload.submit(model, slot, vals, b, ranges)
        elif dts or keep_on_device:
            slot.write_inputs([None if isinstance(v, DeviceTensor) else v for v in vals], b if batched else None)
            slot.command_pool()
            if keep_on_device:
                outs = [DeviceTensor(model.device, s.name, iospec.item_shape(s, b, batched), s.dtype)
                        for s in model.outputs]
                for dt in outs:         # in use until this run completes (close() waits for it)
                    dt.use()
                    used.append(dt)
            slots.submit(slot, [_record_in(model, slot, vals, b), _body(model, slot, b), _record_out(model, slot, b, outs)])
        else:
            slot.write_inputs(vals, b if batched else None)
            slots.submit(slot, [_batch_cmd(model, slot, b)])
    except BaseException:
        for dt in used:
            dt.release(None)
        for dt in outs or []:
            dt.close()
        slot.free()
        if spans:
            model.imports.release(spans)
        raise
    state = {"ok": False}

    def collect():
        state["ok"] = True
        if outs is not None:
            return outs
        return [slot.copier.copy_out(r[:b] if batched else r) for r in slot.out_rows]

    def cleanup():
        if spans:
            model.imports.release(spans, slot.late)
        for dt in used:
            dt.release(h)
        if not state["ok"]:
            for dt in outs or []:
                dt.close()
    h = RunHandle(slots, slot, collect, cleanup)
    h.device_outputs = outs     # usable at once: later submissions on this device are ordered after it
    for dt in used:
        dt.register(h)
    slot.handle = h
    return h
