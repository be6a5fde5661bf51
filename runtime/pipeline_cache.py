"""Persisted VkPipelineCache, under a header the runtime checks itself.

Drivers have shipped bugs with foreign or damaged cache blobs, so before handing bytes to
vkCreatePipelineCache we check our own header: magic, vendor ID, device ID, driver version,
pipelineCacheUUID, gpuc version, bundle key, payload length and an xxh64 of the payload.  Any
mismatch, a corrupt or truncated file, or a driver error means "start empty and rewrite".
File: <cache dir>/pipelines/<bundle key>-<vendor>-<device>.bin.  GPUC_PIPELINE_CACHE=0 turns it off.
"""
from __future__ import annotations

import struct

import vulkan as vk
import xxhash

from gpuc.runtime import cachedir, settings
from gpuc.version import __version__

MAGIC = b"GPUCPC01"
_HEAD = struct.Struct("<8sIII16s16s32sQQ")     # magic vendor device driver uuid version key length xxh64
SUB = "pipelines"


def enabled() -> bool:
    return settings.current().pipeline_cache


class PipelineCache:
    def __init__(self, device, bundle_key: str):
        self.device = device
        p = device.props
        self.ident = (p.vendorID, p.deviceID, p.driverVersion, bytes(p.pipelineCacheUUID),
                      __version__.encode()[:16].ljust(16, b"\0"), bundle_key.encode()[:32].ljust(32, b"\0"))
        self.path = cachedir.cache_dir(SUB) / f"{bundle_key[:32]}-{p.vendorID:x}-{p.deviceID:x}.bin"
        self.status = "off"
        self.handle = None
        initial = self._read() if enabled() else None
        self.status = "off" if not enabled() else ("hit" if initial else "miss")
        self.handle = self._create(initial)
        if self.handle is None and initial:
            self.status = "rejected"
            self.handle = self._create(None)

    def _read(self) -> bytes | None:
        try:
            blob = self.path.read_bytes()
        except OSError:
            return None
        if len(blob) < _HEAD.size:
            return None
        magic, vendor, dev, drv, uuid, ver, key, length, digest = _HEAD.unpack_from(blob)
        data = blob[_HEAD.size:]
        if magic != MAGIC or (vendor, dev, drv, uuid, ver, key) != self.ident:
            return None
        if length != len(data) or xxhash.xxh64_intdigest(data) != digest:
            return None
        return data

    def _create(self, initial: bytes | None):
        keep = vk.ffi.from_buffer(initial) if initial else None
        info = vk.VkPipelineCacheCreateInfo(initialDataSize=len(initial) if initial else 0,
                                            pInitialData=keep if initial else None)
        try:
            return vk.vkCreatePipelineCache(self.device.device, info, None)
        except vk.VkError:
            return None

    def save(self) -> None:
        """Write the driver's cache data back if we started without a valid file."""
        if self.status == "hit" or self.status == "off" or self.handle is None:
            return
        dev = self.device.device
        size = vk.ffi.new("size_t*")
        if vk.lib.vkGetPipelineCacheData(dev, self.handle, size, vk.ffi.NULL) != vk.VK_SUCCESS or not size[0]:
            return
        buf = vk.ffi.new("char[]", size[0])
        if vk.lib.vkGetPipelineCacheData(dev, self.handle, size, buf) != vk.VK_SUCCESS:
            return
        data = bytes(vk.ffi.buffer(buf, size[0]))
        head = _HEAD.pack(MAGIC, *self.ident, len(data), xxhash.xxh64_intdigest(data))
        try:
            cachedir.atomic_write(self.path, head + data)
            cachedir.evict(SUB)
        except OSError:
            pass       # a read-only or full cache never fails a load

    def destroy(self) -> None:
        if self.handle is not None and self.device.device is not None:
            vk.vkDestroyPipelineCache(self.device.device, self.handle, None)
        self.handle = None
