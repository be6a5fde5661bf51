"""Vulkan device: instance, physical-device choice, queue, buffers and memory.

Lifecycle: the device keeps its open models (weakly); close() closes them first (their runs end or
are cancelled: later runs raise "model is closed"), waits for the device tensors' transfers in
progress (Device.using), frees the device tensors, and destroys the VkDevice -- unless mapped
staging memory is still pinned by numpy views a caller holds (runtime/resources.py Mapped): then
the destruction waits for the last of them.

Note on the `vulkan` cffi binding: it frees nested temporaries early, so every struct, array and
string a create-info points to is kept in a named local until the call returns.
"""
from __future__ import annotations

import atexit
import enum
import sys
import threading
import time
import weakref

import vulkan as vk

from gpuc.errors import DeviceError, GpuTimeoutError, GpucError
from gpuc.runtime import capabilities, device_select, overlap, robustness, settings
from gpuc.runtime.timeouts import CPU_TIMEOUT_S, GPU_TIMEOUT_S, TIMEOUT_ENV, describe_timeout, parse_timeout
from gpuc.runtime.vk_instance import choose_physical, instance, type_name, vk_call, vk_check


class MemoryKind(enum.Enum):
    """Where a buffer's memory lives (Device.buffer)."""
    DEVICE = "device"    # device-local, not mapped: arenas, weights, device tensors
    HOST = "host"        # host-visible and coherent, cached where possible: output staging, read-backs
    UPLOAD = "upload"    # host-visible memory the host only writes (input staging; see GPUC_UPLOAD_MEMORY)
    BAR = "bar"          # device-local and host-visible (a large BAR): weights with GPUC_WEIGHTS_IN_BAR=1


CLOSE_GRACE_S = 10.0        # close(): how long to wait for runs that timed out before leaving them be
_WAIT_SLICE_NS = 500_000_000    # a passive wait returns to Python this often (Ctrl-C is seen)
SPIN_S = 500e-6                  # a passive wait spins at most this long around a run's expected end


_SHARED: dict = {}
_SHARED_LOCK = threading.Lock()


def shared_device(select=None, robust: bool = False) -> "Device":
    """The process's Device for `select` (index, name substring or None: the default), created on
    first use and kept open until exit: models loaded without an explicit device share it (one
    VkInstance and VkDevice per process, as drivers expect; a second load skips the driver's start-up,
    ~150 ms on the H100).  The device's settings (runtime/settings.py Settings.device_key: GPUC_DEVICE,
    GPUC_DISABLE_FP16, GPUC_VALIDATION...) are part of the key, so a changed setting gets a device of
    its own (not GPUC_GPU_TIMEOUT_S: a setting of the models, read when they load)."""
    key = (None if select is None else str(select), bool(robust)) + settings.current().device_key()
    with _SHARED_LOCK:
        d = _SHARED.get(key)
        if d is None or d.device is None:          # first use, or closed by its user
            d = _SHARED[key] = Device(select, robust=robust)
        return d


@atexit.register
def _close_shared():
    overlap.finish_all()           # a device still opening in a thread (prewarm, load) first
    for d in list(_SHARED.values()):
        try:
            d.close()
        except Exception:                           # noqa: BLE001 - exiting: nothing left to report to
            pass
    _SHARED.clear()


