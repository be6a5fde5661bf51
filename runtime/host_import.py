"""Inputs the GPU reads from the caller's memory: run()'s large host inputs imported as Vulkan buffers
(VK_EXT_external_memory_host), so the GPU copies them across the bus by DMA instead of the host first
copying them into staging.

A batch of 32 float32 224 x 224 images is 19 MB.  Written into staging by the host (8 threads into the
BAR on the H100 host) it took 0.8 ms before the GPU could start; read by the GPU's copy engine from
the pinned pages it takes the bus's time, as PyTorch's copy from pinned memory does.

An import covers the pages the array lies in (the device's alignment, a page): those pages are
mapped, since each holds some of the array's bytes.  It pins them until it is freed.  So an import
is kept only for an array that owns its memory through an object that a weak reference can follow
(its base ndarray): the import is freed once that object is gone, on the next lookup or at close().
A run counts as a user of its spans (Span.users) until its fence has signalled (a run that timed out:
until close(), which settles the device first), and run() holds the array until it returns.

What is imported (Imports.span): a C-contiguous, writeable array of at least `min_bytes` (setting
host_import_bytes), in a synchronous run() only (run_async keeps the copy into staging: its caller may
refill the array while the run is in flight).  Importing pins pages, which costs time of its own, so
with the setting `auto` an array is imported the second time the same memory comes to run() (one that
is used once is copied, as before), and a model whose imports keep being let go before they repay
their cost (arrays taking turns past LIMIT, or dropped after a few runs) goes back to copying;
`on` imports at once; `off` never.  A failed import (memory the
driver will not pin) falls back to the copy, and that memory is not tried again.
"""
from __future__ import annotations

import threading
import weakref
from collections import OrderedDict

import numpy as np
import vulkan as vk

from gpuc.errors import DeviceError, GpucError

MODES = ("auto", "on", "off")
LIMIT = 4                       # imports a model keeps (each pins its array's pages)
PAID = 3                        # runs an import must serve to repay its cost (import + free ~2-3 ms on the H100,
#                                 against ~0.9 ms saved per run of a 19 MB batch, a bottleneck CNN in fp16) ...
WASTED = 4                      # ... and imports let go before that, after which (auto) a model copies again
_HANDLE = vk.VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT


