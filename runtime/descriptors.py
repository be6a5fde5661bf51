"""Descriptors: one descriptor set per dispatch and batch item, binding that item's arena and the
weights at each tensor's offset."""
from __future__ import annotations

import vulkan as vk

from gpuc.runtime.bundle import ARENA
from gpuc.runtime.vk_instance import vk_check


class Descriptors:
    def __init__(self, res, bundle, pipelines, arenas):
        self.bundle = bundle
        n_sets = max(1, len(bundle.dispatches)) * arenas.items
        n_desc = max(1, sum(len(x.bindings) for x in bundle.dispatches)) * arenas.items
        pool = res.descriptor_pool(n_sets, n_desc)
        self._sets = [self._write_sets(res.dev, pool, pipelines, arenas, item) for item in range(arenas.items)]

    def set(self, item: int, dispatch: int):
        """The descriptor set of dispatch `dispatch` for batch item `item`."""
        return self._sets[item][dispatch]

    def _write_sets(self, dev, pool, pipelines, arenas, item):
        """One descriptor set per dispatch, binding `item`'s arena and the weights: allocated in one call
        and written in one vkUpdateDescriptorSets from flat arrays (the binding's per-struct wrappers
        cost milliseconds of load time on a real network)."""
        b = self.bundle
        n = len(b.dispatches)
        if n == 0:
            return []
        ffi = vk.ffi
        layouts = ffi.new("VkDescriptorSetLayout[]", [pipelines.set_layout(b.shaders[d.shader].bindings)
                                                      for d in b.dispatches])
        ainfo = ffi.new("VkDescriptorSetAllocateInfo*", {
            "sType": vk.VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO, "descriptorPool": pool,
            "descriptorSetCount": n, "pSetLayouts": layouts})
        sets = ffi.new("VkDescriptorSet[]", n)
        vk_check("allocating descriptor sets", vk.lib.vkAllocateDescriptorSets(dev, ainfo, sets))
        total = sum(len(d.bindings) for d in b.dispatches)
        if total:
            infos = ffi.new("VkDescriptorBufferInfo[]", total)
            writes = ffi.new("VkWriteDescriptorSet[]", total)
            k, arena, weights = 0, arenas.arena(item), arenas.weights
            for i, disp in enumerate(b.dispatches):
                for slot, ti in enumerate(disp.bindings):
                    t = b.tensors[ti]
                    info = infos[k]
                    info.buffer = arena if t.memory == ARENA else weights
                    info.offset, info.range = t.offset, max(4, t.nbytes)
                    w = writes[k]
                    w.sType, w.dstSet, w.dstBinding = vk.VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET, sets[i], slot
                    w.descriptorCount, w.descriptorType = 1, vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER
                    w.pBufferInfo = infos + k
                    k += 1
            vk.lib.vkUpdateDescriptorSets(dev, total, writes, 0, ffi.NULL)
        return [sets[i] for i in range(n)]