class Device:
    """One logical device with one compute queue."""

    def __init__(self, select=None, robust: bool = False):
        t0 = time.perf_counter()
        self.robust = bool(robust)  # robustBufferAccess (+ robustBufferAccess2): for bundles from untrusted sources
        self.robust_features = []   # what robust mode enabled (runtime/robustness.py)
        self._late = set()          # fences of runs that timed out and may still be executing (wait, settle)
        self.hung = False           # such a run went on past a settle(): close() waits for nothing more
        self._life = threading.Condition()     # guards the lifecycle state below
        self._closing = False
        self._close_lock = threading.RLock()   # one close() at a time; the others wait for it
        self._models = weakref.WeakSet()       # open LoadedModels (adopt / disown): close() closes them
        self._users = 0                        # threads inside using() (device-tensor transfers)
        self._pinned = set()                   # mapped buffers not freed yet (runtime/resources.py Mapped)
        self._deferred = None                  # (device, instance) left for the last pinned buffer
        self.settings = settings.current()      # what this device was opened under (shared_device's key)
        self.instance, self._unhook = instance()
        t_instance = time.perf_counter()
        pds = vk.vkEnumeratePhysicalDevices(self.instance)
        if not pds:
            raise DeviceError("no Vulkan device found")
        self.physical, self.index = choose_physical(pds, select if select is not None else self.settings.device)
        self.props = vk.vkGetPhysicalDeviceProperties(self.physical)
        self.name = self.props.deviceName
        self.limits = self.props.limits
        self.mem_props = vk.vkGetPhysicalDeviceMemoryProperties(self.physical)
        families = vk.vkGetPhysicalDeviceQueueFamilyProperties(self.physical)
        fam = [i for i, f in enumerate(families) if f.queueFlags & vk.VK_QUEUE_COMPUTE_BIT]
        if not fam:
            raise DeviceError(f"device {self.name!r} has no compute queue")
        self.family = fam[0]
        prio = [1.0]
        qinfo = vk.VkDeviceQueueCreateInfo(queueFamilyIndex=self.family, queueCount=1, pQueuePriorities=prio)
        qinfos = [qinfo]
        cap_head, cap_keep, cap_exts = capabilities.enable(self)     # coopmat, subgroup ops (kernel variants)
        feats = self._fp16_features(cap_head)     # (chain head, structs kept alive) or None
        exts = ([vk.VK_KHR_SHADER_FLOAT16_INT8_EXTENSION_NAME] if self.fp16_arith else []) + cap_exts
        head = feats[0] if feats else cap_head
        robust_on = robustness.enable(self, head) if self.robust else None      # (features, chain head, exts)
        if robust_on is not None:
            head, exts = robust_on[1], exts + robust_on[2]
        dinfo = vk.VkDeviceCreateInfo(pNext=head, queueCreateInfoCount=1,
                                      pQueueCreateInfos=qinfos, enabledExtensionCount=len(exts),
                                      ppEnabledExtensionNames=exts or None,
                                      pEnabledFeatures=robust_on[0] if robust_on else None)
        t_query = time.perf_counter()
        self.device = vk_call("creating the Vulkan device", vk.vkCreateDevice, self.physical, dinfo, None)
        t_device = time.perf_counter()
        del feats, cap_keep
        self.queue = vk.vkGetDeviceQueue(self.device, self.family, 0)
        pinfo = vk.VkCommandPoolCreateInfo(queueFamilyIndex=self.family,
                                           flags=vk.VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT)
        self.cmd_pool = vk.vkCreateCommandPool(self.device, pinfo, None)
        self.lock = threading.Lock()
        self._submit_infos = {}      # command-buffer tuple -> prebuilt VkSubmitInfo (see submit)
        self.pool_lock = threading.Lock()        # cmd_pool (one_shot); each LoadedModel has its own pool
        self.tensors = weakref.WeakSet()         # open DeviceTensors (runtime/device_tensor.py), freed in close()
        self.tensor_recycler = None              # their buffers kept for reuse (device_tensor._Recycler)
        self.driver_version = self.props.driverVersion
        t_end = time.perf_counter()
        self.open_ms = (t_end - t0) * 1e3     # the driver's start-up (gpuc bench reports it), and its steps:
        self.open_steps_ms = {k: round(v * 1e3, 3) for k, v in (
            ("vkCreateInstance", t_instance - t0), ("queries", t_query - t_instance),
            ("vkCreateDevice", t_device - t_query), ("queue_pool", t_end - t_device))}

    def _fp16_features(self, tail=None):
        """Enable 16-bit storage buffers (what `--precision fp16` bundles need: fp16 loads/stores,
        fp32 arithmetic) and shaderFloat16 where the device has them.  Sets self.fp16_storage.
        GPUC_DISABLE_FP16=1 acts as a device without them (fp16 bundles then run their fp32 fallback).
        Returns the feature chain to pass to vkCreateDevice (kept alive by the caller; ends in `tail`),
        or None."""
        self.fp16_storage = self.fp16_arith = False
        if self.settings.disable_fp16:
            return (tail, [tail]) if tail is not None else None
        if self.props.apiVersion < vk.VK_MAKE_VERSION(1, 1, 0):
            return (tail, [tail]) if tail is not None else None
        exts = {e.extensionName for e in vk.vkEnumerateDeviceExtensionProperties(self.physical, None)}
        s16 = vk.VkPhysicalDevice16BitStorageFeatures()
        f16 = vk.VkPhysicalDeviceShaderFloat16Int8Features(pNext=s16) \
            if vk.VK_KHR_SHADER_FLOAT16_INT8_EXTENSION_NAME in exts else None
        query = vk.VkPhysicalDeviceFeatures2(pNext=f16 if f16 is not None else s16)
        vk.vkGetPhysicalDeviceFeatures2(self.physical, query)
        self.fp16_storage = bool(s16.storageBuffer16BitAccess)
        self.fp16_arith = bool(f16 is not None and f16.shaderFloat16)
        if not self.fp16_storage:
            return (tail, [tail]) if tail is not None else None
        on16 = vk.VkPhysicalDevice16BitStorageFeatures(pNext=tail, storageBuffer16BitAccess=vk.VK_TRUE)
        if not self.fp16_arith:
            return on16, [on16]
        onf = vk.VkPhysicalDeviceShaderFloat16Int8Features(pNext=on16, shaderFloat16=vk.VK_TRUE,   # (int8: the
                                                           shaderInt8=f16.shaderInt8)   # int8 coopmat variant)
        return onf, [onf, on16]

    def describe(self) -> dict:
        v = self.props.apiVersion
        uuid, bus = device_select.device_ids(self.physical)
        return {"name": self.name, "index": self.index, "uuid": device_select.format_uuid(uuid), "pci_bus_id": bus,
                "type": type_name(self.props.deviceType),
                "vendor_id": self.props.vendorID, "device_id": self.props.deviceID,
                "driver_version": self.props.driverVersion,
                "api_version": f"{v >> 22}.{(v >> 12) & 0x3FF}.{v & 0xFFF}",
                "fp16_storage": self.fp16_storage, "fp16_arith": self.fp16_arith,
                "subgroup_size": self.subgroup_size, "subgroup_arithmetic": bool(self.subgroup_ops & 4),
                "cooperative_matrix": [list(e) for e in self.coopmat],
                "cooperative_matrix2": [list(e) for e in self.coopmat2],
                "cooperative_matrix2_per_element": self.coopmat2_per_element,
                "host_import_alignment": self.host_import_align}     # 0: run() inputs always copied

    # -- memory -------------------------------------------------------------------------------
    def bar_fits(self, size: int) -> bool:
        """True when `size` bytes may go in device-local, host-visible memory (a large BAR: at most
        1/8 of that heap each, so a small 256 MiB BAR is left for others)."""
        return self.settings.upload_memory == "device" and 0 < size <= self._bar_bytes() // 8

    def _bar_bytes(self) -> int:
        """Size of the largest heap with a device-local, host-visible memory type (0 if none)."""
        flags = vk.VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT | vk.VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT
        mp = self.mem_props
        return max([mp.memoryHeaps[mp.memoryTypes[i].heapIndex].size for i in range(mp.memoryTypeCount)
                    if mp.memoryTypes[i].propertyFlags & flags == flags] or [0])

    def _memory_type(self, bits, want, prefer=0, avoid=0):
        best = None
        for i in range(self.mem_props.memoryTypeCount):
            flags = self.mem_props.memoryTypes[i].propertyFlags
            if bits & (1 << i) and flags & want == want:
                if flags & prefer == prefer and not flags & avoid:
                    return i
                best = i if best is None else best
        if best is None:
            raise DeviceError(f"device {self.name!r} has no memory type with flags {want:#x}")
        return best

    def _memory_flags(self, kind: MemoryKind, size: int):
        """(required, preferred, avoided) memory property flags for a buffer of `kind`."""
        host = vk.VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | vk.VK_MEMORY_PROPERTY_HOST_COHERENT_BIT
        if kind is MemoryKind.DEVICE:
            return vk.VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, vk.VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, 0
        if kind is MemoryKind.BAR:                    # device-local memory the host maps (see bar_fits)
            both = vk.VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT | host
            return both, both, 0
        # UPLOAD: memory the host only writes (input staging).  GPUC_UPLOAD_MEMORY picks device (default:
        # device-local + host-visible, i.e. a resizable BAR, so the GPU's copy into the arena stays in
        # VRAM -- on the H100 runs took 5-10% less than from cached host memory), cached, or uncached
        # (write-combined host memory).  A small BAR is left for others.  HOST: cached host memory.
        choice = self.settings.upload_memory if kind is MemoryKind.UPLOAD else "cached"
        if choice == "device" and not self.bar_fits(size):
            choice = "cached"
        prefer = host | {"uncached": 0, "device": vk.VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT}.get(
            choice, vk.VK_MEMORY_PROPERTY_HOST_CACHED_BIT)
        return host, prefer, vk.VK_MEMORY_PROPERTY_HOST_CACHED_BIT if choice == "uncached" else 0

    def buffer(self, size, usage, kind: MemoryKind = MemoryKind.DEVICE):
        """Create a buffer of `size` bytes (256 at least) with its own memory of `kind`.  Returns
        (buffer, memory, size): the VkBuffer, its VkDeviceMemory (the caller frees both) and the
        buffer's size in bytes."""
        if not isinstance(kind, MemoryKind):
            raise TypeError(f"memory kind must be a MemoryKind, not {kind!r}")
        size = max(int(size), 256)
        binfo = vk.VkBufferCreateInfo(size=size, usage=usage, sharingMode=vk.VK_SHARING_MODE_EXCLUSIVE)
        buf = vk_call("creating a buffer", vk.vkCreateBuffer, self.device, binfo, None)
        req = vk.vkGetBufferMemoryRequirements(self.device, buf)
        want, prefer, avoid = self._memory_flags(kind, size)
        ainfo = vk.VkMemoryAllocateInfo(allocationSize=req.size,
                                        memoryTypeIndex=self._memory_type(req.memoryTypeBits, want, prefer, avoid))
        try:
            mem = vk_call(f"allocating {size} bytes of device memory", vk.vkAllocateMemory, self.device, ainfo, None)
        except DeviceError:
            vk.vkDestroyBuffer(self.device, buf, None)
            raise
        vk.vkBindBufferMemory(self.device, buf, mem, 0)
        return buf, mem, size

    def submit(self, cmd, fence):
        """Submit one command buffer, or a list of them (executed in order), signalling `fence`.
        The VkSubmitInfo of each command-buffer sequence is built once and reused (building it through
        the binding costs more host time than the submit itself)."""
        cmds = tuple(cmd) if isinstance(cmd, (list, tuple)) else (cmd,)
        info = self._submit_infos.get(cmds)
        if info is None:
            if len(self._submit_infos) >= 1024:
                self._submit_infos.clear()
            arr = vk.ffi.new("VkCommandBuffer[]", list(cmds))
            info = (vk.ffi.new("VkSubmitInfo*", {"sType": vk.VK_STRUCTURE_TYPE_SUBMIT_INFO,
                                                  "commandBufferCount": len(cmds), "pCommandBuffers": arr}), arr)
            self._submit_infos[cmds] = info
        with self.lock:
            vk_check("submitting work", vk.lib.vkQueueSubmit(self.queue, 1, info[0], fence))

    @property
    def is_cpu(self) -> bool:
        """A CPU implementation of Vulkan (lavapipe, SwiftShader)."""
        return self.props.deviceType == vk.VK_PHYSICAL_DEVICE_TYPE_CPU

    def default_timeout_s(self) -> float:
        """GPUC_GPU_TIMEOUT_S where set, else 60 s on a GPU and no limit on a CPU implementation."""
        t = parse_timeout(settings.current().gpu_timeout_s, TIMEOUT_ENV)
        if t is not None:
            return t
        return CPU_TIMEOUT_S if self.is_cpu else GPU_TIMEOUT_S

    def wait(self, fence, active=False, timeout_s=None, spin_at=None):
        """Wait for `fence` and reset it.  active=True spins on vkGetFenceStatus (no sleep).  Otherwise
        the thread blocks; with `spin_at` (a time.perf_counter() value: shortly before the run is expected
        to end) it blocks until then and spins from there for at most SPIN_S before blocking again, so
        that a run ending on time is seen without a blocked thread's wake-up (~50-100 us on the H100).
        timeout_s: seconds (math.inf: no limit; None: default_timeout_s()).  Past it GpuTimeoutError;
        the fence is left as it is (signalled later by the run), and recorded as late until a wait
        sees it signalled."""
        if timeout_s is None:
            timeout_s = self.default_timeout_s()
        if not active and spin_at is not None and self._spin(fence, spin_at, timeout_s):
            active = True                   # signalled: the active branch returns at once
        if active:
            deadline = time.perf_counter() + timeout_s
            while True:
                st = vk.lib.vkGetFenceStatus(self.device, fence)
                if st == vk.VK_SUCCESS:
                    break
                if st != vk.VK_NOT_READY:
                    vk_call("waiting for the GPU", vk.vkWaitForFences, self.device, 1, [fence], vk.VK_TRUE, 0)
                if time.perf_counter() > deadline:
                    self._timed_out(fence, timeout_s)
        else:
            f = vk.ffi.new("VkFence*", fence)
            deadline = time.perf_counter() + timeout_s
            while True:          # in slices: a long wait (no limit on a CPU device) still sees Ctrl-C
                left = deadline - time.perf_counter()
                ns = _WAIT_SLICE_NS if left > _WAIT_SLICE_NS * 1e-9 else max(0, int(left * 1e9))
                r = vk.lib.vkWaitForFences(self.device, 1, f, vk.VK_TRUE, ns)
                if r != vk.VK_TIMEOUT:
                    break
                if left <= 0 or time.perf_counter() >= deadline:
                    self._timed_out(fence, timeout_s)
            vk_check("waiting for the GPU", r)
        if self._late:
            self._late.discard(fence)
        vk_check("resetting a fence", vk.lib.vkResetFences(self.device, 1, vk.ffi.new("VkFence*", fence)))

    def _spin(self, fence, spin_at: float, timeout_s: float) -> bool:
        """Block until `spin_at` (within timeout_s), then spin up to SPIN_S; whether the fence is signalled."""
        left = min(spin_at - time.perf_counter(), timeout_s)
        if left > _WAIT_SLICE_NS * 1e-9:
            return False                    # a long run: a blocked thread's wake-up does not matter
        if left > 0 and vk.lib.vkWaitForFences(self.device, 1, vk.ffi.new("VkFence*", fence), vk.VK_TRUE,
                                                int(left * 1e9)) == vk.VK_SUCCESS:
            return True
        end = time.perf_counter() + SPIN_S
        while time.perf_counter() < end:
            st = vk.lib.vkGetFenceStatus(self.device, fence)
            if st != vk.VK_NOT_READY:
                return st == vk.VK_SUCCESS
        return False

    def _timed_out(self, fence, timeout_s):
        self._late.add(fence)
        raise GpuTimeoutError(
            f"the GPU did not finish within {describe_timeout(timeout_s)} (hung or far too slow); allow longer "
            f"with --timeout SECONDS, {TIMEOUT_ENV} or gpuc.load(..., timeout_s=...) (0: no limit)")


    def settle(self, timeout_s: float | None = None) -> bool:
        """Wait up to `timeout_s` (default CLOSE_GRACE_S) for the runs that timed out; True when none is
        left executing (else the device counts as hung, and later settles wait no more)."""
        timeout_s = CLOSE_GRACE_S if timeout_s is None else timeout_s
        if self.hung and self._late:
            timeout_s = 0.0
        deadline = time.perf_counter() + timeout_s
        for fence in list(self._late):
            left = min(max(0.0, deadline - time.perf_counter()), 1e9)
            r = vk.lib.vkWaitForFences(self.device, 1, vk.ffi.new("VkFence*", fence), vk.VK_TRUE, int(left * 1e9))
            if r == vk.VK_TIMEOUT:
                self.hung = True
                return False
            self._late.discard(fence)          # signalled (or lost with the device: nothing runs)
        return True

    def forget(self, fences) -> None:
        """These fences are about to be destroyed (their runs are over)."""
        self._late.difference_update(fences)

    def submit_and_wait(self, cmd, fence):
        self.submit(cmd, fence)
        self.wait(fence)

    def one_shot(self, record):
        """Record with `record(cmd)`, submit, wait (the device's command pool: one thread at a time)."""
        with self.pool_lock:
            self._one_shot(record)

    def _one_shot(self, record):
        ainfo = vk.VkCommandBufferAllocateInfo(commandPool=self.cmd_pool, level=vk.VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                               commandBufferCount=1)
        cmd = vk.vkAllocateCommandBuffers(self.device, ainfo)[0]
        binfo = vk.VkCommandBufferBeginInfo(flags=vk.VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT)
        vk.vkBeginCommandBuffer(cmd, binfo)
        record(cmd)
        vk.vkEndCommandBuffer(cmd)
        fence = vk.vkCreateFence(self.device, vk.VkFenceCreateInfo(), None)
        try:
            self.submit_and_wait(cmd, fence)
        except GpuTimeoutError:
            raise                       # still executing: its fence and command buffer stay (close() settles)
        except BaseException:
            self._free_one_shot(cmd, fence)
            raise
        self._free_one_shot(cmd, fence)

    def _free_one_shot(self, cmd, fence):
        vk.vkDestroyFence(self.device, fence, None)
        vk.vkFreeCommandBuffers(self.device, self.cmd_pool, 1, [cmd])

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- lifecycle ----------------------------------------------------------------------------
    @property
    def closed(self) -> bool:
        return self._closing or self.device is None

    def _closed_error(self) -> GpucError:
        return GpucError(f"device {self.name!r} is closed (and every model on it is closed)")

    def adopt(self, model) -> None:
        """A model is being loaded on this device (close() closes it); raises once the device closes."""
        with self._life:
            if self.closed:
                raise self._closed_error()
            self._models.add(model)

    def disown(self, model) -> None:
        with self._life:
            self._models.discard(model)

    def using(self):
        """Context manager around device work outside a model's runs (device-tensor transfers):
        raises once the device is closed; close() waits for the threads inside."""
        return _DeviceUse(self)

    def pin(self, mapped) -> None:
        with self._life:
            self._pinned.add(mapped)

    def unpin(self, mapped) -> None:
        """A pinned buffer was freed; the last one destroys a closed device whose destruction waited."""
        with self._life:
            self._pinned.discard(mapped)
            left = None if self._pinned else self._deferred
            if left is not None:
                self._deferred = None
        if left is not None:
            self._destroy(*left)

    def close(self):
        """Close the device: its open models first (runs in flight end or are cancelled), then the
        device tensors, then the device.  Safe from several threads at once; later calls do nothing."""
        if not hasattr(self, "_close_lock"):                 # __init__ failed before the lifecycle state
            return
        with self._close_lock:
            with self._life:
                if self._closing:
                    return
                self._closing = True
                models = list(self._models)
            for m in models:
                m.close()
            with self._life:                                 # device-tensor transfers in progress
                self._life.wait_for(lambda: not self._users)
            self._close_device()

    def _close_device(self):
        reported = self.hung                         # a model's close() said so already
        if getattr(self, "device", None) is not None and self._late and not self.settle():
            if not reported:
                print(f"gpuc: warning: device {self.name!r} still runs work that timed out {CLOSE_GRACE_S:g} s "
                      "later; it is left to the process's exit", file=sys.stderr)
            self.device = self.instance = None        # not destroyed under running work; nothing uses it again
            return
        dev, inst = getattr(self, "device", None), getattr(self, "instance", None)
        if dev is not None:
            vk.vkDeviceWaitIdle(dev)
            for t in list(getattr(self, "tensors", ())):
                t.destroy()
        with self._life:
            self.device = self.instance = None
            if self._pinned:                          # views a caller holds still point into mapped memory
                self._deferred = (dev, inst)
                return
        self._destroy(dev, inst)

    def _destroy(self, dev, inst):
        if sys.is_finalizing():
            return                                    # the process's exit frees it
        if dev is not None:
            vk.vkDestroyCommandPool(dev, self.cmd_pool, None)
            vk.vkDestroyDevice(dev, None)
        if inst is not None:
            self._unhook()
            vk.vkDestroyInstance(inst, None)


class _DeviceUse:
    __slots__ = ("d",)

    def __init__(self, d):
        self.d = d

    def __enter__(self):
        d = self.d
        with d._life:
            if d.closed:
                raise d._closed_error()
            d._users += 1
        return d

    def __exit__(self, *exc):
        d = self.d
        with d._life:
            d._users -= 1
            if not d._users:
                d._life.notify_all()
