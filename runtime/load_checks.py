"""The bundle against the device it is loaded on, before any Vulkan object is made for it (the
device-free checks are bundle.validate's): workgroup counts and sizes, shared memory, push-constant
bytes, and every binding's range within the device's limits.  One BundleError naming the dispatch and the limit."""
from __future__ import annotations

from gpuc.errors import BundleError


def largest_binding(dispatches, tensors) -> tuple:
    """(bytes, dispatch, slot) of the largest range any dispatch binds ((0, -1, -1) for none); the first
    such binding where several tie (the compiler's max_binding_bytes check uses it too)."""
    best = (0, -1, -1)
    for j, d in enumerate(dispatches):
        for slot, ti in enumerate(d.bindings):
            if tensors[ti].nbytes > best[0]:
                best = (tensors[ti].nbytes, j, slot)
    return best


def check(bundle, device) -> None:
    lim = device.limits
    counts = [int(x) for x in lim.maxComputeWorkGroupCount]
    sizes = [int(x) for x in lim.maxComputeWorkGroupSize]
    for j, s in enumerate(bundle.shaders):
        f = bundle.interfaces[j] if j < len(bundle.interfaces) else None
        if f is not None and (any(a > b for a, b in zip(f.local_size, sizes))
                              or f.invocations > int(lim.maxComputeWorkGroupInvocations)):
            raise BundleError(f"shader {j} ({s.name}) has workgroup size {list(f.local_size)}, over device "
                              f"{device.name!r}'s limits ({sizes}, {int(lim.maxComputeWorkGroupInvocations)} "
                              "invocations)")
        smem = getattr(lim, "maxComputeSharedMemorySize", None)
        if f is not None and smem is not None and f.shared_bytes > int(smem):   # (a driver may lose the device)
            raise BundleError(f"shader {j} ({s.name}) takes at least {f.shared_bytes} bytes of shared memory, over "
                              f"device {device.name!r}'s maxComputeSharedMemorySize ({int(smem)})")
        if s.push_bytes > int(lim.maxPushConstantsSize):
            raise BundleError(f"shader {j} ({s.name}) pushes {s.push_bytes} bytes, over device {device.name!r}'s "
                              f"maxPushConstantsSize ({int(lim.maxPushConstantsSize)})")
    for j, d in enumerate(bundle.dispatches):
        if any(g > c for g, c in zip(d.groups, counts)):
            raise BundleError(f"dispatch {j} ({d.label}) has workgroup counts {list(d.groups)}, over device "
                              f"{device.name!r}'s maxComputeWorkGroupCount {counts}")
    size, j, slot = largest_binding(bundle.dispatches, bundle.tensors)
    limit = int(lim.maxStorageBufferRange)
    if size > limit:
        d = bundle.dispatches[j]
        t = bundle.tensors[d.bindings[slot]]
        raise BundleError(f"dispatch {j} ({d.label}) binds tensor {t.name!r} of {size} bytes, over device "
                          f"{device.name!r}'s maxStorageBufferRange ({limit} bytes): this device cannot run it "
                          f"(`gpuc compile --max-binding-bytes {limit}` checks a model against that limit)")
