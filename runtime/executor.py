"""LoadedModel: a bundle on a device, ready to run.

At load: weights uploaded once into device-local memory (beside pipeline creation), one arena for
every intermediate and I/O tensor, pipelines created through the pipeline cache over a few threads
(runtime/pipelines.py), one descriptor set per dispatch, and the command buffer recorded once.
Per run: copy inputs into mapped staging memory, submit, wait, copy out.
"""
from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass

import numpy as np
import vulkan as vk

from gpuc.errors import DeviceError, GpucError
from gpuc.runtime.bundle import ARENA, OFFSET_ALIGN, Bundle
from gpuc.runtime.device import Device, MemoryKind, _check, shared_device
from gpuc.runtime import batch, commands, pipelines, program
from gpuc.runtime.overlap import Background
from gpuc.runtime.precision import select_program

_STORAGE = vk.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT
_SRC, _DST = vk.VK_BUFFER_USAGE_TRANSFER_SRC_BIT, vk.VK_BUFFER_USAGE_TRANSFER_DST_BIT


@dataclass
class IOSpec:
    name: str
    shape: tuple
    dtype: np.dtype
    quant: dict | None
    tensor: int          # bundle tensor index
    staging: int         # offset in the staging buffer


def _layout_io(bundle, indices, items=1):
    """Staging layout: each tensor's `items` batch items stacked (item i at staging + i * nbytes)."""
    specs, off = [], 0
    for i in indices:
        t = bundle.tensors[i]
        specs.append(IOSpec(t.name, tuple(t.shape), np.dtype(t.dtype), t.quant, i, off))
        off += (t.nbytes * items + OFFSET_ALIGN - 1) // OFFSET_ALIGN * OFFSET_ALIGN
    return specs, off


def check_alignment(device) -> None:
    """Tensors are bound at their bundle offsets, multiples of OFFSET_ALIGN: the device must accept them."""
    need = int(device.limits.minStorageBufferOffsetAlignment)
    if need > OFFSET_ALIGN or OFFSET_ALIGN % need:
        raise DeviceError(f"device {device.name!r} needs storage buffer offsets aligned to {need} bytes "
                          f"(minStorageBufferOffsetAlignment), but gpuc bundles align tensors to {OFFSET_ALIGN} "
                          "bytes; this device cannot run them")


class _Slot:
    """One in-flight run's staging buffers, command buffer and fence."""

    def __init__(self):
        self.busy, self.seq, self.handle = False, 0, None
        self.handle_done = threading.Event()
        self.handle_done.set()


class RunHandle:
    """Returned by run_async: done() polls, wait() blocks and returns the outputs (once)."""

    def __init__(self, model, slot):
        self._m, self._slot, self._outs = model, slot, None
        self._collect = self._cleanup = None    # set by runtime/batch.py for batched / device-tensor runs
        self.device_outputs = None              # keep_on_device: the DeviceTensors, before the run completes
        self._lock = threading.Lock()      # one thread completes the run; others get its outputs

    def done(self) -> bool:
        if self._outs is not None:
            return True
        return vk.vkGetFenceStatus(self._m.dev, self._slot.fence) == vk.VK_SUCCESS

    def wait(self, mode: str = "passive"):
        with self._lock:
            return self._complete(mode)

    def _complete(self, mode):
        if self._outs is None:
            sl = self._slot
            try:
                self._m._wait(sl, mode)
                self._outs = self._collect() if self._collect else [v.copy() for v in sl.out_views]
                if sl.pool is not None:
                    self._m._timed_slot = sl       # its timestamps are read only if last_gpu_ms is asked for
            finally:
                if self._cleanup:
                    self._cleanup()
                sl.handle = None
                sl.busy = False
                sl.handle_done.set()
        return self._outs


