"""Resources: every Vulkan object one LoadedModel creates, freed together, newest first, by close().

Mapped (host-visible) buffers are handed out as numpy uint8 arrays over their mapping, and numpy
views of them may outlive the model (LoadedModel.input_view / output_view): such a buffer is unmapped
and freed when the model has closed and no array over its memory is left, whichever comes last
(Mapped; the device waits for them before it is destroyed, Device.pin).  So no array a caller
still holds ever points into freed memory."""
from __future__ import annotations

import sys
import threading
import weakref

import numpy as np
import vulkan as vk

from gpuc.runtime.device import CLOSE_GRACE_S, MemoryKind


class Resources:
    """Creates Vulkan objects on `device` and keeps them until close().  The other runtime objects
    (arenas, staging slots, pipelines, descriptors, recorded commands) make theirs here."""

    def __init__(self, device):
        self.device = device
        self.dev = device.device
        self._objs = []          # (destroy_fn, handle) in creation order
        self._fences = []
        self._mapped = []        # Mapped buffers (freed by close() and the last array over them)

    def keep(self, destroy, handle):
        """Free `handle` with destroy(dev, handle, None) at close(); returns the handle."""
        self._objs.append((destroy, handle))
        return handle

    def buffer(self, size, usage, kind: MemoryKind = MemoryKind.DEVICE):
        """(buffer, memory, size) of a new buffer (Device.buffer), both freed at close()."""
        buf, mem, size = self.device.buffer(size, usage, kind)
        self.keep(vk.vkFreeMemory, mem)
        self.keep(vk.vkDestroyBuffer, buf)
        return buf, mem, size

    def mapped(self, size, usage, kind: MemoryKind = MemoryKind.HOST):
        """(buffer, array) of a new host-visible buffer: `array` is a numpy uint8 array over its whole
        mapping; make views of it (np.frombuffer(array, ...), slices).  Mapped until the model has
        closed and no array over it is left (Mapped)."""
        buf, mem, size = self.device.buffer(size, usage, kind)
        try:
            root = np.frombuffer(vk.vkMapMemory(self.dev, mem, 0, size, 0), np.uint8)
        except BaseException:
            vk.vkDestroyBuffer(self.dev, buf, None)
            vk.vkFreeMemory(self.dev, mem, None)
            raise
        self._mapped.append(Mapped(self.device, buf, mem, root))
        return buf, root

    def command_pool(self):
        """A command pool of the compute queue's family (externally synchronised: one user at a time)."""
        info = vk.VkCommandPoolCreateInfo(queueFamilyIndex=self.device.family,
                                          flags=vk.VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT)
        return self.keep(vk.vkDestroyCommandPool, vk.vkCreateCommandPool(self.dev, info, None))

    def command_buffer(self, pool):
        """A primary command buffer from `pool`."""
        ainfo = vk.VkCommandBufferAllocateInfo(commandPool=pool, level=vk.VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                               commandBufferCount=1)
        cmd = vk.vkAllocateCommandBuffers(self.dev, ainfo)[0]
        return self.keep(lambda d, c, _: vk.vkFreeCommandBuffers(d, pool, 1, [c]), cmd)

    def query_pool(self, count: int):
        """A pool of `count` timestamp queries."""
        info = vk.VkQueryPoolCreateInfo(queryType=vk.VK_QUERY_TYPE_TIMESTAMP, queryCount=count)
        return self.keep(vk.vkDestroyQueryPool, vk.vkCreateQueryPool(self.dev, info, None))

    def fence(self):
        f = self.keep(vk.vkDestroyFence, vk.vkCreateFence(self.dev, vk.VkFenceCreateInfo(), None))
        self._fences.append(f)
        return f

    def descriptor_pool(self, n_sets: int, n_buffers: int):
        """A pool for `n_sets` descriptor sets holding `n_buffers` storage-buffer descriptors in all."""
        sizes = [vk.VkDescriptorPoolSize(type=vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, descriptorCount=n_buffers)]
        info = vk.VkDescriptorPoolCreateInfo(maxSets=n_sets, poolSizeCount=1, pPoolSizes=sizes)
        return self.keep(vk.vkDestroyDescriptorPool, vk.vkCreateDescriptorPool(self.dev, info, None))

    def close(self) -> None:
        """Wait for the device to go idle, then free everything, newest first.  Idempotent: a second
        call (e.g. from LoadedModel.__del__ after close(), in whatever thread collects it) touches
        neither the device nor its queue.  A run that timed out (GpuTimeoutError) is waited for up to
        CLOSE_GRACE_S more; should it still be executing, nothing is destroyed under it: the objects
        are left to the process's exit (or the device's close)."""
        objs, self._objs = self._objs, []
        mapped, self._mapped = self._mapped, []
        if not (objs or mapped) or getattr(self.device, "device", None) is None:   # closed already, or the device first
            return
        if self.device._late and not self.device.settle():
            print(f"gpuc: warning: a run that timed out still executes {CLOSE_GRACE_S:g} s later; its model's "
                  "Vulkan objects, and the device, are left to the process's exit", file=sys.stderr)
            return
        self.device.forget(self._fences)
        vk.vkDeviceWaitIdle(self.dev)
        for destroy, h in reversed(objs):
            destroy(self.dev, h, None)
        for m in mapped:
            m.release()


class Mapped:
    """A mapped buffer that numpy arrays may outlive its model with: freed (unmapped with its memory)
    once release() was called (the model closed, the GPU idle) and the array over it is gone.  Until
    then the device counts it as pinned (Device.pin) and defers its own destruction."""

    def __init__(self, device, buf, mem, root: np.ndarray):
        self.device, self.dev, self.buf, self.mem = device, device.device, buf, mem
        self._lock = threading.Lock()
        self._released = self._gone = self._freed = False
        device.pin(self)
        fin = weakref.finalize(root, self._arrays_gone)   # every view keeps `root` alive (its .base)
        fin.atexit = False                                # at exit the process's end frees it

    def _arrays_gone(self):
        with self._lock:
            self._gone = True
            ready = self._released
        if ready:
            self._free()

    def release(self):
        with self._lock:
            self._released = True
            ready = self._gone
        if ready:
            self._free()

    def _free(self):
        with self._lock:
            if self._freed:
                return
            self._freed = True
        if sys.is_finalizing():
            return
        try:
            vk.vkDestroyBuffer(self.dev, self.buf, None)
            vk.vkFreeMemory(self.dev, self.mem, None)          # unmaps it
        finally:
            self.device.unpin(self)
