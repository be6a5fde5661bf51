"""Pipelined input upload of a batched run() through host-memory staging: the GPU's copy of one chunk
of items overlaps the host's copy of the next.

Input staging in host memory (GPUC_UPLOAD_MEMORY=cached or uncached, or a device without a large
BAR) costs a run two copies in turn: the host's into staging, then the GPU's across the bus into the
arena (32 float32 images of 224 x 224 x 3: 19 MB, ~0.4 ms at PCIe speed).  Here the host writes the items in
chunks of about `upload_chunk_bytes` (GPUC_UPLOAD_CHUNK_BYTES, read at load; 0: off) and submits the
GPU copy of each chunk as soon as it is written, so the bus copy of chunk k runs while the host
writes chunk k + 1 and only the last chunk's is left when the run's own command buffer starts.

The chunks land in a device-local buffer of the slot's own (the staging's layout), not in the arena:
the slots of a model share its arena, and another thread's run may be submitted between two chunks.
The run's command buffer (recorded once per slot and batch) then copies that buffer into the arena
inside the run, as it copies staging in the plain path -- a copy within device memory (~20 us for
19 MB on the H100).  Staging in device-local memory (a BAR, the default where the device has one) is
written by the host directly: nothing is left to overlap, and by default (GPUC_UPLOAD_PIPELINE=auto)
this path is not taken.  GPUC_UPLOAD_PIPELINE=on takes it there too, through a host-memory buffer of
its own (input_view and run_in_place keep the device-local staging): host-memory copies plus the
overlapped bus copy against the host's writes across the bus into the BAR -- which is faster depends on
the host (benchmarks/run_overhead.py measures both).  off: never.

submit_imported: a run whose large inputs the GPU reads from the caller's memory (runtime/host_import.py)
lands them the same way -- one command buffer copies each input from its span (or, for the others,
from staging) into the landing buffer, and the same recorded run copies that into the arena.
"""
from __future__ import annotations

import vulkan as vk

from gpuc.runtime import commands, hostcopy, iospec
from gpuc.runtime.device import MemoryKind

_USAGE = vk.VK_BUFFER_USAGE_TRANSFER_SRC_BIT | vk.VK_BUFFER_USAGE_TRANSFER_DST_BIT


class _Target:
    """What Recorder.record reads of a slot: the buffer the inputs come from and the output staging."""

    def __init__(self, in_buf, out_buf):
        self.in_buf, self.out_buf = in_buf, out_buf


def _staging_in_device_memory(device, size: int) -> bool:
    """Whether input staging of `size` bytes went to device-local memory (Device._memory_flags' choice)."""
    return device.settings.upload_memory == "device" and device.bar_fits(size)


def _item_bytes(model, spec) -> int:
    return iospec.item_bytes(model.bundle, model.bundle.tensors[spec.tensor])


