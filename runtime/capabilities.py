"""Optional device capabilities that kernel variants need, and the one check of a requirement.

A bundle's dispatch may carry *variants* (runtime/variants.py): the same computation through a
hardware path (cooperative matrices, subgroup arithmetic) with a `requires` dict.  This module
queries those capabilities once per Device and enables them at device creation:

- `subgroup_size`, `subgroup_ops` (VkPhysicalDeviceSubgroupProperties, compute stage only);
- `coopmat`: the VkCooperativeMatrixPropertiesKHR entries (M, N, K, A, B, C, result type names,
  subgroup scope only) when VK_KHR_cooperative_matrix + its `cooperativeMatrix` feature (and
  compute among its cooperativeMatrixSupportedStages),
  VK_KHR_vulkan_memory_model (the cooperative-matrix SPIR-V uses the Vulkan memory model) and
  shaderFloat16 + 16-bit storage buffers are all present; otherwise empty.

Requirement vocabulary (a JSON object; every key must hold):
  {"subgroup_arithmetic": true}                      subgroupAdd/Max/Min/Mul in compute shaders
  {"subgroup_size": 32}                              the device's (default) subgroup size
  {"cooperative_matrix": [16, 16, 16, "float16", "float16", "float32", "float32"]}
                                                     an M x N x K subgroup-scope entry with those
                                                     A, B, C and result component types
  {"fp16_storage": true}                             16-bit storage buffers
  {"shared_memory": 49152}                           at least that many bytes of shared memory per
                                                     workgroup (maxComputeSharedMemorySize)
`missing(requires, device)` names the first unmet key (None when all hold).

GPUC_DISABLE_COOPMAT=1 / GPUC_DISABLE_SUBGROUP_OPS=1 act as a device without them (tests, A/B timing).
"""
from __future__ import annotations

import os

import vulkan as vk

from gpuc.runtime import validation

_COMPONENT = {getattr(vk, f"VK_COMPONENT_TYPE_{n.upper()}_KHR", None): n
              for n in ("float16", "float32", "float64", "sint8", "sint16", "sint32", "sint64",
                        "uint8", "uint16", "uint32", "uint64")}


def _off(var: str) -> bool:
    return os.environ.get(var, "") not in ("", "0")


def _subgroup(dev) -> None:
    dev.subgroup_size, dev.subgroup_ops = 1, 0
    if dev.props.apiVersion < vk.VK_MAKE_VERSION(1, 1, 0):
        return
    sp = vk.VkPhysicalDeviceSubgroupProperties()
    vk.vkGetPhysicalDeviceProperties2(dev.physical, vk.VkPhysicalDeviceProperties2(pNext=sp))
    dev.subgroup_size = int(sp.subgroupSize)
    if sp.supportedStages & vk.VK_SHADER_STAGE_COMPUTE_BIT and not _off("GPUC_DISABLE_SUBGROUP_OPS"):
        dev.subgroup_ops = int(sp.supportedOperations)


def _coopmat_entries(dev) -> list:
    pfn = vk.lib.vkGetInstanceProcAddr(dev.instance, b"vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR")
    if pfn == vk.ffi.NULL:
        return []
    fn = vk.ffi.cast("PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR", pfn)
    count = vk.ffi.new("uint32_t*")
    if fn(dev.physical, count, vk.ffi.NULL) != vk.VK_SUCCESS or not count[0]:
        return []
    arr = vk.ffi.new("VkCooperativeMatrixPropertiesKHR[]", count[0])
    for i in range(count[0]):
        arr[i].sType = vk.VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_KHR
    if fn(dev.physical, count, arr) not in (vk.VK_SUCCESS, vk.VK_INCOMPLETE):
        return []
    out = []
    for i in range(count[0]):
        p = arr[i]
        if p.scope != vk.VK_SCOPE_SUBGROUP_KHR:
            continue
        types = tuple(_COMPONENT.get(t, str(t)) for t in (p.AType, p.BType, p.CType, p.ResultType))
        out.append((int(p.MSize), int(p.NSize), int(p.KSize)) + types)
    return out


def _float_controls(dev, exts) -> list:
    """dev.nan_preserve_widths: the float widths whose SignedZeroInfNanPreserve the device supports
    (runtime/spirv.py takes the mode out of shaders for the others).  Returns the extension to enable.
    GPUC_DISABLE_FLOAT_CONTROLS=1 acts as a device without VK_KHR_shader_float_controls."""
    dev.nan_preserve_widths = set()
    name = vk.VK_KHR_SHADER_FLOAT_CONTROLS_EXTENSION_NAME
    if _off("GPUC_DISABLE_FLOAT_CONTROLS") or name not in exts:
        return []
    fc = vk.VkPhysicalDeviceFloatControlsProperties()
    vk.vkGetPhysicalDeviceProperties2(dev.physical, vk.VkPhysicalDeviceProperties2(pNext=fc))
    dev.nan_preserve_widths = {w for w, ok in ((16, fc.shaderSignedZeroInfNanPreserveFloat16),
                                               (32, fc.shaderSignedZeroInfNanPreserveFloat32)) if ok}
    return [name]


