"""Resources: every Vulkan object one LoadedModel creates, freed together, newest first, by close()."""
from __future__ import annotations

import sys

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
        """(buffer, mapping) of a new host-visible buffer, mapped for the model's lifetime."""
        buf, mem, size = self.buffer(size, usage, kind)
        return buf, vk.vkMapMemory(self.dev, mem, 0, size, 0)

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
        if not objs or getattr(self.device, "device", None) is None:    # closed already, or the device first
            return
        if self.device._late and not self.device.settle():
            print(f"gpuc: warning: a run that timed out still executes {CLOSE_GRACE_S:g} s later; its model's "
                  "Vulkan objects, and the device, are left to the process's exit", file=sys.stderr)
            return
        self.device.forget(self._fences)
        vk.vkDeviceWaitIdle(self.dev)
        for destroy, h in reversed(objs):
            destroy(self.dev, h, None)
