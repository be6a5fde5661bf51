"""Which program of a bundle runs on a device: `--precision fp16` bundles store tensors as float16
and need 16-bit storage buffers (VkPhysicalDevice16BitStorageFeatures.storageBuffer16BitAccess);
they carry the complete fp32 program as `fallback`, run (with one warning) where that is missing."""
from __future__ import annotations

import warnings

from gpuc.errors import DeviceError


def needs_fp16_storage(bundle) -> bool:
    return any(t.dtype == "float16" for t in bundle.tensors)


def select_program(bundle, device):
    """`bundle`, or its fp32 fallback when `device` cannot load/store float16 buffers; then each
    dispatch's variant chosen for `device` (runtime/variants.py)."""
    from gpuc.runtime.variants import resolve
    if not needs_fp16_storage(bundle) or getattr(device, "fp16_storage", False):
        return resolve(bundle, device)
    if not bundle.fallback:
        raise DeviceError(f"this bundle stores tensors as float16, but device {device.name!r} has no 16-bit "
                          "storage buffers; recompile it with --precision fp32")
    from gpuc.runtime.bundle import read_bundle
    warnings.warn(f"device {device.name!r} has no 16-bit storage buffers: running the fp32 program of this "
                  "fp16 bundle", RuntimeWarning, stacklevel=3)
    return resolve(read_bundle(bundle.fallback), device)