def enable(dev, tail=None):
    """Query the optional capabilities of `dev` (a runtime.device.Device being created: physical,
    instance, props set) into dev.subgroup_size / subgroup_ops / coopmat / nan_preserve_widths.
    Returns (pNext chain head or `tail`, structs to keep alive until vkCreateDevice returns, extension
    names to enable)."""
    _subgroup(dev)
    exts = ({e.extensionName for e in vk.vkEnumerateDeviceExtensionProperties(dev.physical, None)}
            if dev.props.apiVersion >= vk.VK_MAKE_VERSION(1, 1, 0) else set())
    head, keep, names = _coopmat(dev, exts, tail)
    return head, keep, names + _float_controls(dev, exts)


def _coopmat(dev, exts, tail):
    dev.coopmat = []
    if _off("GPUC_DISABLE_COOPMAT") or _off("GPUC_DISABLE_FP16") or not validation.layer_knows_cooperative_matrix():
        return tail, [], []
    need = (vk.VK_KHR_COOPERATIVE_MATRIX_EXTENSION_NAME, vk.VK_KHR_VULKAN_MEMORY_MODEL_EXTENSION_NAME,
            vk.VK_KHR_SHADER_FLOAT16_INT8_EXTENSION_NAME)
    if not all(e in exts for e in need):
        return tail, [], []
    cm = vk.VkPhysicalDeviceCooperativeMatrixFeaturesKHR()
    mm = vk.VkPhysicalDeviceVulkanMemoryModelFeatures(pNext=cm)
    f16 = vk.VkPhysicalDeviceShaderFloat16Int8Features(pNext=mm)
    s16 = vk.VkPhysicalDevice16BitStorageFeatures(pNext=f16)
    vk.vkGetPhysicalDeviceFeatures2(dev.physical, vk.VkPhysicalDeviceFeatures2(pNext=s16))
    if not (cm.cooperativeMatrix and mm.vulkanMemoryModel and f16.shaderFloat16 and s16.storageBuffer16BitAccess):
        return tail, [], []
    cprops = vk.VkPhysicalDeviceCooperativeMatrixPropertiesKHR()
    vk.vkGetPhysicalDeviceProperties2(dev.physical, vk.VkPhysicalDeviceProperties2(pNext=cprops))
    entries = _coopmat_entries(dev)
    if not entries or not cprops.cooperativeMatrixSupportedStages & vk.VK_SHADER_STAGE_COMPUTE_BIT:
        return tail, [], []
    dev.coopmat = entries
    on_cm = vk.VkPhysicalDeviceCooperativeMatrixFeaturesKHR(pNext=tail, cooperativeMatrix=vk.VK_TRUE)
    on_mm = vk.VkPhysicalDeviceVulkanMemoryModelFeatures(pNext=on_cm, vulkanMemoryModel=vk.VK_TRUE)
    return on_mm, [on_mm, on_cm], list(need[:2])


def missing(requires: dict, dev) -> str | None:
    """The first requirement `dev` does not meet, in words; None when it meets them all."""
    try:
        return _missing(requires, dev)
    except (TypeError, ValueError) as e:
        return f"a malformed requirement {requires!r} ({e})"


def _missing(requires: dict, dev) -> str | None:
    for key, want in sorted((requires or {}).items()):
        if key == "subgroup_arithmetic":
            if want and not getattr(dev, "subgroup_ops", 0) & vk.VK_SUBGROUP_FEATURE_ARITHMETIC_BIT:
                return "no subgroup arithmetic in compute shaders"
        elif key == "subgroup_size":
            if getattr(dev, "subgroup_size", 0) != int(want):
                return f"subgroup size {getattr(dev, 'subgroup_size', 0)}, not {int(want)}"
        elif key == "cooperative_matrix":
            want_t = tuple(want)
            if want_t not in [tuple(e) for e in getattr(dev, "coopmat", [])]:
                m, n, k, a, b, c, r = want_t
                return (f"no VK_KHR_cooperative_matrix {m}x{n}x{k} {a}*{b}+{c}->{r} (subgroup scope)"
                        if getattr(dev, "coopmat", []) else "no VK_KHR_cooperative_matrix")
        elif key == "shared_memory":
            have = int(getattr(getattr(dev, "limits", None), "maxComputeSharedMemorySize", 0) or 0)
            if have < int(want):
                return f"{have} bytes of shared memory per workgroup, not {int(want)}"
        elif key == "fp16_storage":
            if want and not getattr(dev, "fp16_storage", False):
                return "no 16-bit storage buffers"
        else:
            return f"unknown capability {key!r} (bundle from a newer gpuc?)"
    return None
