"""gpuc runtime: loads bundles and runs them with Vulkan.  Never imports the compiler."""
from __future__ import annotations

import os
import time

from gpuc.errors import GpucError


MAP_BYTES = 256 << 20      # read_bundle_file(map_large=True) maps a regular file this large instead of reading it


def read_bundle_file(bundle, map_large: bool = False):
    """bytes, bytearray, memoryview, or a path -> bytes.  map_large: a regular file of MAP_BYTES or more
    comes back as a read-only memory map (read_bundle reads it in place; the weights are views of it, so
    a model's weights are never held twice in host memory); such a file must not be rewritten in place
    while it is loaded (gpuc writes bundles by atomic rename, which is safe)."""
    import mmap
    if isinstance(bundle, (bytes, bytearray, memoryview)):
        return bytes(bundle)
    if isinstance(bundle, mmap.mmap):              # (mapped by gpuc.load)
        return bundle if map_large else bundle[:]
    try:
        with open(os.fspath(bundle), "rb") as f:
            if map_large:
                import stat
                st = os.fstat(f.fileno())
                if stat.S_ISREG(st.st_mode) and st.st_size >= MAP_BYTES:
                    return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
            return f.read()
    except OSError as e:
        raise GpucError(f"cannot read bundle {os.fspath(bundle)!r}: {e.strerror}") from None


def load(bundle, device=None, timeout_s=None, robust=False):
    """Load a bundle (path or bytes) and return a ready-to-run LoadedModel.  In a process that has
    no device open yet, the driver's start-up runs in a thread while the bundle is read and checked.
    timeout_s: how long a run may take on the GPU (LoadedModel.timeout_s; 0: no limit; None: the
    default, GPUC_GPU_TIMEOUT_S, else 60 s on a GPU and no limit on a CPU implementation).
    robust: robust buffer access (runtime/robustness.py); with an explicit device, that device's."""
    from gpuc.runtime.bundle import read_bundle
    from gpuc.runtime.device import Device
    from gpuc.runtime.executor import LoadedModel
    t0 = time.perf_counter()
    if isinstance(device, Device) and robust and not device.robust:
        raise GpucError("robust=True: the device given was opened without robust=True (gpuc.open_device(robust=True))")
    opener = None if isinstance(device, Device) else prewarm(device, robust)
    try:
        b = read_bundle(read_bundle_file(bundle, map_large=True))
    except BaseException:
        if opener is not None:
            opener.error()                 # let the open finish; the bundle's problem is the one reported
        raise
    t1 = time.perf_counter()
    dev = opener.result() if opener is not None else device
    t2 = time.perf_counter()
    m = LoadedModel(b, device=dev, timeout_s=timeout_s)
    m.load_info["steps_ms"] = {"bundle": round((t1 - t0) * 1e3, 3), "device_wait": round((t2 - t1) * 1e3, 3),
                               **m.load_info["steps_ms"]}
    return m


def prewarm(device=None, robust=False):
    """Start opening the process's shared device (the driver's start-up, ~150 ms on the H100) in a
    background thread and return at once: call it early (before other imports, before reading
    inputs) and the next load() finds the device open or nearly so.  Errors are not raised here:
    load() reports them."""
    from gpuc.runtime.device import shared_device
    from gpuc.runtime.overlap import Background
    return Background(shared_device, device, robust, name="gpuc-prewarm")