class LoadedModel:
    def __init__(self, bundle: Bundle, device=None, slots: int = 2):
        self.bundle = bundle
        self.n_slots = max(1, int(slots))
        self._own_device = False     # no Device given: the process's shared one (runtime/device.py shared)
        self.device = device if isinstance(device, Device) else shared_device(device)
        self._lock = threading.Lock()
        self._objs = []          # (destroy_fn, handle) in creation order
        self.dev = None
        self.load_info = {"steps_ms": {}}     # pipeline_cache status; steps_ms: where the load's time went
        self._t_mark = time.perf_counter()
        self._last_gpu_ms = None     # GPU time of the last completed run (timestamp queries)
        self._timed_slot = None      # the slot whose timestamps hold it, until read (see last_gpu_ms)
        self._program = None         # runtime/program.py: bundles with host (CPU) steps or control flow
        try:
            self.bundle = select_program(bundle, self.device)      # fp16 bundle on a device without fp16: fp32
            self._setup()
        except BaseException:
            self.close()
            raise

    # -- public ------------------------------------------------------------------------------
    @property
    def inputs(self):
        return self._in_specs

    @property
    def outputs(self):
        return self._out_specs

    def run(self, inputs, wait: str = "passive", keep_on_device: bool = False):
        """Run once. `inputs`: list in model order, a dict name -> array, or one array; an input may
        also be a DeviceTensor of this device, and with a max-batch bundle hold 1..max_batch items
        along axis 0.  wait="active" spins on the fence (lowest latency, one busy CPU core) instead
        of blocking.  keep_on_device=True returns DeviceTensors instead of arrays."""
        return self.run_async(inputs, keep_on_device).wait(wait)

    def run_async(self, inputs, keep_on_device: bool = False) -> "RunHandle":
        """Submit a run and return at once.  Up to `slots` runs are in flight, each with its own
        staging buffers (the GPU executes them in order; the CPU fills/reads the others meanwhile)."""
        if self._program is not None:                      # host (CPU) steps / control flow: synchronous
            return program.run_async(self, inputs, keep_on_device)
        if keep_on_device or self.max_batch > 1 or batch.has_device_tensors(inputs):
            return batch.run_async(self, inputs, keep_on_device)
        arrays = self._normalize(inputs)
        slot = self._acquire()
        try:
            for view, a in zip(slot.in_views, arrays):
                view[...] = a
            self._submit(slot)
        except BaseException:
            slot.busy = False
            raise
        slot.handle = RunHandle(self, slot)
        return slot.handle

    @property
    def last_gpu_ms(self):
        """GPU time (ms) of the last completed run, from its timestamp queries; None if unknown.
        Read lazily: a run pays no query read-back unless this is asked for."""
        sl = self._timed_slot
        if sl is not None:
            self._timed_slot = None
            self._last_gpu_ms = commands.read_ms(self, sl.pool, 2)[-1]
        return self._last_gpu_ms

    @last_gpu_ms.setter
    def last_gpu_ms(self, value):
        self._timed_slot, self._last_gpu_ms = None, value

    @property
    def has_state(self) -> bool:
        """True when the model keeps variable tensors (e.g. LSTM state) across runs."""
        return bool(self.bundle.state_init)

    def reset_state(self) -> None:
        """Restore every variable tensor (e.g. LSTM state) to its initial value.  Waits for the runs
        in flight first (their outputs stay with their handles)."""
        while True:
            with self._lock:
                self._check_open()
                busy = [sl for sl in self._slots if sl.busy]
                if not busy:
                    for sl in self._slots:
                        sl.busy = True          # no run starts during the copy
                    break
            h = busy[0].handle
            if h is not None:
                h.wait()
            else:                               # being submitted, or a run_in_place: poll
                busy[0].handle_done.wait(0.001)
        try:
            self._init_state()
        finally:
            for sl in self._slots:
                sl.busy = False

    def input_view(self, i: int = 0, slot: int = 0):
        """numpy array backed by the mapped input staging memory of `slot` (write it, then run_in_place)."""
        self._check_open()
        return self._slots[slot].in_views[i]

    def output_view(self, i: int = 0, slot: int = 0):
        """numpy array backed by the mapped output staging memory (valid after run_in_place)."""
        self._check_open()
        return self._slots[slot].out_views[i]

    def run_in_place(self, slot: int = 0, wait: str = "passive") -> None:
        """Run on whatever input_view(..., slot) holds; results land in output_view(..., slot)."""
        with self._lock:
            self._check_open()
            sl = self._slots[slot]
            if sl.busy:
                raise GpucError(f"slot {slot} has a run in flight; wait for it first")
            sl.busy = True
        try:
            if self._program is not None:
                self._program.run(sl, wait)
            else:
                self._submit(sl)
                self._wait(sl, wait)
        finally:
            sl.busy = False

    def _check_open(self):
        if self.dev is None:
            raise GpucError("model is closed")

    def _acquire(self):
        while True:
            with self._lock:
                self._check_open()
                free = [sl for sl in self._slots if not sl.busy]
                if free:
                    free[0].busy = True
                    return free[0]
                oldest = min(self._slots, key=lambda sl: sl.seq)
            h = oldest.handle
            if h is not None:
                h.wait()                     # completes it: its outputs stay with its handle
            else:
                oldest.handle_done.wait()

    def _submit(self, slot, cmds=None):
        if self._timed_slot is slot:         # its timestamps are about to be reset: keep the last run's time
            self.last_gpu_ms
        with self._lock:
            self._seq += 1
            slot.seq = self._seq
            slot.handle_done.clear()
        self.device.submit(slot.cmd if cmds is None else cmds, slot.fence)

    def _wait(self, slot, mode="passive"):
        self.device.wait(slot.fence, active=(mode == "active"))

    def close(self):
        dev = getattr(self.device, "device", None)
        if dev is not None:
            vk.vkDeviceWaitIdle(dev)
            for destroy, h in reversed(self._objs):
                destroy(dev, h, None)
        self._objs = []
        self.dev = None
        if self._own_device and self.device is not None:
            self.device.close()
        self.device = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    # -- input checking ----------------------------------------------------------------------
    def _normalize(self, inputs):
        specs = self._in_specs
        inputs = self._ordered(inputs)
        out = []
        for s, a in zip(specs, inputs):
            a = np.asarray(a)
            if a.shape != s.shape:
                raise GpucError(f"input {s.name!r}: expected shape {list(s.shape)}, got {list(a.shape)}")
            if a.dtype != s.dtype:
                if not np.can_cast(a.dtype, s.dtype, casting="same_kind"):
                    raise GpucError(f"input {s.name!r}: expected dtype {s.dtype}, got {a.dtype}")
                a = a.astype(s.dtype)
            out.append(a)
        return out

    def _ordered(self, inputs) -> list:
        """Inputs as a list in model order (from a list, a dict name -> value, or one value)."""
        specs = self._in_specs
        if isinstance(inputs, np.ndarray) or np.isscalar(inputs) or batch.is_device_tensor(inputs):
            inputs = [inputs]
        if isinstance(inputs, dict):
            names = [s.name for s in specs]
            unknown = [k for k in inputs if k not in names]
            if unknown:
                raise GpucError(f"unknown input name(s) {unknown}; the model's inputs are {names}")
            missing = [n for n in names if n not in inputs]
            if missing:
                raise GpucError(f"missing input(s) {missing}")
            inputs = [inputs[n] for n in names]
        inputs = list(inputs)
        if len(inputs) != len(specs):
            raise GpucError(f"model takes {len(specs)} input(s) ({[s.name for s in specs]}), got {len(inputs)}")
        return inputs

    @staticmethod
    def _views(mapped, specs):
        return [np.frombuffer(mapped, s.dtype, int(np.prod(s.shape, dtype=np.int64)), s.staging).reshape(s.shape)
                for s in specs]

    # -- setup -------------------------------------------------------------------------------
    def _keep(self, destroy, handle):
        self._objs.append((destroy, handle))
        return handle

    def _buffer(self, size, usage, kind=MemoryKind.DEVICE):
        buf, mem, size = self.device.buffer(size, usage, kind)
        self._keep(vk.vkFreeMemory, mem)
        self._keep(vk.vkDestroyBuffer, buf)
        return buf, mem, size

    def _setup(self):
        b, d = self.bundle, self.device
        check_alignment(d)
        self.dev = dev = d.device
        # the model's own command pool: models sharing a Device never touch one pool from two threads
        pinfo = vk.VkCommandPoolCreateInfo(queueFamilyIndex=d.family,
                                           flags=vk.VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT)
        self.cmd_pool = self._keep(vk.vkDestroyCommandPool, vk.vkCreateCommandPool(dev, pinfo, None))
        self.max_batch = batch.max_batch(b)         # > 1: one arena per batch item, weights shared
        self._in_specs, in_bytes = _layout_io(b, b.inputs, self.max_batch)
        self._out_specs, out_bytes = _layout_io(b, b.outputs, self.max_batch)
        self._arenas = [self._buffer(b.arena_bytes, _STORAGE | _SRC | _DST)[0] for _ in range(self.max_batch)]
        self._arena = self._arenas[0]
        # weights in host-mapped device-local (BAR) memory: only with GPUC_WEIGHTS_IN_BAR=1 -- it saves a
        # staging copy at load, but on the H100 kernels read such weights up to 4x slower (MobileNetV2 int8:
        # 1.2 vs 0.3 ms of GPU time), so by default they go through a staging buffer (_upload_weights)
        self._weights_direct = (os.environ.get("GPUC_WEIGHTS_IN_BAR", "") not in ("", "0")
                                and self.device.bar_fits(b.weights.nbytes))
        self._weights, self._weights_mem, wsize = self._buffer(b.weights.nbytes, _STORAGE | _SRC | _DST,
                                                               MemoryKind.BAR if self._weights_direct else MemoryKind.DEVICE)
        self._slots, self._seq = [], 0
        for _ in range(self.n_slots):
            sl = _Slot()
            sl.in_buf, in_mem, in_size = self._buffer(in_bytes, _SRC, MemoryKind.UPLOAD)
            sl.out_buf, out_mem, out_size = self._buffer(out_bytes, _DST, MemoryKind.HOST)
            in_map, out_map = vk.vkMapMemory(dev, in_mem, 0, in_size, 0), vk.vkMapMemory(dev, out_mem, 0, out_size, 0)
            sl.in_views, sl.out_views = self._views(in_map, self._in_specs), self._views(out_map, self._out_specs)
            sl.in_rows = batch.row_views(in_map, self._in_specs, self.max_batch)     # all items, axis 0
            sl.out_rows = batch.row_views(out_map, self._out_specs, self.max_batch)
            self._slots.append(sl)
        self._mark("buffers")
        # the weight upload (a host copy, then a GPU copy) runs beside pipeline creation and recording
        upload = Background(self._upload_weights_and_state, name="gpuc-upload")
        try:
            self._make_pipelines()
            self._mark("pipelines")
            self._make_descriptors()
            self._mark("descriptors")
            self.timestamps = commands.timestamps_supported(self.device)
            for sl in self._slots:
                sl.pool = commands.query_pool(self, 2) if self.timestamps else None
                sl.cmd = commands.record(self, sl, sl.pool)
                sl.cmds = {}                                 # batch size -> command buffer (runtime/batch.py)
                sl.fence = self._keep(vk.vkDestroyFence, vk.vkCreateFence(dev, vk.VkFenceCreateInfo(), None))
            self._mark("record")
        finally:
            failed = upload.error()             # the upload is over before anything is freed
        if failed is not None:
            raise failed
        self._mark("upload_wait")
        self._program = program.Program(self) if program.needs_program(b) else None

    def _mark(self, step: str) -> None:
        """load_info["steps_ms"][step] = ms since the previous mark (the load's timeline, for gpuc bench)."""
        now = time.perf_counter()
        self.load_info["steps_ms"][step] = round((now - self._t_mark) * 1e3, 3)
        self._t_mark = now

    def _upload_weights_and_state(self):
        self._upload_weights()
        self._init_state()

    def _upload_weights(self):
        n = int(self.bundle.weights.nbytes)
        if n == 0:
            return
        if self._weights_direct:          # host-coherent: visible to every later submit
            m = vk.vkMapMemory(self.dev, self._weights_mem, 0, n, 0)
            np.frombuffer(m, np.uint8, n)[:] = self.bundle.weights
            vk.vkUnmapMemory(self.dev, self._weights_mem)
            return
        sbuf, smem, ssize = self.device.buffer(n, _SRC, MemoryKind.HOST)
        try:
            m = vk.vkMapMemory(self.dev, smem, 0, ssize, 0)
            np.frombuffer(m, np.uint8, n)[:] = self.bundle.weights
            vk.vkUnmapMemory(self.dev, smem)
            region = vk.VkBufferCopy(srcOffset=0, dstOffset=0, size=n)
            regions = [region]
            self.device.one_shot(lambda cmd: vk.vkCmdCopyBuffer(cmd, sbuf, self._weights, 1, regions))
        finally:
            vk.vkDestroyBuffer(self.dev, sbuf, None)
            vk.vkFreeMemory(self.dev, smem, None)

    def _init_state(self):
        """Copy every variable tensor's initial value (weights) into its arena bytes."""
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
                vk.vkCmdCopyBuffer(cmd, self._weights, arena, len(regions), regions)
        self.device.one_shot(rec)

    def _make_pipelines(self):
        pipelines.make(self)

    def _make_descriptors(self):
        dev, b = self.dev, self.bundle
        n_sets = max(1, len(b.dispatches)) * self.max_batch
        n_desc = max(1, sum(len(x.bindings) for x in b.dispatches)) * self.max_batch
        sizes = [vk.VkDescriptorPoolSize(type=vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, descriptorCount=n_desc)]
        pinfo = vk.VkDescriptorPoolCreateInfo(maxSets=n_sets, poolSizeCount=1, pPoolSizes=sizes)
        pool = self._keep(vk.vkDestroyDescriptorPool, vk.vkCreateDescriptorPool(dev, pinfo, None))
        self._item_sets = []
        for arena in self._arenas:
            self._item_sets.append(self._write_sets(pool, arena))
        self._sets = self._item_sets[0]

    def _write_sets(self, pool, arena):
        """One descriptor set per dispatch, binding `arena` and the weights: allocated in one call and
        written in one vkUpdateDescriptorSets from flat arrays (the binding's per-struct wrappers cost
        milliseconds of load time on a real network)."""
        dev, b = self.dev, self.bundle
        n = len(b.dispatches)
        if n == 0:
            return []
        ffi = vk.ffi
        layouts = ffi.new("VkDescriptorSetLayout[]", [self._set_layouts[b.shaders[d.shader].bindings]
                                                      for d in b.dispatches])
        ainfo = ffi.new("VkDescriptorSetAllocateInfo*", {
            "sType": vk.VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO, "descriptorPool": pool,
            "descriptorSetCount": n, "pSetLayouts": layouts})
        sets = ffi.new("VkDescriptorSet[]", n)
        _check("allocating descriptor sets", vk.lib.vkAllocateDescriptorSets(dev, ainfo, sets))
        total = sum(len(d.bindings) for d in b.dispatches)
        if total:
            infos = ffi.new("VkDescriptorBufferInfo[]", total)
            writes = ffi.new("VkWriteDescriptorSet[]", total)
            k = 0
            for i, disp in enumerate(b.dispatches):
                for slot, ti in enumerate(disp.bindings):
                    t = b.tensors[ti]
                    info = infos[k]
                    info.buffer = arena if t.memory == ARENA else self._weights
                    info.offset, info.range = t.offset, max(4, t.nbytes)
                    w = writes[k]
                    w.sType, w.dstSet, w.dstBinding = vk.VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET, sets[i], slot
                    w.descriptorCount, w.descriptorType = 1, vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER
                    w.pBufferInfo = infos + k
                    k += 1
            vk.lib.vkUpdateDescriptorSets(dev, total, writes, 0, ffi.NULL)
        return [sets[i] for i in range(n)]
