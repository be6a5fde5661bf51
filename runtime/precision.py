"""Which program of a bundle runs on a device: `--precision fp16` bundles store tensors as float16
and need 16-bit storage buffers (VkPhysicalDevice16BitStorageFeatures.storageBuffer16BitAccess);
they carry the complete fp32 program as `fallback`, run (with one warning) where that is missing."""
from __future__ import annotations

import warnings

from gpuc.errors import DeviceError


def needs_fp16_storage(bundle) -> bool:
    return any(t.dtype == "float16" for t in bundle.tensors)


def select_program(bundle, device, info: dict | None = None, model_class=None):
    """`bundle`, or its fp32 fallback when `device` cannot load/store float16 buffers; then each
    dispatch's variant chosen for `device` (runtime/variants.py), by measurement where the bundle
    asks for it (runtime/tuning.py; `info`: the load's record of it; `model_class`: what loads the
    candidate programs to time them, the caller's LoadedModel class)."""
    if not needs_fp16_storage(bundle) or getattr(device, "fp16_storage", False):
        return _resolved(bundle, device, info, model_class)
    if not bundle.fallback:
        raise DeviceError(f"this bundle stores tensors as float16, but device {device.name!r} has no 16-bit "
                          "storage buffers; recompile it with --precision fp32")
    from gpuc.runtime.bundle import read_bundle
    warnings.warn(f"device {device.name!r} has no 16-bit storage buffers: running the fp32 program of this "
                  "fp16 bundle", RuntimeWarning, stacklevel=3)
    return _resolved(read_bundle(bundle.fallback), device, info, model_class)


def _resolved(bundle, device, info, model_class):
    from gpuc.runtime import tuning
    from gpuc.runtime.variants import resolve
    return resolve(bundle, device, choice=tuning.choose(bundle, device, info, model_class=model_class))
