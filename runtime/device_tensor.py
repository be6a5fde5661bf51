"""Device-resident tensors: `m.run(x, keep_on_device=True)` returns DeviceTensors, which another
bundle loaded on the same Device takes as inputs without a host round trip.

A DeviceTensor owns one device-local buffer holding its elements packed in row-major order (the
arena layout of an I/O tensor; batch items stacked along axis 0).  The producing run copies its
outputs into it at the end of its own submission; a consuming run copies it into its arena at the
start of its submission (runtime/batch.py).  Both go to the device's one queue, and every run
begins with a barrier on all earlier transfer and shader writes, so the consumer always sees the
producer's finished data.  `numpy()` reads it back; `close()` (or the context manager) frees it
after the runs that read it; the device frees any left open when it closes (its models closed
first), after which using one raises GpucError("... model is closed ...").
"""
from __future__ import annotations

import threading

import numpy as np
import vulkan as vk

from gpuc.errors import GpucError, GpuTimeoutError
from gpuc.runtime.device import MemoryKind

_USAGE = (vk.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | vk.VK_BUFFER_USAGE_TRANSFER_SRC_BIT
          | vk.VK_BUFFER_USAGE_TRANSFER_DST_BIT)
_KEEP_PER_SIZE = 4          # closed tensors' buffers kept for reuse, per byte size
# Re-entrant, as is each recycler's lock: a garbage DeviceTensor's __del__ (which recycles its buffer) may run
# at any allocation, inside a section that holds them, on the same thread (a plain Lock deadlocked there:
# scripts/fuzz_lifecycle.py, a keep_on_device run's output tensor made while an old one was collected).
_CREATE = threading.RLock()


class _Recycler:
    """Buffers of closed DeviceTensors, reused by new ones of the same size (a keep_on_device run
    then allocates no memory).  Lives in device.tensors, so the device destroys it on close."""

    def __init__(self, device):
        self.device, self.free, self.lock, self.open = device, {}, threading.RLock(), True
        device.tensor_recycler = self            # strong reference (device.tensors is weak)
        device.tensors.add(self)

    @staticmethod
    def of(device) -> "_Recycler":
        with _CREATE:
            r = getattr(device, "tensor_recycler", None)
            return r if r is not None else _Recycler(device)

    def take(self, size):
        with self.lock:
            lst = self.free.get(size)
            return lst.pop() if lst else None

    def give(self, size, buf, mem) -> bool:
        with self.lock:
            lst = self.free.setdefault(size, [])
            if not self.open or len(lst) >= _KEEP_PER_SIZE:
                return False
            lst.append((buf, mem))
            return True

    def destroy(self):
        """Destroy the kept buffers (Device.close calls it, the device idle)."""
        with self.lock:
            self.open, entries, self.free = False, [e for lst in self.free.values() for e in lst], {}
        dev = getattr(self.device, "device", None)
        for buf, mem in entries if dev is not None else ():
            vk.vkDestroyBuffer(dev, buf, None)
            vk.vkFreeMemory(dev, mem, None)


