"""Plain Vulkan command helpers: the pipeline stages and accesses the runtime synchronizes, a memory
barrier, timestamp queries and the wait between runs of different slots.  Everything that records
commands uses them (runtime/recorder.py records a model's command buffers; device_tensor.py, slots.py,
program.py, batch.py and arenas.py record copies of their own); they import nothing of gpuc.
"""
from __future__ import annotations

import vulkan as vk

T, C, H = vk.VK_PIPELINE_STAGE_TRANSFER_BIT, vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, vk.VK_PIPELINE_STAGE_HOST_BIT
RW = vk.VK_ACCESS_SHADER_READ_BIT | vk.VK_ACCESS_SHADER_WRITE_BIT


_BARRIERS: dict = {}       # (src_access, dst_access) -> VkMemoryBarrier*, built once


def barrier(cmd, src_stage, dst_stage, src_access, dst_access):
    mb = _BARRIERS.get((src_access, dst_access))
    if mb is None:
        mb = _BARRIERS[(src_access, dst_access)] = vk.ffi.new("VkMemoryBarrier*", {
            "sType": vk.VK_STRUCTURE_TYPE_MEMORY_BARRIER, "srcAccessMask": src_access, "dstAccessMask": dst_access})
    vk.lib.vkCmdPipelineBarrier(cmd, src_stage, dst_stage, 0, 1, mb, 0, vk.ffi.NULL, 0, vk.ffi.NULL)


def timestamps_supported(device) -> bool:
    fam = vk.vkGetPhysicalDeviceQueueFamilyProperties(device.physical)[device.family]
    return fam.timestampValidBits > 0 and device.limits.timestampPeriod > 0


def read_ms(device, pool, count: int) -> list[float]:
    """Milliseconds from the first timestamp of `pool` to each later one."""
    data = vk.ffi.new("uint64_t[]", count)
    r = vk.lib.vkGetQueryPoolResults(device.device, pool, 0, count, count * 8, data, 8,
                                     vk.VK_QUERY_RESULT_64_BIT | vk.VK_QUERY_RESULT_WAIT_BIT)
    if r != vk.VK_SUCCESS:
        return [0.0] * (count - 1)
    period = device.limits.timestampPeriod * 1e-6
    return [(data[i] - data[0]) * period for i in range(1, count)]


def wait_all(cmd):
    """Runs of different slots share the arena(s): wait for all earlier work on this queue."""
    barrier(cmd, H | T | C, T | C, vk.VK_ACCESS_HOST_WRITE_BIT | vk.VK_ACCESS_TRANSFER_WRITE_BIT
            | vk.VK_ACCESS_SHADER_WRITE_BIT | vk.VK_ACCESS_TRANSFER_READ_BIT | vk.VK_ACCESS_SHADER_READ_BIT,
            vk.VK_ACCESS_TRANSFER_READ_BIT | vk.VK_ACCESS_TRANSFER_WRITE_BIT | RW)
