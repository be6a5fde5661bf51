"""Arenas: a model's device memory -- one arena per batch item (every intermediate and I/O tensor)
and the weights, uploaded once; variable tensors (state) get their initial values in every arena."""
from __future__ import annotations

import numpy as np
import vulkan as vk

from gpuc.runtime import commands, settings
from gpuc.runtime.device import MemoryKind

_STORAGE = vk.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT
_SRC, _DST = vk.VK_BUFFER_USAGE_TRANSFER_SRC_BIT, vk.VK_BUFFER_USAGE_TRANSFER_DST_BIT


UPLOAD_CHUNK = 256 << 20     # the weights' staging buffer (upload_weights)


class Arenas:
    def __init__(self, res, bundle, items: int = 1):
        self.device, self.bundle = res.device, bundle
        self._arenas = [res.buffer(bundle.arena_bytes, _STORAGE | _SRC | _DST)[0] for _ in range(items)]
        # weights in host-mapped device-local (BAR) memory: only with GPUC_WEIGHTS_IN_BAR=1 -- it saves a
        # staging copy at load, but on the H100 kernels read such weights up to 4x slower (a small int8 CNN:
        # 1.2 vs 0.3 ms of GPU time), so by default they go through a staging buffer (upload_weights)
        self.weights_direct = (settings.current().weights_in_bar
                               and self.device.bar_fits(bundle.weights.nbytes))
        self.weights, self._weights_mem, _ = res.buffer(bundle.weights.nbytes, _STORAGE | _SRC | _DST,
                                                        MemoryKind.BAR if self.weights_direct else MemoryKind.DEVICE)

    @property
    def items(self) -> int:
        return len(self._arenas)

    def arena(self, item: int = 0):
        """The arena buffer of batch item `item`."""
        return self._arenas[item]

    def upload(self) -> None:
        """The weights, then the variable tensors' initial values (runs beside pipeline creation)."""
        self.upload_weights()
        self.init_state()

    def upload_weights(self) -> None:
        dev, n = self.device.device, int(self.bundle.weights.nbytes)
        if n == 0:
            return
        if self.weights_direct:          # host-coherent: visible to every later submit
            m = vk.vkMapMemory(dev, self._weights_mem, 0, n, 0)
            np.frombuffer(m, np.uint8, n)[:] = self.bundle.weights
            vk.vkUnmapMemory(dev, self._weights_mem)
            return
        # through one staging buffer of at most UPLOAD_CHUNK bytes, a piece at a time: a model's weights
        # (from a memory-mapped bundle, up to many GB) are never staged whole in host memory
        chunk = min(n, UPLOAD_CHUNK)
        sbuf, smem, ssize = self.device.buffer(chunk, _SRC, MemoryKind.HOST)
        try:
            m = vk.vkMapMemory(dev, smem, 0, ssize, 0)
            staging = np.frombuffer(m, np.uint8, chunk)
            for at in range(0, n, chunk):
                k = min(chunk, n - at)
                staging[:k] = self.bundle.weights[at:at + k]
                regions = [vk.VkBufferCopy(srcOffset=0, dstOffset=at, size=k)]
                self.device.one_shot(lambda cmd: vk.vkCmdCopyBuffer(cmd, sbuf, self.weights, 1, regions))
            vk.vkUnmapMemory(dev, smem)
        finally:
            vk.vkDestroyBuffer(dev, sbuf, None)
            vk.vkFreeMemory(dev, smem, None)

    def init_state(self) -> None:
        """Copy every variable tensor's initial value (weights) into its bytes in every arena."""
        b = self.bundle
        regions = [vk.VkBufferCopy(srcOffset=b.tensors[src].offset, dstOffset=b.tensors[dst].offset,
                                   size=b.tensors[dst].nbytes) for dst, src in b.state_init if b.tensors[dst].nbytes]
        if not regions:
            return

        def rec(cmd):
            # after any earlier run on this queue; the next run's first barrier covers these writes
            commands.barrier(cmd, commands.T | commands.C, commands.T,
                             vk.VK_ACCESS_SHADER_WRITE_BIT | vk.VK_ACCESS_TRANSFER_WRITE_BIT | commands.RW
                             | vk.VK_ACCESS_TRANSFER_READ_BIT, vk.VK_ACCESS_TRANSFER_WRITE_BIT)
            for arena in self._arenas:              # every batch item has its own state
                vk.vkCmdCopyBuffer(cmd, self.weights, arena, len(regions), regions)
        self.device.one_shot(rec)

    def write_state(self, offset: int, raw: bytes) -> None:
        """Write `raw` (a multiple of 4 bytes, at most 65536) at `offset` of every arena, after any earlier
        run on this queue (LoadedModel.set_state checks the tensor, the size and the dtype)."""
        data = vk.ffi.new("char[]", raw)            # alive until one_shot returns

        def rec(cmd):
            commands.barrier(cmd, commands.T | commands.C, commands.T,
                             vk.VK_ACCESS_SHADER_WRITE_BIT | vk.VK_ACCESS_TRANSFER_WRITE_BIT | commands.RW
                             | vk.VK_ACCESS_TRANSFER_READ_BIT, vk.VK_ACCESS_TRANSFER_WRITE_BIT)
            for arena in self._arenas:
                vk.vkCmdUpdateBuffer(cmd, arena, offset, len(raw), data)
        self.device.one_shot(rec)
