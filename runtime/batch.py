"""Bounded batch and the general run path (batched runs, device-tensor inputs and outputs).

A bundle compiled with `--max-batch N` is the batch-1 program plus `max_batch = N` in its options.
The runtime replicates it: N arenas (weights shared), one descriptor set per dispatch per item,
and for a batch of b items a command buffer (cached per slot and b) that runs the b items'
dispatches layer by layer - one barrier per layer, the items of a layer independent.  Every I/O
tensor of such a bundle has batch dimension 1; runs stack items along axis 0, so a run with inputs
of shape (b, ...) gives outputs of shape (b, ...), row i exactly the batch-1 result for row i.
Variable tensors (state) are per item.

Runs with DeviceTensor inputs or keep_on_device=True submit three command buffers at once: copies
in (host staging or device tensors -> arenas), the cached dispatches, copies out (arenas -> host
staging or new device tensors).
"""
from __future__ import annotations

import numpy as np
import vulkan as vk

from gpuc.errors import BundleError, GpucError
from gpuc.runtime import commands
from gpuc.runtime.device_tensor import DeviceTensor

LIMIT = 4096


def is_device_tensor(x) -> bool:
    return isinstance(x, DeviceTensor)


def has_device_tensors(inputs) -> bool:
    if isinstance(inputs, dict):
        inputs = inputs.values()
    elif not isinstance(inputs, (list, tuple)):
        inputs = [inputs]
    return any(isinstance(x, DeviceTensor) for x in inputs)


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
    for kind, idx in (("input", bundle.inputs), ("output", bundle.outputs)):
        for i in idx:
            t = bundle.tensors[i]
            if not t.shape or t.shape[0] != 1:
                return (f"{kind} {t.name!r} has shape {list(t.shape)} (batching stacks items along axis 0 "
                        "and needs batch dimension 1 on every input and output)")
    return None


def row_views(mapped, specs, items):
    """Views of the staging memory holding all `items` items of each tensor, stacked on axis 0."""
    if items == 1:
        return [np.frombuffer(mapped, s.dtype, int(np.prod(s.shape, dtype=np.int64)), s.staging).reshape(s.shape)
                for s in specs]
    return [np.frombuffer(mapped, s.dtype, items * int(np.prod(s.shape, dtype=np.int64)), s.staging)
            .reshape((items,) + s.shape[1:]) for s in specs]


def item_shape(spec, b, batched):
    return (b,) + spec.shape[1:] if batched else spec.shape


def normalize(model, inputs):
    """(values in model order: arrays cast to the input dtype or DeviceTensors, batch size b)."""
    specs, n = model._in_specs, model.max_batch
    vals = model._ordered(inputs)
    shapes = [tuple(v.shape) if isinstance(v, DeviceTensor) else np.shape(v) for v in vals]
    b = None
    if n > 1:
        for s, shape in zip(specs, shapes):
            if len(shape) == len(s.shape) and shape[1:] == s.shape[1:]:
                if not 1 <= shape[0] <= n:
                    raise GpucError(f"input {s.name!r}: batch {shape[0]} is outside 1..{n} "
                                    f"(the bundle was compiled with --max-batch {n})")
                if b is not None and shape[0] != b:
                    raise GpucError(f"inputs disagree on the batch size ({b} and {shape[0]} at {s.name!r})")
                b = shape[0]
    b = b or 1
    out = []
    for s, v, shape in zip(specs, vals, shapes):
        want = item_shape(s, b, n > 1)
        if shape != want:
            more = f" (batch 1..{n} along axis 0)" if n > 1 else ""
            raise GpucError(f"input {s.name!r}: expected shape {list(want)}{more}, got {list(shape)}")
        if isinstance(v, DeviceTensor):
            v._check_usable(model.device, s)
        else:
            v = np.asarray(v)
            if v.dtype != s.dtype:
                if not np.can_cast(v.dtype, s.dtype, casting="same_kind"):
                    raise GpucError(f"input {s.name!r}: expected dtype {s.dtype}, got {v.dtype}")
                v = v.astype(s.dtype)
        out.append(v)
    return out, b


def _slot_pool(model, slot):
    """Each slot records its own command buffers (a command pool is externally synchronised, and a
    slot is used by one run at a time)."""
    if getattr(slot, "cmd_pool", None) is None:
        info = vk.VkCommandPoolCreateInfo(queueFamilyIndex=model.device.family,
                                          flags=vk.VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT)
        slot.cmd_pool = model._keep(vk.vkDestroyCommandPool, vk.vkCreateCommandPool(model.dev, info, None))
        slot.pre, slot.post = commands.alloc(model, slot.cmd_pool), commands.alloc(model, slot.cmd_pool)
        slot.bodies = {}
    return slot.cmd_pool


def _batch_cmd(model, slot, b):
    """The cached host-I/O command buffer for b items."""
    if b == 1:
        return slot.cmd
    if b not in slot.cmds:
        _slot_pool(model, slot)
        slot.cmds[b] = commands.record(model, slot, slot.pool, items=b, cmd_pool=slot.cmd_pool)
    return slot.cmds[b]


def _body(model, slot, b):
    """The cached dispatches-only command buffer for b items (timestamps around it)."""
    if b not in slot.bodies:
        cmd = commands.begin(model, slot.cmd_pool)
        if slot.pool is not None:
            vk.vkCmdResetQueryPool(cmd, slot.pool, 0, 2)
            vk.vkCmdWriteTimestamp(cmd, vk.VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, slot.pool, 0)
        commands.dispatches(cmd, model, b)
        if slot.pool is not None:
            vk.vkCmdWriteTimestamp(cmd, vk.VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, slot.pool, 1)
        vk.vkEndCommandBuffer(cmd)
        slot.bodies[b] = cmd
    return slot.bodies[b]