class Span:
    """One imported range: `buf` (a transfer source) whose byte `offset` is the array's first byte."""

    def __init__(self, device, addr: int, nbytes: int):
        align = device.host_import_align
        base = addr // align * align
        end = -(-(addr + nbytes) // align) * align
        self.device, self.offset, self.nbytes = device, addr - base, nbytes
        self.buf = self.mem = None
        self.users, self.dropped = 0, False     # runs reading it; let go by Imports (freed when unused)
        self.runs = 0                           # runs that read it
        dev = device.device
        ptr = vk.ffi.cast("void *", base)
        fn = vk.ffi.cast("PFN_vkGetMemoryHostPointerPropertiesEXT",
                         vk.lib.vkGetDeviceProcAddr(dev, b"vkGetMemoryHostPointerPropertiesEXT"))
        props = vk.ffi.new("VkMemoryHostPointerPropertiesEXT *")
        props.sType = vk.VK_STRUCTURE_TYPE_MEMORY_HOST_POINTER_PROPERTIES_EXT
        if fn(dev, _HANDLE, ptr, props) != vk.VK_SUCCESS or not props.memoryTypeBits:
            raise DeviceError("the device cannot import this host memory")
        ext = vk.VkExternalMemoryBufferCreateInfo(handleTypes=_HANDLE)
        binfo = vk.VkBufferCreateInfo(pNext=ext, size=end - base, usage=vk.VK_BUFFER_USAGE_TRANSFER_SRC_BIT,
                                      sharingMode=vk.VK_SHARING_MODE_EXCLUSIVE)
        try:
            self.buf = vk.vkCreateBuffer(dev, binfo, None)
            bits = vk.vkGetBufferMemoryRequirements(dev, self.buf).memoryTypeBits & props.memoryTypeBits
            if not bits:
                raise DeviceError("no memory type can both import this host memory and back a buffer")
            kind = (bits & -bits).bit_length() - 1
            imp = vk.VkImportMemoryHostPointerInfoEXT(handleType=_HANDLE, pHostPointer=ptr)
            self.mem = vk.vkAllocateMemory(dev, vk.VkMemoryAllocateInfo(pNext=imp, allocationSize=end - base,
                                                                        memoryTypeIndex=kind), None)
            vk.vkBindBufferMemory(dev, self.buf, self.mem, 0)
        except vk.VkError as e:
            self.free()
            raise DeviceError(f"importing host memory failed ({type(e).__name__})") from None
        except BaseException:
            self.free()
            raise

    def free(self) -> None:
        dev = self.device.device
        if self.buf is not None:
            vk.vkDestroyBuffer(dev, self.buf, None)
        if self.mem is not None:
            vk.vkFreeMemory(dev, self.mem, None)
        self.buf = self.mem = None


def owner(a: np.ndarray):
    """The object that owns an array's memory (following .base), or None where it cannot be weakly
    referenced (bytes, a foreign buffer)."""
    o = a
    while isinstance(o, np.ndarray) and o.base is not None:
        o = o.base
    try:
        weakref.ref(o)
    except TypeError:
        return None
    return o


def _key(a: np.ndarray) -> tuple:
    return a.__array_interface__["data"][0], a.nbytes


class Imports:
    """A model's imported input arrays (at most LIMIT, least recently used freed first)."""

    def __init__(self, device, mode: str, min_bytes: int):
        if mode not in MODES:
            raise GpucError(f"GPUC_HOST_IMPORT={mode!r} is not one of {', '.join(MODES)}")
        self.device = device
        self.on = mode != "off" and getattr(device, "host_import_align", 0) > 0
        self.at_once = mode == "on"
        self.min_bytes = max(1, int(min_bytes))
        self._spans = OrderedDict()      # (address, bytes) -> (weakref to the owner, Span)
        self._seen = OrderedDict()       # (address, bytes) -> weakref to the owner: seen once (mode auto)
        self._refused = set()            # (address, bytes) the driver would not import
        self._live = set()               # every Span not freed yet: kept, or let go while runs read it
        self._lock = threading.Lock()
        self._closed = False
        self._wasted = 0                 # imports let go before PAID runs (auto: WASTED of them turn imports off)

    @property
    def count(self) -> int:
        """Imports kept now (those of arrays gone since are freed first)."""
        with self._lock:
            self._purge()
            return len(self._spans)

    def wanted(self, a) -> bool:
        """Whether `a` (a normalized host input) is worth importing at all."""
        return (self.on and isinstance(a, np.ndarray) and a.nbytes >= self.min_bytes
                and a.flags.c_contiguous and a.flags.writeable)

    def span(self, a: np.ndarray) -> Span | None:
        """The import of `a`'s memory (made now, or kept from an earlier run), or None: copy it."""
        if not self.wanted(a):
            return None
        own = owner(a)
        if own is None:
            return None
        key = _key(a)
        with self._lock:
            if self._closed:
                return None
            self._purge()
            hit = self._spans.get(key)
            if hit is not None and hit[0]() is own:
                self._spans.move_to_end(key)
                return self._use(hit[1])
            if key in self._refused:
                return None
            if not self.at_once:
                seen = self._seen.pop(key, None)
                if seen is None or seen() is not own:
                    self._seen[key] = weakref.ref(own)
                    while len(self._seen) > 4 * LIMIT:
                        self._seen.popitem(last=False)
                    return None
            try:
                sp = Span(self.device, *key)
            except DeviceError:
                if len(self._refused) >= 4 * LIMIT:
                    self._refused.clear()
                self._refused.add(key)
                return None
            self._live.add(sp)
            if hit is not None:
                self._drop(self._spans.pop(key)[1])
            self._spans[key] = (weakref.ref(own), sp)
            for k in [k for k, (_, s) in self._spans.items() if not s.users][:max(0, len(self._spans) - LIMIT)]:
                self._drop(self._spans.pop(k)[1])
            return self._use(sp)

    @staticmethod
    def _use(sp: Span) -> Span:
        sp.users += 1
        sp.runs += 1
        return sp

    def _drop(self, sp: Span) -> None:
        sp.dropped = True
        if sp.runs < PAID and not self.at_once:     # let go before it paid for itself
            self._wasted += 1
            if self._wasted >= WASTED:                # arrays taking turns past LIMIT: copy from now on
                self.on = False
        if not sp.users:
            self._free(sp)

    def _free(self, sp: Span) -> None:
        sp.free()
        self._live.discard(sp)

    def spans(self, arrays: list) -> list | None:
        """Each input array's span (None: it is copied into staging), or None where none has one."""
        if not self.on:
            return None
        got = [self.span(a) for a in arrays]
        return got if any(sp is not None for sp in got) else None

    def release(self, spans: list, late: bool = False) -> None:
        """A run that read `spans` is over (its fence signalled, or it never ran).  late: it may still
        execute (a wait timed out): its spans stay until close(), which settles the device first (those let
        go meanwhile too: close() frees every span not yet freed)."""
        if late:
            return
        with self._lock:
            for sp in spans:
                if sp is None:
                    continue
                sp.users -= 1
                if sp.dropped and not sp.users:
                    self._free(sp)

    def _purge(self) -> None:
        for key in [k for k, (ref, _) in self._spans.items() if ref() is None]:
            self._drop(self._spans.pop(key)[1])
        for key in [k for k, ref in self._seen.items() if ref() is None]:
            del self._seen[key]

    def close(self) -> None:
        """Free every import (the model's runs are over)."""
        with self._lock:
            self._closed = True
            for sp in self._live:
                sp.free()           # close() runs after every run is over (a late one's too: the device settled)
            self._live.clear()
            self._spans.clear()
            self._seen.clear()