def chunks(model, slot, b: int) -> list | None:
    """The item ranges [(i0, i1)] a b-item run's inputs upload in, or None where the run takes the
    plain path (one item, fewer than two chunks' worth, the setting off, or staging in device
    memory while upload_pipeline is auto)."""
    chunk, mode = slot.copier.upload_chunk, slot.copier.upload_pipeline
    if chunk <= 0 or mode == "off" or b < 2 or model.max_batch < 2:
        return None
    per_item = sum(_item_bytes(model, s) for s in model.inputs)
    if per_item * b < 2 * chunk:
        return None
    if _state(model, slot)["in_vram"] and mode != "on":
        return None
    step = max(1, -(-chunk // max(per_item, 1)))
    return [(i, min(i + step, b)) for i in range(0, b, step)]


def _state(model, slot) -> dict:
    """The slot's upload state, made on first use."""
    if slot.upload is None:
        slot.upload = {"in_vram": _staging_in_device_memory(model.device, slot.in_bytes), "landing": None,
                       "src": None, "cmds": {}, "runs": {}, "import": {}}
    return slot.upload


def _source(model, slot):
    """(buffer, rows) the host writes a pipelined upload into: the slot's input staging where it is
    host memory, else (staging in device memory, upload_pipeline on) a host buffer of the upload's
    own, so input_view and run_in_place keep the device-local staging."""
    st = slot.upload
    if st["src"] is None:
        if st["in_vram"]:
            buf, root = model.resources.mapped(slot.in_bytes, _USAGE, MemoryKind.HOST)
            st["src"] = (buf, iospec.views(root, model.inputs, model.max_batch))
        else:
            st["src"] = (slot.in_buf, slot.in_rows)
    return st["src"]


def _landing(model, slot):
    st = slot.upload
    if st["landing"] is None:
        st["landing"] = model.resources.buffer(slot.in_bytes, _USAGE, MemoryKind.DEVICE)[0]
    return st["landing"]


def _chunk_cmd(model, slot, src, landing, i0: int, i1: int):
    """Copy items [i0, i1) of every input from `src` (staging's layout) into the landing buffer."""
    cmd = model.recorder.begin(slot.command_pool())
    # after the landing buffer's earlier reads (this slot's previous run copying it into the arena)
    commands.barrier(cmd, commands.T, commands.T, vk.VK_ACCESS_TRANSFER_READ_BIT | vk.VK_ACCESS_TRANSFER_WRITE_BIT,
                     vk.VK_ACCESS_TRANSFER_WRITE_BIT)
    regions = []
    for s in model.inputs:
        n = _item_bytes(model, s)
        if n:
            at = s.staging + i0 * n
            regions.append(vk.VkBufferCopy(srcOffset=at, dstOffset=at, size=(i1 - i0) * n))
    if regions:
        vk.vkCmdCopyBuffer(cmd, src, landing, len(regions), regions)
    vk.vkEndCommandBuffer(cmd)
    return cmd


def _landing_run(model, slot, b: int):
    """The whole run of b items as the plain path records it, its inputs read from the landing buffer;
    its first barrier waits for every earlier command on the queue (the copies into the landing)."""
    st = _state(model, slot)
    if b not in st["runs"]:
        st["runs"][b] = model.recorder.record(_Target(_landing(model, slot), slot.out_buf), slot.pool, items=b,
                                              cmd_pool=slot.command_pool())
    return st["runs"][b]


def _commands(model, slot, b: int, ranges: list):
    """(chunk copy command buffers, the run's command buffer) for a b-item run, recorded once per slot."""
    st = slot.upload
    key = (b, tuple(ranges))
    if key not in st["cmds"]:
        landing = _landing(model, slot)
        pre = [_chunk_cmd(model, slot, _source(model, slot)[0], landing, i0, i1) for i0, i1 in ranges]
        st["cmds"][key] = (pre, _landing_run(model, slot, b))
    return st["cmds"][key]


IMPORT_CMDS = 4        # recorded import copies a slot keeps (runtime/host_import.py LIMIT spans a model keeps)


def _import_cmd(model, slot, spans: list, b: int):
    """The command buffer copying a run's b items of every input into the landing buffer: from its
    span, or from staging.  Kept per slot by (b, the spans): a key holds its Span objects, so one
    freed since (another object) never matches, and the oldest entry's buffer is recorded again."""
    cmds, key = _state(model, slot)["import"], (b,) + tuple(spans)
    if key in cmds:
        cmds[key] = cmds.pop(key)               # most recent last
        return cmds[key]
    if len(cmds) >= IMPORT_CMDS:
        cmd = cmds.pop(next(iter(cmds)))
        vk.vkResetCommandBuffer(cmd, 0)
    else:
        cmd = model.resources.command_buffer(slot.command_pool())
    landing = _landing(model, slot)
    vk.vkBeginCommandBuffer(cmd, vk.VkCommandBufferBeginInfo())
    # after the landing buffer's earlier reads (this slot's previous run copying it into the arena)
    commands.barrier(cmd, commands.T, commands.T, vk.VK_ACCESS_TRANSFER_READ_BIT | vk.VK_ACCESS_TRANSFER_WRITE_BIT,
                     vk.VK_ACCESS_TRANSFER_WRITE_BIT)
    staged = []
    for s, sp in zip(model.inputs, spans):
        n = b * _item_bytes(model, s)
        if n and sp is not None:
            vk.vkCmdCopyBuffer(cmd, sp.buf, landing, 1, [vk.VkBufferCopy(srcOffset=sp.offset, dstOffset=s.staging,
                                                                          size=n)])
        elif n:
            staged.append(vk.VkBufferCopy(srcOffset=s.staging, dstOffset=s.staging, size=n))
    if staged:
        vk.vkCmdCopyBuffer(cmd, slot.in_buf, landing, len(staged), staged)
    vk.vkEndCommandBuffer(cmd)
    cmds[key] = cmd
    return cmd


def submit_imported(model, slot, arrays: list, spans: list, b: int) -> None:
    """A run whose inputs with a span (runtime/host_import.py) the GPU copies from the caller's memory:
    the others are written into staging as usual; one command buffer copies each input's b items into
    the landing buffer, then the run itself follows (slots.submit: the slot's fence).  b: items (1 for
    a bundle without --max-batch)."""
    slot.write_inputs([None if sp is not None else a for a, sp in zip(arrays, spans)], b)
    model.slots.submit(slot, [_import_cmd(model, slot, spans, b), _landing_run(model, slot, b)])


def submit(model, slot, arrays: list, b: int, ranges: list) -> None:
    """Write the first b items of every input into staging chunk by chunk, each chunk's GPU copy
    submitted once it is written; then submit the run itself (slots.submit: the slot's fence).  The
    copy threads take every chunk's parts at once, in chunk order; this thread submits each chunk's
    copy as its parts finish (one hand-off to the threads per run, not per chunk)."""
    pre, run = _commands(model, slot, b, ranges)
    rows = [r[:b] for r in _source(model, slot)[1]]
    if slot.copier.threads == 1:            # this thread copies each chunk, then submits its copy
        for (i0, i1), cmd in zip(ranges, pre):
            for view, a in zip(rows, arrays):
                view[i0:i1] = a[i0:i1]
            model.device.submit(cmd, vk.ffi.NULL)
        model.slots.submit(slot, [run])
        return
    started = []
    try:
        for i0, i1 in ranges:
            started.append([f for view, a in zip(rows, arrays) for f in slot.copier.start(view[i0:i1], a[i0:i1])])
    except BaseException as e:
        hostcopy.finish([f for fs in started for f in fs], e)
        raise
    for k, cmd in enumerate(pre):
        try:
            hostcopy.finish(started[k])
        except BaseException as e:          # the later chunks' parts are over before staging is let go
            hostcopy.finish([f for fs in started[k + 1:] for f in fs], e)
            raise
        model.device.submit(cmd, vk.ffi.NULL)
    model.slots.submit(slot, [run])
