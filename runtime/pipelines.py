"""A model's compute pipelines: descriptor-set and pipeline layouts, shader modules, and the
pipelines themselves, created through the persisted pipeline cache (runtime/pipeline_cache.py).

Creation is split over a few threads (runtime/overlap.py): a driver that compiles SPIR-V on a cache
miss (NVIDIA, lavapipe) then uses several cores, and the calls share one VkPipelineCache, which
Vulkan synchronizes internally.  Shaders are dealt to the threads largest first so the threads
finish together; the pipelines come back in shader order.
"""
from __future__ import annotations

import vulkan as vk

from gpuc.runtime import spirv
from gpuc.runtime.device import _vk_call
from gpuc.runtime.overlap import Background, threads_for
from gpuc.runtime.pipeline_cache import PipelineCache


def make(model) -> None:
    """Set model._set_layouts {bindings: layout}, model._pipe_layouts and model._pipelines (one per
    bundle shader); every handle goes to model._keep so close() frees it.  Records the pipeline
    cache's status in model.load_info."""
    dev, b = model.dev, model.bundle
    dev_widths = model.device.nan_preserve_widths
    model._set_layouts, model._pipe_layouts, infos, keep = {}, [], [], []
    for s in b.shaders:
        if s.bindings not in model._set_layouts:
            binds = [vk.VkDescriptorSetLayoutBinding(binding=i, descriptorType=vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                                     descriptorCount=1, stageFlags=vk.VK_SHADER_STAGE_COMPUTE_BIT)
                     for i in range(s.bindings)]
            linfo = vk.VkDescriptorSetLayoutCreateInfo(bindingCount=len(binds), pBindings=binds or None)
            model._set_layouts[s.bindings] = model._keep(
                vk.vkDestroyDescriptorSetLayout, vk.vkCreateDescriptorSetLayout(dev, linfo, None))
        set_layouts = [model._set_layouts[s.bindings]]
        ranges = [vk.VkPushConstantRange(stageFlags=vk.VK_SHADER_STAGE_COMPUTE_BIT, offset=0, size=s.push_bytes)]
        pinfo = vk.VkPipelineLayoutCreateInfo(setLayoutCount=1, pSetLayouts=set_layouts,
                                              pushConstantRangeCount=1 if s.push_bytes else 0,
                                              pPushConstantRanges=ranges if s.push_bytes else None)
        layout = model._keep(vk.vkDestroyPipelineLayout, vk.vkCreatePipelineLayout(dev, pinfo, None))
        model._pipe_layouts.append(layout)
        code = spirv.adapt(s.spirv, dev_widths)
        minfo = vk.VkShaderModuleCreateInfo(codeSize=len(code), pCode=code)
        module = model._keep(vk.vkDestroyShaderModule, vk.vkCreateShaderModule(dev, minfo, None))
        entry = s.entry
        stage = vk.VkPipelineShaderStageCreateInfo(stage=vk.VK_SHADER_STAGE_COMPUTE_BIT, module=module, pName=entry)
        keep += [code, minfo, entry, stage, set_layouts, ranges, pinfo]
        infos.append(vk.VkComputePipelineCreateInfo(stage=stage, layout=layout))
    model._pipelines = []
    cache = PipelineCache(model.device, b.checksum or b.fingerprint or "nokey")
    try:
        if infos:
            pipes = _create(dev, cache.handle or vk.VK_NULL_HANDLE, infos, [len(s.spirv) for s in b.shaders])
            model._pipelines = [model._keep(vk.vkDestroyPipeline, p) for p in pipes]
        cache.save()
    finally:
        model.load_info["pipeline_cache"] = cache.status
        cache.destroy()
    del keep


def deal(sizes: list, n: int) -> list:
    """Split item indices into n groups of near-equal total size (largest first, to the lightest group)."""
    groups, loads = [[] for _ in range(n)], [0] * n
    for i in sorted(range(len(sizes)), key=lambda i: -sizes[i]):
        g = loads.index(min(loads))
        groups[g].append(i)
        loads[g] += sizes[i]
    return [sorted(g) for g in groups if g]


def _create_group(dev, cache, infos, idx):
    group = [infos[i] for i in idx]
    return _vk_call("creating compute pipelines", vk.vkCreateComputePipelines, dev, cache, len(group), group, None)


def _create(dev, cache, infos, sizes) -> list:
    """vkCreateComputePipelines over threads_for(len(infos)) threads; pipelines in `infos` order.
    If any group fails, the pipelines the others made are destroyed and the first error is raised."""
    groups = deal(sizes, threads_for(len(infos)))
    if len(groups) == 1:
        return list(_create_group(dev, cache, infos, groups[0]))
    jobs, made, error = [], {}, None
    try:
        for idx in groups:
            jobs.append(Background(_create_group, dev, cache, infos, idx, name="gpuc-pipelines"))
    except BaseException as e:              # noqa: BLE001 - e.g. no thread could start: after the joins
        error = e
    for idx, job in zip(groups, jobs):      # every started job is waited for, even after an error
        try:
            failed = job.error()
        except KeyboardInterrupt as e:      # held back by finish() until the job was done
            error, failed = error or e, job.error()
        if failed is None:
            made.update(zip(idx, job.result()))
        else:
            error = error or failed
    if error is not None:
        for p in made.values():
            vk.vkDestroyPipeline(dev, p, None)
        raise error
    return [made[i] for i in range(len(infos))]
