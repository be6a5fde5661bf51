"""Command-buffer recording for a LoadedModel (Recorder): input copies, dispatches with barriers,
output copies; optional timestamp queries (around the whole run, or after every dispatch for
profiling).  The barrier and timestamp helpers are runtime/commands.py's.

Only the barriers that matter (runtime/hazards.py): a dispatch waits for the ones before it (a
compute-to-compute barrier) only on a read-after-write, write-after-write or write-after-read of arena
bytes, so independent neighbours (the branches of a block) run together.
GPUC_ALL_BARRIERS=1 puts a barrier between every two dispatches (A/B timing, debugging).
"""
from __future__ import annotations

import vulkan as vk

from gpuc.runtime import dynamic, hazards, iospec, settings
from gpuc.runtime.commands import C, H, RW, T, barrier, wait_all


def item_groups(groups: tuple, inner: int, b: int, n: int) -> tuple:
    """The grid of a batch-native dispatch run for b of its n items: with an item-major grid in units of
    `inner` workgroups (Dispatch.item_inner > 0), the first ceil(b * G / (n * inner)) * inner of its G
    workgroups (flat index x + y * gx, as the shaders compute it); else the whole grid."""
    if not inner or b >= n:
        return tuple(groups)
    total = int(groups[0]) * int(groups[1]) * int(groups[2])
    g = min(total, -(-b * total // (n * inner)) * inner)
    gx = min(g, int(groups[0]))
    return gx, -(-g // gx), 1


class Recorder:
    """Records a model's command buffers (freed with the model): copies between staging and the
    arenas, and the dispatches with their barriers."""

    def __init__(self, res, bundle, arenas, pipelines, descriptors, inputs, outputs):
        self.res, self.bundle, self.arenas = res, bundle, arenas
        self.pipelines, self.descriptors = pipelines, descriptors
        self.inputs, self.outputs = inputs, outputs
        self.pool = res.command_pool()      # the model's own: models sharing a Device never share a pool
        self.access = hazards.arena_access(bundle)
        self.native = iospec.batch_native(bundle)      # one arena; each dispatch covers every item
        self.max_items = bundle.options.get("max_batch", 1)
        self.all_barriers = settings.current().all_barriers
        self.dims = dynamic.Dims.of(bundle)          # --dynamic off the batch axis: sizes per run (or None)

    def barriers_before(self, first: int, last: int) -> list[bool]:
        """For dispatches [first, last): whether each waits for the ones before it (the first: no)."""
        return hazards.plan(self.access[first:last], self.all_barriers)

    def alloc(self, cmd_pool=None):
        """A primary command buffer from `cmd_pool` (default: the model's pool)."""
        return self.res.command_buffer(cmd_pool or self.pool)

    def begin(self, cmd_pool=None, reuse=None):
        """alloc() (or `reuse`, a command buffer of a pool made to reset them, reset), begun for recording."""
        if reuse is not None:
            vk.vkResetCommandBuffer(reuse, 0)
        cmd = self.alloc(cmd_pool) if reuse is None else reuse
        vk.vkBeginCommandBuffer(cmd, vk.VkCommandBufferBeginInfo())
        return cmd

    def item_regions(self, specs, items, to_arena: bool, sizes=None):
        """{arena: [VkBufferCopy]} between staging (items stacked along axis 0) and the arenas: item i's
        own arena, or (batch-native) the first `items` items of each tensor in the one arena; with
        dynamic dims, each tensor's bytes at the run's `sizes`."""
        b, out = self.bundle, {}
        if self.dims is not None:
            sizes = sizes or self.dims.maxes
            regs = []
            for s in specs:
                t = b.tensors[s.tensor]
                n = self.dims.nbytes(b, s.tensor, sizes)
                if n:
                    regs.append(vk.VkBufferCopy(srcOffset=s.staging if to_arena else t.offset,
                                                dstOffset=t.offset if to_arena else s.staging, size=n))
            return {0: regs} if regs else {}
        if self.native:
            regs = []
            for s in specs:
                t = b.tensors[s.tensor]
                n = iospec.item_bytes(b, t) * items
                if n:
                    regs.append(vk.VkBufferCopy(srcOffset=s.staging if to_arena else t.offset,
                                                dstOffset=t.offset if to_arena else s.staging, size=n))
            return {0: regs} if regs else {}
        for i in range(items):
            regs = []
            for s in specs:
                n = b.tensors[s.tensor].nbytes
                if n:
                    st, ar = s.staging + i * n, b.tensors[s.tensor].offset
                    regs.append(vk.VkBufferCopy(srcOffset=st if to_arena else ar, dstOffset=ar if to_arena else st,
                                                size=n))
            if regs:
                out[i] = regs
        return out

    def copy_in(self, cmd, staging, items=1, specs=None, sizes=None) -> None:
        """Copy the inputs (`specs`: default all) of `items` batch items from staging into the arenas."""
        for i, regions in self.item_regions(self.inputs if specs is None else specs, items, True, sizes).items():
            vk.vkCmdCopyBuffer(cmd, staging, self.arenas.arena(i), len(regions), regions)

    def copy_out(self, cmd, staging, items=1, sizes=None, first=0, at=0) -> None:
        """Copy the outputs (from spec `first` on: e.g. only the status words past the model's outputs)
        of `items` batch items from the arenas into staging (`at` bytes past their staging offsets)."""
        for i, regions in self.item_regions(self.outputs[first:], items, False, sizes).items():
            if at:
                regions = [vk.VkBufferCopy(srcOffset=g.srcOffset, dstOffset=g.dstOffset + at, size=g.size)
                           for g in regions]
            vk.vkCmdCopyBuffer(cmd, self.arenas.arena(i), staging, len(regions), regions)

    def copy_tensor(self, cmd, tensor: int, item: int, buffer, to_arena: bool) -> None:
        """Copy one I/O tensor of batch item `item` between its arena and item i of `buffer` (a
        device tensor holding the items packed)."""
        t = self.bundle.tensors[tensor]
        n = iospec.item_bytes(self.bundle, t)
        if n:
            at = t.offset + (item * n if self.native else 0)
            regions = [vk.VkBufferCopy(srcOffset=item * n if to_arena else at,
                                       dstOffset=at if to_arena else item * n, size=n)]
            arena = self.arenas.arena(0 if self.native else item)
            src, dst = (buffer, arena) if to_arena else (arena, buffer)
            vk.vkCmdCopyBuffer(cmd, src, dst, 1, regions)

    def dispatches(self, cmd, items=1, pool=None, first=0, count=None, sizes=None) -> None:
        """Every dispatch (or those in [first, first + count): a program's GPU step) for `items` batch
        items, layer by layer (a barrier before a layer that depends on the ones since the last barrier;
        the items of a layer are independent).  pool: a timestamp after each layer (query i + 1)."""
        b, pipes, sets = self.bundle, self.pipelines, self.descriptors
        last = len(b.dispatches) if count is None else first + count
        need = self.barriers_before(first, last)
        for i, disp in enumerate(b.dispatches[first:last], first):
            if need[i - first]:
                barrier(cmd, C, C, vk.VK_ACCESS_SHADER_WRITE_BIT, RW)
            if self.dims is not None:       # the run's sizes as push constants, its grid from them
                sizes = sizes or self.dims.maxes
                pipes.bind(cmd, disp.shader, self.dims.push(sizes) if disp.push_constants else b"")
                pipes.bind_set(cmd, disp.shader, sets.set(0, i))
                vk.lib.vkCmdDispatch(cmd, *self.dims.groups(i, sizes))
            elif self.native:                 # one dispatch computes the items (a prefix of its grid for b < N)
                pipes.bind(cmd, disp.shader, disp.push_constants)
                pipes.bind_set(cmd, disp.shader, sets.set(0, i))
                vk.lib.vkCmdDispatch(cmd, *item_groups(disp.groups, disp.item_inner, items, self.max_items))
            else:
                pipes.bind(cmd, disp.shader, disp.push_constants)
                for item in range(items):
                    pipes.bind_set(cmd, disp.shader, sets.set(item, i))
                    vk.lib.vkCmdDispatch(cmd, *disp.groups)
            if pool is not None:
                vk.vkCmdWriteTimestamp(cmd, vk.VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, pool, i + 1)

    def record(self, slot, pool=None, every_dispatch=False, items=1, cmd_pool=None, sizes=None, reuse=None):
        """Record a whole run of `items` batch items (1 <= items <= max_batch) through slot's staging.
        pool: 2 timestamps (start, end), or with every_dispatch 1 + len(dispatches) (start, then after
        each dispatch)."""
        b = self.bundle
        cmd = self.begin(cmd_pool, reuse)
        n_stamps = (1 + len(b.dispatches)) if every_dispatch else 2
        if pool is not None:
            vk.vkCmdResetQueryPool(cmd, pool, 0, n_stamps)
        wait_all(cmd)
        self.copy_in(cmd, slot.in_buf, items, sizes=sizes)
        barrier(cmd, T, C, vk.VK_ACCESS_TRANSFER_WRITE_BIT, RW)
        if pool is not None:
            vk.vkCmdWriteTimestamp(cmd, vk.VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, pool, 0)
        self.dispatches(cmd, items, pool if every_dispatch else None, sizes=sizes)
        if pool is not None and not every_dispatch:
            vk.vkCmdWriteTimestamp(cmd, vk.VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, pool, 1)
        barrier(cmd, C | T, T, vk.VK_ACCESS_SHADER_WRITE_BIT | vk.VK_ACCESS_TRANSFER_WRITE_BIT,
                vk.VK_ACCESS_TRANSFER_READ_BIT)
        self.copy_out(cmd, slot.out_buf, items, sizes=sizes)
        barrier(cmd, T, H, vk.VK_ACCESS_TRANSFER_WRITE_BIT, vk.VK_ACCESS_HOST_READ_BIT)
        vk.vkEndCommandBuffer(cmd)
        return cmd

    def record_repeated(self, k: int, staging, stride: int, pool=None, cmd_pool=None, reuse=None):
        """Record k whole runs of a model without inputs back to back (runtime/repeat.py): run r's
        dispatches, then its outputs (and status words) copied into `staging` at r * stride; between
        two runs one barrier, so run r + 1 reads the state run r wrote and rewrites its outputs only
        after their copy.  pool: 2 timestamps around the k runs."""
        cmd = self.begin(cmd_pool, reuse)
        if pool is not None:
            vk.vkCmdResetQueryPool(cmd, pool, 0, 2)
        wait_all(cmd)
        if pool is not None:
            vk.vkCmdWriteTimestamp(cmd, vk.VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, pool, 0)
        for r in range(k):
            if r:
                barrier(cmd, C | T, C, vk.VK_ACCESS_SHADER_WRITE_BIT, RW)
            self.dispatches(cmd)
            barrier(cmd, C, T, vk.VK_ACCESS_SHADER_WRITE_BIT, vk.VK_ACCESS_TRANSFER_READ_BIT)
            self.copy_out(cmd, staging, at=r * stride)
        if pool is not None:
            vk.vkCmdWriteTimestamp(cmd, vk.VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, pool, 1)
        barrier(cmd, T, H, vk.VK_ACCESS_TRANSFER_WRITE_BIT, vk.VK_ACCESS_HOST_READ_BIT)
        vk.vkEndCommandBuffer(cmd)
        return cmd
