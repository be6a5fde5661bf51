"""Command-buffer recording for a LoadedModel: input copies, dispatches with barriers, output
copies; optional timestamp queries (around the whole run, or after every dispatch for profiling)."""
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


def alloc(model, cmd_pool=None):
    """A primary command buffer from `cmd_pool` (default: the model's own), freed with the model."""
    cmd_pool = cmd_pool or getattr(model, "cmd_pool", None) or model.device.cmd_pool
    ainfo = vk.VkCommandBufferAllocateInfo(commandPool=cmd_pool,
                                           level=vk.VK_COMMAND_BUFFER_LEVEL_PRIMARY, commandBufferCount=1)
    cmd = vk.vkAllocateCommandBuffers(model.dev, ainfo)[0]
    model._objs.append((lambda d, c, _: vk.vkFreeCommandBuffers(d, cmd_pool, 1, [c]), cmd))
    return cmd


def begin(model, cmd_pool=None):
    cmd = alloc(model, cmd_pool)
    vk.vkBeginCommandBuffer(cmd, vk.VkCommandBufferBeginInfo())
    return cmd


def wait_all(cmd):
    """Runs of different slots share the arena(s): wait for all earlier work on this queue."""
    barrier(cmd, H | T | C, T | C, vk.VK_ACCESS_HOST_WRITE_BIT | vk.VK_ACCESS_TRANSFER_WRITE_BIT
            | vk.VK_ACCESS_SHADER_WRITE_BIT | vk.VK_ACCESS_TRANSFER_READ_BIT | vk.VK_ACCESS_SHADER_READ_BIT,
            vk.VK_ACCESS_TRANSFER_READ_BIT | vk.VK_ACCESS_TRANSFER_WRITE_BIT | RW)


def item_regions(model, specs, items, to_arena: bool):
    """{item: [VkBufferCopy]} between staging (items stacked along axis 0) and item's arena."""
    b, out = model.bundle, {}
    for i in range(items):
        regs = []
        for s in specs:
            n = b.tensors[s.tensor].nbytes
            if n:
                st, ar = s.staging + i * n, b.tensors[s.tensor].offset
                regs.append(vk.VkBufferCopy(srcOffset=st if to_arena else ar, dstOffset=ar if to_arena else st, size=n))
        if regs:
            out[i] = regs
    return out


def dispatches(cmd, model, items=1, pool=None, first=0, count=None):
    """Every dispatch (or those in [first, first + count): a program's GPU step) for `items` batch
    items, layer by layer (one barrier per layer; the items of a layer are independent).  pool: a
    timestamp after each layer (query i + 1)."""
    b = model.bundle
    last = len(b.dispatches) if count is None else first + count
    for i, disp in enumerate(b.dispatches[first:last], first):
        if i > first:
            barrier(cmd, C, C, vk.VK_ACCESS_SHADER_WRITE_BIT, RW)
        vk.lib.vkCmdBindPipeline(cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, model._pipelines[disp.shader])
        if disp.push_constants:
            data = vk.ffi.new("char[]", disp.push_constants)
            vk.vkCmdPushConstants(cmd, model._pipe_layouts[disp.shader], vk.VK_SHADER_STAGE_COMPUTE_BIT,
                                  0, len(disp.push_constants), data)
        for item in range(items):
            sets = vk.ffi.new("VkDescriptorSet*", model._item_sets[item][i])
            vk.lib.vkCmdBindDescriptorSets(cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, model._pipe_layouts[disp.shader],
                                           0, 1, sets, 0, vk.ffi.NULL)
            vk.lib.vkCmdDispatch(cmd, *disp.groups)
        if pool is not None:
            vk.vkCmdWriteTimestamp(cmd, vk.VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, pool, i + 1)


def record(model, slot, pool=None, every_dispatch=False, items=1, cmd_pool=None):
    """Record slot's command buffer for a run of `items` batch items (1 <= items <= max_batch).
    pool: 2 timestamps (start, end), or with every_dispatch 1 + len(dispatches) (start, then after
    each dispatch)."""
    b = model.bundle
    cmd = begin(model, cmd_pool)
    n_stamps = (1 + len(b.dispatches)) if every_dispatch else 2
    if pool is not None:
        vk.vkCmdResetQueryPool(cmd, pool, 0, n_stamps)
    wait_all(cmd)
    for i, regions in item_regions(model, model._in_specs, items, True).items():
        vk.vkCmdCopyBuffer(cmd, slot.in_buf, model._arenas[i], len(regions), regions)
    barrier(cmd, T, C, vk.VK_ACCESS_TRANSFER_WRITE_BIT, RW)
    if pool is not None:
        vk.vkCmdWriteTimestamp(cmd, vk.VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, pool, 0)
    dispatches(cmd, model, items, pool if every_dispatch else None)
    if pool is not None and not every_dispatch:
        vk.vkCmdWriteTimestamp(cmd, vk.VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, pool, 1)
    barrier(cmd, C | T, T, vk.VK_ACCESS_SHADER_WRITE_BIT | vk.VK_ACCESS_TRANSFER_WRITE_BIT,
            vk.VK_ACCESS_TRANSFER_READ_BIT)
    for i, regions in item_regions(model, model._out_specs, items, False).items():
        vk.vkCmdCopyBuffer(cmd, model._arenas[i], slot.out_buf, len(regions), regions)
    barrier(cmd, T, H, vk.VK_ACCESS_TRANSFER_WRITE_BIT, vk.VK_ACCESS_HOST_READ_BIT)
    vk.vkEndCommandBuffer(cmd)
    return cmd