def _record_in(model, slot, vals, b):
    """slot.pre: host inputs from staging, device-tensor inputs device->device, into the b arenas."""
    tb, cmd = model.bundle, slot.pre
    vk.vkResetCommandBuffer(cmd, 0)
    vk.vkBeginCommandBuffer(cmd, vk.VkCommandBufferBeginInfo(flags=vk.VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT))
    commands.wait_all(cmd)          # also orders the producer's copies into a device tensor before ours
    host = [s for s, v in zip(model._in_specs, vals) if not isinstance(v, DeviceTensor)]
    for i, regions in commands.item_regions(model, host, b, True).items():
        vk.vkCmdCopyBuffer(cmd, slot.in_buf, model._arenas[i], len(regions), regions)
    for s, v in zip(model._in_specs, vals):
        n = tb.tensors[s.tensor].nbytes
        if isinstance(v, DeviceTensor) and n:
            for i in range(b):
                regions = [vk.VkBufferCopy(srcOffset=i * n, dstOffset=tb.tensors[s.tensor].offset, size=n)]
                vk.vkCmdCopyBuffer(cmd, v.buffer, model._arenas[i], 1, regions)
    commands.barrier(cmd, commands.T, commands.C, vk.VK_ACCESS_TRANSFER_WRITE_BIT, commands.RW)
    vk.vkEndCommandBuffer(cmd)
    return cmd


def _record_out(model, slot, b, outs):
    """slot.post: outputs into host staging, or (outs given) into those device tensors."""
    tb, cmd = model.bundle, slot.post
    vk.vkResetCommandBuffer(cmd, 0)
    vk.vkBeginCommandBuffer(cmd, vk.VkCommandBufferBeginInfo(flags=vk.VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT))
    commands.barrier(cmd, commands.C | commands.T, commands.T,
                     vk.VK_ACCESS_SHADER_WRITE_BIT | vk.VK_ACCESS_TRANSFER_WRITE_BIT, vk.VK_ACCESS_TRANSFER_READ_BIT)
    if outs is None:
        for i, regions in commands.item_regions(model, model._out_specs, b, False).items():
            vk.vkCmdCopyBuffer(cmd, model._arenas[i], slot.out_buf, len(regions), regions)
    else:
        for s, dt in zip(model._out_specs, outs):
            n = tb.tensors[s.tensor].nbytes
            for i in range(b if n else 0):
                regions = [vk.VkBufferCopy(srcOffset=tb.tensors[s.tensor].offset, dstOffset=i * n, size=n)]
                vk.vkCmdCopyBuffer(cmd, model._arenas[i], dt.buffer, 1, regions)
    commands.barrier(cmd, commands.T, commands.H | commands.T | commands.C, vk.VK_ACCESS_TRANSFER_WRITE_BIT,
                     vk.VK_ACCESS_HOST_READ_BIT | vk.VK_ACCESS_TRANSFER_READ_BIT | commands.RW)
    vk.vkEndCommandBuffer(cmd)
    return cmd


def run_async(model, inputs, keep_on_device=False):
    """LoadedModel.run_async for batched runs and runs with device tensors in or out."""
    from gpuc.runtime.executor import RunHandle
    model._check_open()
    if host_steps(model.bundle):
        raise GpucError("keep_on_device and device-tensor inputs are not supported yet for bundles with "
                        "host (CPU) or control-flow steps; pass host arrays")
    vals, b = normalize(model, inputs)
    batched = model.max_batch > 1
    dts = [v for v in vals if isinstance(v, DeviceTensor)]
    slot = model._acquire()
    used, outs = [], None
    try:
        for dt in dts:
            dt._use()
            used.append(dt)
        rows = slot.in_rows
        for r, v in zip(rows, vals):
            if not isinstance(v, DeviceTensor):
                if batched:
                    r[:b] = v
                else:
                    r[...] = v
        if dts or keep_on_device:
            _slot_pool(model, slot)
            if keep_on_device:
                outs = [DeviceTensor(model.device, s.name, item_shape(s, b, batched), s.dtype)
                        for s in model._out_specs]
                for dt in outs:         # in use until this run completes (close() waits for it)
                    dt._use()
                    used.append(dt)
            cmds = [_record_in(model, slot, vals, b), _body(model, slot, b), _record_out(model, slot, b, outs)]
        else:
            cmds = [_batch_cmd(model, slot, b)]
        model._submit(slot, cmds)
    except BaseException:
        for dt in used:
            dt._done(None)
        for dt in outs or []:
            dt.close()
        slot.busy = False
        slot.handle_done.set()
        raise
    h = RunHandle(model, slot)
    h.device_outputs = outs     # usable at once: later submissions on this device are ordered after it
    for dt in used:
        dt._register(h)
    state = {"ok": False}

    def collect():
        state["ok"] = True
        if outs is not None:
            return outs
        return [r[:b].copy() if batched else r.copy() for r in slot.out_rows]

    def cleanup():
        for dt in used:
            dt._done(h)
        if not state["ok"]:
            for dt in outs or []:
                dt.close()
    h._collect, h._cleanup = collect, cleanup
    slot.handle = h
    return h
