"""Command-buffer recording for a LoadedModel: input copies, dispatches with barriers, output
copies; optional timestamp queries (around the whole run, or after every dispatch for profiling)."""
from __future__ import annotations

import vulkan as vk

T, C, H = vk.VK_PIPELINE_STAGE_TRANSFER_BIT, vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, vk.VK_PIPELINE_STAGE_HOST_BIT
RW = vk.VK_ACCESS_SHADER_READ_BIT | vk.VK_ACCESS_SHADER_WRITE_BIT


def barrier(cmd, src_stage, dst_stage, src_access, dst_access):
    mb = vk.VkMemoryBarrier(srcAccessMask=src_access, dstAccessMask=dst_access)
    vk.vkCmdPipelineBarrier(cmd, src_stage, dst_stage, 0, 1, [mb], 0, None, 0, None)


def timestamps_supported(device) -> bool:
    fam = vk.vkGetPhysicalDeviceQueueFamilyProperties(device.physical)[device.family]
    return fam.timestampValidBits > 0 and device.limits.timestampPeriod > 0


def query_pool(model, count: int):
    info = vk.VkQueryPoolCreateInfo(queryType=vk.VK_QUERY_TYPE_TIMESTAMP, queryCount=count)
    return model._keep(vk.vkDestroyQueryPool, vk.vkCreateQueryPool(model.dev, info, None))


def read_ms(model, pool, count: int) -> list[float]:
    """Milliseconds from the first timestamp to each later one."""
    data = vk.ffi.new("uint64_t[]", count)
    r = vk.lib.vkGetQueryPoolResults(model.dev, pool, 0, count, count * 8, data, 8,
                                     vk.VK_QUERY_RESULT_64_BIT | vk.VK_QUERY_RESULT_WAIT_BIT)
    if r != vk.VK_SUCCESS:
        return [0.0] * (count - 1)
    period = model.device.limits.timestampPeriod * 1e-6
    return [(data[i] - data[0]) * period for i in range(1, count)]


def record(model, slot, pool=None, every_dispatch=False):
    """Record slot's command buffer.  pool: 2 timestamps (start, end), or with every_dispatch
    1 + len(dispatches) (start, then after each dispatch)."""
    dev, b = model.dev, model.bundle
    ainfo = vk.VkCommandBufferAllocateInfo(commandPool=model.device.cmd_pool,
                                           level=vk.VK_COMMAND_BUFFER_LEVEL_PRIMARY, commandBufferCount=1)
    cmd = vk.vkAllocateCommandBuffers(dev, ainfo)[0]
    cmd_pool = model.device.cmd_pool
    model._objs.append((lambda d, c, _: vk.vkFreeCommandBuffers(d, cmd_pool, 1, [c]), cmd))
    vk.vkBeginCommandBuffer(cmd, vk.VkCommandBufferBeginInfo())
    n_stamps = (1 + len(b.dispatches)) if every_dispatch else 2
    if pool is not None:
        vk.vkCmdResetQueryPool(cmd, pool, 0, n_stamps)
    # runs of different slots share the arena: wait for all earlier work on this queue
    barrier(cmd, H | T | C, T | C, vk.VK_ACCESS_HOST_WRITE_BIT | vk.VK_ACCESS_TRANSFER_WRITE_BIT
            | vk.VK_ACCESS_SHADER_WRITE_BIT | vk.VK_ACCESS_TRANSFER_READ_BIT | vk.VK_ACCESS_SHADER_READ_BIT,
            vk.VK_ACCESS_TRANSFER_READ_BIT | vk.VK_ACCESS_TRANSFER_WRITE_BIT | RW)
    regions = [vk.VkBufferCopy(srcOffset=s.staging, dstOffset=b.tensors[s.tensor].offset,
                               size=b.tensors[s.tensor].nbytes) for s in model._in_specs if b.tensors[s.tensor].nbytes]
    if regions:
        vk.vkCmdCopyBuffer(cmd, slot.in_buf, model._arena, len(regions), regions)
    barrier(cmd, T, C, vk.VK_ACCESS_TRANSFER_WRITE_BIT, RW)
    if pool is not None:
        vk.vkCmdWriteTimestamp(cmd, vk.VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, pool, 0)
    for i, disp in enumerate(b.dispatches):
        if i:
            barrier(cmd, C, C, vk.VK_ACCESS_SHADER_WRITE_BIT, RW)
        vk.vkCmdBindPipeline(cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, model._pipelines[disp.shader])
        sets = [model._sets[i]]
        vk.vkCmdBindDescriptorSets(cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, model._pipe_layouts[disp.shader],
                                   0, 1, sets, 0, None)
        if disp.push_constants:
            data = vk.ffi.new("char[]", disp.push_constants)
            vk.vkCmdPushConstants(cmd, model._pipe_layouts[disp.shader], vk.VK_SHADER_STAGE_COMPUTE_BIT,
                                  0, len(disp.push_constants), data)
        vk.vkCmdDispatch(cmd, *disp.groups)
        if pool is not None and every_dispatch:
            vk.vkCmdWriteTimestamp(cmd, vk.VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, pool, i + 1)
    if pool is not None and not every_dispatch:
        vk.vkCmdWriteTimestamp(cmd, vk.VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, pool, 1)
    barrier(cmd, C | T, T, vk.VK_ACCESS_SHADER_WRITE_BIT | vk.VK_ACCESS_TRANSFER_WRITE_BIT,
            vk.VK_ACCESS_TRANSFER_READ_BIT)
    regions = [vk.VkBufferCopy(srcOffset=b.tensors[s.tensor].offset, dstOffset=s.staging,
                               size=b.tensors[s.tensor].nbytes) for s in model._out_specs if b.tensors[s.tensor].nbytes]
    if regions:
        vk.vkCmdCopyBuffer(cmd, model._arena, slot.out_buf, len(regions), regions)
    barrier(cmd, T, H, vk.VK_ACCESS_TRANSFER_WRITE_BIT, vk.VK_ACCESS_HOST_READ_BIT)
    vk.vkEndCommandBuffer(cmd)
    return cmd
