"""A model's compute pipelines: descriptor-set and pipeline layouts, shader modules, and the
pipelines themselves, created through the persisted pipeline cache (runtime/pipeline_cache.py).

Creation is split over a few threads (runtime/overlap.py): a driver that compiles SPIR-V on a cache
miss (NVIDIA, lavapipe) then uses several cores, and the calls share one VkPipelineCache, which
Vulkan synchronizes internally.  Shaders are dealt to the threads largest first so the threads
finish together; the pipelines come back in shader order.

While a progress reporter is on (gpuc/progress.py: the CLI on a terminal) and the pipeline cache
cannot serve them, the threads create their pipelines a few at a time and count them: "compiling
pipelines N/M" instead of a silent wait on a first run.
"""
from __future__ import annotations

import threading

import vulkan as vk

from gpuc import progress
from gpuc.errors import BundleError
from gpuc.runtime import spirv
from gpuc.runtime.vk_instance import vk_call
from gpuc.runtime.overlap import Background, threads_for
from gpuc.runtime.pipeline_cache import PipelineCache


class Pipelines:
    """One compute pipeline per bundle shader, with its pipeline layout, and one descriptor-set
    layout per binding count; every handle is kept by `res` (freed with the model).  Records the
    pipeline cache's status in load_info["pipeline_cache"]."""

    def __init__(self, res, bundle, load_info: dict):
        dev, device = res.dev, res.device
        self._set_layouts, self._layouts, self._pipelines = {}, [], []
        infos, keep = [], []
        for s in bundle.shaders:
            if s.bindings not in self._set_layouts:
                binds = [vk.VkDescriptorSetLayoutBinding(binding=i, descriptorType=vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                                         descriptorCount=1, stageFlags=vk.VK_SHADER_STAGE_COMPUTE_BIT)
                         for i in range(s.bindings)]
                linfo = vk.VkDescriptorSetLayoutCreateInfo(bindingCount=len(binds), pBindings=binds or None)
                self._set_layouts[s.bindings] = res.keep(
                    vk.vkDestroyDescriptorSetLayout, vk.vkCreateDescriptorSetLayout(dev, linfo, None))
            set_layouts = [self._set_layouts[s.bindings]]
            ranges = [vk.VkPushConstantRange(stageFlags=vk.VK_SHADER_STAGE_COMPUTE_BIT, offset=0, size=s.push_bytes)]
            pinfo = vk.VkPipelineLayoutCreateInfo(setLayoutCount=1, pSetLayouts=set_layouts,
                                                  pushConstantRangeCount=1 if s.push_bytes else 0,
                                                  pPushConstantRanges=ranges if s.push_bytes else None)
            layout = res.keep(vk.vkDestroyPipelineLayout, vk.vkCreatePipelineLayout(dev, pinfo, None))
            self._layouts.append(layout)
            code = spirv.adapt(s.spirv, device.nan_preserve_widths)
            minfo = vk.VkShaderModuleCreateInfo(codeSize=len(code), pCode=code)
            module = res.keep(vk.vkDestroyShaderModule, _refused_as_bundle_error(
                len(self._layouts) - 1, s, vk.vkCreateShaderModule, dev, minfo, None))
            entry = s.entry
            stage = vk.VkPipelineShaderStageCreateInfo(stage=vk.VK_SHADER_STAGE_COMPUTE_BIT, module=module, pName=entry)
            keep += [code, minfo, entry, stage, set_layouts, ranges, pinfo]
            infos.append(vk.VkComputePipelineCreateInfo(stage=stage, layout=layout))
        cache = PipelineCache(device, bundle.checksum or bundle.fingerprint or "nokey")
        try:
            if infos:
                shown = progress.active() and cache.status != "hit"
                try:
                    with progress.counter("compiling pipelines", len(infos) if shown else 0) as bar:
                        pipes = _create(dev, cache.handle or vk.VK_NULL_HANDLE, infos, [len(s.spirv) for s in bundle.shaders],
                                        _Counting(bar) if shown else None)
                except vk.VkError:                 # which shader: each alone, the culprit named
                    for j in range(len(infos)):
                        for p in _refused_as_bundle_error(j, bundle.shaders[j], _create_group, dev,
                                                          vk.VK_NULL_HANDLE, infos, [j]):
                            vk.vkDestroyPipeline(dev, p, None)
                    raise
                self._pipelines = [res.keep(vk.vkDestroyPipeline, p) for p in pipes]
            cache.save()
        finally:
            load_info["pipeline_cache"] = cache.status
            cache.destroy()
        del keep

    def __len__(self) -> int:
        return len(self._pipelines)

    def set_layout(self, bindings: int):
        """The descriptor-set layout of shaders with `bindings` storage buffers."""
        return self._set_layouts[bindings]

    def bind(self, cmd, shader: int, push_constants: bytes = b"") -> None:
        """Bind shader `shader`'s pipeline and push its constants."""
        vk.lib.vkCmdBindPipeline(cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, self._pipelines[shader])
        if push_constants:
            data = vk.ffi.new("char[]", push_constants)
            vk.vkCmdPushConstants(cmd, self._layouts[shader], vk.VK_SHADER_STAGE_COMPUTE_BIT,
                                  0, len(push_constants), data)

    def bind_set(self, cmd, shader: int, dset) -> None:
        """Bind descriptor set `dset` (set 0) for shader `shader`'s pipeline layout."""
        sets = vk.ffi.new("VkDescriptorSet*", dset)
        vk.lib.vkCmdBindDescriptorSets(cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, self._layouts[shader],
                                       0, 1, sets, 0, vk.ffi.NULL)