class DeviceTensor:
    """A tensor in device memory: shape, dtype, name, device; numpy() reads it back."""

    def __init__(self, device, name: str, shape, dtype):
        self.device, self.name = device, name
        self.shape, self.dtype = tuple(int(d) for d in shape), np.dtype(dtype)
        self.nbytes = int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize
        self._cv = threading.Condition()
        self._uses, self._handles, self._closing = 0, set(), False
        self._with_device = False       # freed by its device's close()
        self._size = max(self.nbytes, 4)
        got = _Recycler.of(device).take(self._size)
        self.buffer, self._mem = got if got else device.buffer(self._size, _USAGE)[:2]
        device.tensors.add(self)

    @classmethod
    def from_numpy(cls, device, array, name: str = "tensor") -> "DeviceTensor":
        """Upload a host array into a new device tensor on `device`."""
        a = np.ascontiguousarray(array)
        with device.using():                    # the device does not close meanwhile
            t = cls(device, name, a.shape, a.dtype)
            try:
                t._transfer(a, upload=True)
            except BaseException:
                t.close()
                raise
        return t

    @property
    def closed(self) -> bool:
        return self.buffer is None or self._closing

    def __repr__(self):
        state = "closed" if self.closed else self.device.name
        return f"DeviceTensor({self.name!r}, shape={list(self.shape)}, dtype={self.dtype}, {state})"

    def numpy(self) -> np.ndarray:
        """Copy the tensor to a new host array (waits for the run that produced it)."""
        self.use()
        try:
            out = np.empty(self.shape, self.dtype)
            with self.device.using():           # the device does not close meanwhile
                self._transfer(out, upload=False)
            return out
        except GpucError as e:
            if self.device.closed:              # it closed since use(): say so as use() would
                raise self._closed_error() from None
            raise e
        finally:
            self.release(None)

    def _transfer(self, host, upload: bool):
        from gpuc.runtime import commands
        d = self.device
        if not self.nbytes:
            return
        sbuf, smem, ssize = d.buffer(self.nbytes, vk.VK_BUFFER_USAGE_TRANSFER_SRC_BIT
                                     | vk.VK_BUFFER_USAGE_TRANSFER_DST_BIT, MemoryKind.HOST)
        try:
            mapped = vk.vkMapMemory(d.device, smem, 0, ssize, 0)
            view = np.frombuffer(mapped, np.uint8, self.nbytes)
            if upload:
                view[:] = host.reshape(-1).view(np.uint8)
            regions = [vk.VkBufferCopy(srcOffset=0, dstOffset=0, size=self.nbytes)]
            src, dst = (sbuf, self.buffer) if upload else (self.buffer, sbuf)

            def rec(cmd):
                # after every earlier run on this queue (the producer's copy into this tensor)
                commands.barrier(cmd, commands.H | commands.T | commands.C, commands.T,
                                 vk.VK_ACCESS_HOST_WRITE_BIT | vk.VK_ACCESS_TRANSFER_WRITE_BIT
                                 | vk.VK_ACCESS_SHADER_WRITE_BIT, vk.VK_ACCESS_TRANSFER_READ_BIT
                                 | vk.VK_ACCESS_TRANSFER_WRITE_BIT)
                vk.vkCmdCopyBuffer(cmd, src, dst, 1, regions)
                commands.barrier(cmd, commands.T, commands.H | commands.T | commands.C,
                                 vk.VK_ACCESS_TRANSFER_WRITE_BIT, vk.VK_ACCESS_HOST_READ_BIT
                                 | vk.VK_ACCESS_TRANSFER_READ_BIT | commands.RW)
            d.one_shot(rec)
            if not upload:
                host.reshape(-1).view(np.uint8)[:] = view
            vk.vkUnmapMemory(d.device, smem)
        finally:
            vk.vkDestroyBuffer(d.device, sbuf, None)
            vk.vkFreeMemory(d.device, smem, None)

    # -- use by runs (runtime/batch.py, runtime/iospec.py) ----------------------------------------
    def _closed_error(self) -> GpucError:
        if self._with_device or self.device.closed:
            return GpucError(f"device tensor {self.name!r} is closed: its device was closed, and every model "
                             "on it (model is closed)")
        return GpucError(f"device tensor {self.name!r} is closed")

    def check_usable(self, device, spec):
        """Raise unless this tensor can be the input `spec` of a model on `device`."""
        if self.closed:
            raise GpucError(f"input {spec.name!r}: {self._closed_error()}")
        if self.device is not device:
            raise GpucError(f"input {spec.name!r}: device tensor {self.name!r} lives on another device "
                            f"({self.device.name}); load both bundles with one Device (gpuc.load(..., device=dev))")
        if self.dtype != spec.dtype:
            raise GpucError(f"input {spec.name!r}: expected dtype {spec.dtype}, got a device tensor of "
                            f"{self.dtype} (device tensors are not converted)")

    def use(self):
        """A run starts reading or writing this tensor (close() waits until it is released)."""
        with self._cv:
            if self.closed:
                raise self._closed_error()
            self._uses += 1

    def register(self, handle):
        """The run using this tensor is `handle` (close() waits for it)."""
        with self._cv:
            self._handles.add(handle)

    def release(self, handle):
        """The run `handle` (None: a run that never started) is done with this tensor."""
        with self._cv:
            self._uses -= 1
            self._handles.discard(handle)
            self._cv.notify_all()

    # -- lifetime --------------------------------------------------------------------------------
    def close(self) -> None:
        """Free the buffer once the runs reading it have finished (waits for them)."""
        with self._cv:
            if self.buffer is None:
                return
            self._closing = True
        while True:
            with self._cv:
                if not self._uses:
                    break
                handles = list(self._handles)
                if not handles:
                    self._cv.wait(0.01)          # a run is being submitted; it registers or gives up
                    continue
            for h in handles:
                try:
                    h.wait()
                except GpuTimeoutError:
                    raise               # the run still uses the buffer: the tensor stays open
                except Exception:  # noqa: BLE001 - its own caller sees the error
                    with self._cv:
                        self._handles.discard(h)
        self._free(recycle=True)

    def destroy(self) -> None:
        """Free the buffer now, without waiting for runs (Device.close calls it, the device idle: its
        models are closed and no transfer is in progress)."""
        self._with_device = True
        self._free()

    def _free(self, recycle=False):
        """Release the buffer (no run uses it): to the device's recycler, or destroy it."""
        with self._cv:
            buf, mem, self.buffer, self._mem = self.buffer, self._mem, None, None
        dev = getattr(self.device, "device", None)
        if buf is not None and dev is not None:
            if not (recycle and _Recycler.of(self.device).give(self._size, buf, mem)):
                vk.vkDestroyBuffer(dev, buf, None)
                vk.vkFreeMemory(dev, mem, None)
        self.device.tensors.discard(self)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            if self.buffer is not None and not self._uses:
                self._free(recycle=True)
        except Exception:  # noqa: BLE001
            pass