def _refused_as_bundle_error(j, shader, fn, *args):
    """fn(*args); a raw Vulkan error (the driver refused the module) as a BundleError naming shader j."""
    try:
        return vk_call(f"creating the pipeline of shader {j} ({shader.name})", fn, *args)
    except vk.VkError as e:
        raise BundleError(f"shader {j} ({shader.name}) was refused by the driver ({type(e).__name__}): the "
                          "bundle is corrupt or was made for another device; recompile it") from None


def deal(sizes: list, n: int) -> list:
    """Split item indices into n groups of near-equal total size (largest first, to the lightest group)."""
    groups, loads = [[] for _ in range(n)], [0] * n
    for i in sorted(range(len(sizes)), key=lambda i: -sizes[i]):
        g = loads.index(min(loads))
        groups[g].append(i)
        loads[g] += sizes[i]
    return [sorted(g) for g in groups if g]


COUNTED_CHUNK = 2           # pipelines per vkCreateComputePipelines call while they are counted


class _Counting:
    """A progress counter advanced from several threads."""

    def __init__(self, bar):
        self._bar, self._lock = bar, threading.Lock()

    def advance(self, n: int) -> None:
        with self._lock:
            self._bar.advance(n)


def _create_group(dev, cache, infos, idx, counting=None):
    """The pipelines of infos[i] for i in idx, in one call, or COUNTED_CHUNK at a time, counted."""
    if counting is None:
        group = [infos[i] for i in idx]
        return vk_call("creating compute pipelines", vk.vkCreateComputePipelines, dev, cache, len(group), group, None)
    made = []
    try:
        for k in range(0, len(idx), COUNTED_CHUNK):
            made.extend(_create_group(dev, cache, infos, idx[k:k + COUNTED_CHUNK]))   # (a cffi array: not +=)
            counting.advance(min(COUNTED_CHUNK, len(idx) - k))
    except BaseException:
        for p in made:
            vk.vkDestroyPipeline(dev, p, None)
        raise
    return made


def _create(dev, cache, infos, sizes, counting=None) -> list:
    """vkCreateComputePipelines over threads_for(len(infos)) threads; pipelines in `infos` order.
    If any group fails, the pipelines the others made are destroyed and the first error is raised.
    `counting`: advanced as pipelines are made (see _create_group)."""
    groups = deal(sizes, threads_for(len(infos)))
    if len(groups) == 1:
        return list(_create_group(dev, cache, infos, groups[0], counting))
    jobs, made, error = [], {}, None
    try:
        for idx in groups:
            jobs.append(Background(_create_group, dev, cache, infos, idx, counting, name="gpuc-pipelines"))
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
