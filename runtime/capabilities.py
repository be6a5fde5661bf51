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
- `coopmat2`: with `coopmat`, VK_NV_cooperative_matrix2's workgroup-scope, flexible-dimension and
  tensor-addressing features: its flexible-dimension entries for float16*float16+float32->float32 at
  workgroup scope as (M, N, K granularity, workgroup invocations), `coopmat2_max_dim` and
  `coopmat2_per_element` (its per-element operations, enabled where present); otherwise empty.  (The
  `vulkan` binding predates the extension: its structs are laid out here by hand.)
- `host_import_align`: VK_EXT_external_memory_host's import alignment (0: none), for run() inputs
  the GPU reads from the caller's memory (runtime/host_import.py; no kernel requires it).

Requirement vocabulary (a JSON object; every key must hold):
  {"subgroup_arithmetic": true}                      subgroupAdd/Max/Min/Mul in compute shaders
  {"subgroup_size": 32}                              the device's (default) subgroup size
  {"cooperative_matrix": [16, 16, 16, "float16", "float16", "float32", "float32"]}
                                                     an M x N x K subgroup-scope entry with those
                                                     A, B, C and result component types
  {"cooperative_matrix2": [BM, BN, BK, invocations]} a workgroup-scope float16*float16+float32 entry
                                                     for that many invocations whose granularities
                                                     divide BM x BN x BK, all within the max dimension
  {"cooperative_matrix2_per_element": true}          VK_NV_cooperative_matrix2's per-element operations
  {"fp16_storage": true}                             16-bit storage buffers
  {"integer_dot_product": true}                      VK_KHR_shader_integer_dot_product (packed 4 x int8 dots)
  {"shared_memory": 49152}                           at least that many bytes of shared memory per
                                                     workgroup (maxComputeSharedMemorySize)
`missing(requires, device)` names the first unmet key (None when all hold).

GPUC_DISABLE_COOPMAT=1 / GPUC_DISABLE_COOPMAT2=1 / GPUC_DISABLE_SUBGROUP_OPS=1 act as a device without them
(tests, A/B timing).
"""
from __future__ import annotations

import vulkan as vk

from gpuc.runtime import settings, validation

_COMPONENT = {getattr(vk, f"VK_COMPONENT_TYPE_{n.upper()}_KHR", None): n
              for n in ("float16", "float32", "float64", "sint8", "sint16", "sint32", "sint64",
                        "uint8", "uint16", "uint32", "uint64")}


def _off(field: str) -> bool:
    """A device capability the settings switch off (runtime/settings.py: disable_*)."""
    return getattr(settings.current(), field)


def _subgroup(dev) -> None:
    dev.subgroup_size, dev.subgroup_ops = 1, 0
    if dev.props.apiVersion < vk.VK_MAKE_VERSION(1, 1, 0):
        return
    sp = vk.VkPhysicalDeviceSubgroupProperties()
    vk.vkGetPhysicalDeviceProperties2(dev.physical, vk.VkPhysicalDeviceProperties2(pNext=sp))
    dev.subgroup_size = int(sp.subgroupSize)
    if sp.supportedStages & vk.VK_SHADER_STAGE_COMPUTE_BIT and not _off("disable_subgroup_ops"):
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
    if _off("disable_float_controls") or name not in exts:
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
    head, keep0, names0 = _int_dot(dev, exts, tail)
    head, keep, names = _coopmat(dev, exts, head)
    head, keep2, names2 = _coopmat2(dev, exts, head)
    return head, keep0 + keep + keep2, names0 + names + names2 + _float_controls(dev, exts) + _host_import(dev, exts)


def _host_import(dev, exts) -> list:
    """dev.host_import_align: VK_EXT_external_memory_host's minImportedHostPointerAlignment where the
    device has the extension (enabled then: run() inputs read from the caller's memory,
    runtime/host_import.py), else 0."""
    dev.host_import_align = 0
    name = vk.VK_EXT_EXTERNAL_MEMORY_HOST_EXTENSION_NAME
    if name not in exts:
        return []
    hp = vk.VkPhysicalDeviceExternalMemoryHostPropertiesEXT()
    vk.vkGetPhysicalDeviceProperties2(dev.physical, vk.VkPhysicalDeviceProperties2(pNext=hp))
    align = int(hp.minImportedHostPointerAlignment)
    if align <= 0 or align & (align - 1):
        return []
    dev.host_import_align = align
    return [name]


def _int_dot(dev, exts, tail):
    """dev.int_dot: VK_KHR_shader_integer_dot_product's shaderIntegerDotProduct (the 4 x int8 packed dot
    products of the native int8 kernels, compiler/ops/int8_conv.py), enabled where present."""
    dev.int_dot = False
    name = "VK_KHR_shader_integer_dot_product"
    if name not in exts:
        return tail, [], []
    f = vk.VkPhysicalDeviceShaderIntegerDotProductFeatures()
    vk.vkGetPhysicalDeviceFeatures2(dev.physical, vk.VkPhysicalDeviceFeatures2(pNext=f))
    if not f.shaderIntegerDotProduct:
        return tail, [], []
    dev.int_dot = True
    on = vk.VkPhysicalDeviceShaderIntegerDotProductFeatures(pNext=tail, shaderIntegerDotProduct=vk.VK_TRUE)
    return on, [on], [name]


def _coopmat(dev, exts, tail):
    dev.coopmat = []
    if _off("disable_coopmat") or _off("disable_fp16") or not validation.layer_knows_cooperative_matrix():
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


# VK_NV_cooperative_matrix2 (extension 594): structure types and layouts as uint32 words (sType, 4 pad
# bytes, pNext, then the members); VkBool32, VkComponentTypeKHR and VkScopeKHR are 32-bit.
NV_CM2 = "VK_NV_cooperative_matrix2"
_CM2_FEATURES, _CM2_FLEX, _CM2_PROPS = 1000593000, 1000593001, 1000593002
_CM2_WORDS = {_CM2_FEATURES: 4 + 7, _CM2_FLEX: 4 + 10, _CM2_PROPS: 4 + 3}
_WG_SCOPE = 2                        # VK_SCOPE_WORKGROUP_KHR
_FLEX_TYPES = ("float16", "float16", "float32", "float32")


def _raw(stype: int, count: int = 1):
    words = _CM2_WORDS[stype]
    raw = vk.ffi.new("uint32_t[]", words * count)
    for i in range(count):
        raw[i * words] = stype
    return raw


def _coopmat2(dev, exts, tail):
    dev.coopmat2, dev.coopmat2_max_dim, dev.coopmat2_per_element = [], 0, False
    if not dev.coopmat or NV_CM2 not in exts or _off("disable_coopmat2"):
        return tail, [], []
    feats = _raw(_CM2_FEATURES)
    vk.vkGetPhysicalDeviceFeatures2(dev.physical, vk.VkPhysicalDeviceFeatures2(pNext=feats))
    workgroup_scope, flexible, tensor_addressing = feats[4], feats[5], feats[9]
    if not (workgroup_scope and flexible and tensor_addressing):
        return tail, [], []
    props = _raw(_CM2_PROPS)
    vk.vkGetPhysicalDeviceProperties2(dev.physical, vk.VkPhysicalDeviceProperties2(pNext=props))
    pfn = vk.lib.vkGetInstanceProcAddr(dev.instance, b"vkGetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV")
    if pfn == vk.ffi.NULL:
        return tail, [], []
    fn = vk.ffi.cast("VkResult(*)(VkPhysicalDevice, uint32_t*, void*)", pfn)
    count = vk.ffi.new("uint32_t*")
    if fn(dev.physical, count, vk.ffi.NULL) != vk.VK_SUCCESS or not count[0]:
        return tail, [], []
    arr = _raw(_CM2_FLEX, count[0])
    if fn(dev.physical, count, arr) not in (vk.VK_SUCCESS, vk.VK_INCOMPLETE):
        return tail, [], []
    w = _CM2_WORDS[_CM2_FLEX]
    for i in range(count[0]):
        e = [arr[i * w + j] for j in range(4, w)]    # M, N, K granularity, A, B, C, result, saturating, scope, invocations
        if e[8] == _WG_SCOPE and not e[7] and tuple(_COMPONENT.get(t, str(t)) for t in e[3:7]) == _FLEX_TYPES:
            dev.coopmat2.append((int(e[0]), int(e[1]), int(e[2]), int(e[9])))
    dev.coopmat2_max_dim = int(props[5])
    if not dev.coopmat2:
        return tail, [], []
    on = _raw(_CM2_FEATURES)
    on[4] = on[5] = on[9] = vk.VK_TRUE
    dev.coopmat2_per_element = bool(feats[8])          # per-element operations (gemm_cm2's activations)
    on[8] = feats[8]
    if tail is not None:
        vk.ffi.cast("VkBaseOutStructure*", on).pNext = vk.ffi.cast("VkBaseOutStructure*", vk.ffi.addressof(tail))
    return on, [on, tail], [NV_CM2]


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
        elif key == "cooperative_matrix2":
            bm, bn, bk, inv = (int(v) for v in want)
            ok = [e for e in getattr(dev, "coopmat2", []) if e[3] == inv and not (bm % e[0] or bn % e[1] or bk % e[2])]
            if not ok or max(bm, bn, bk) > getattr(dev, "coopmat2_max_dim", 0):
                return (f"no {NV_CM2} workgroup-scope {bm}x{bn}x{bk} float16 entry for {inv} invocations"
                        if getattr(dev, "coopmat2", []) else f"no {NV_CM2}")
        elif key == "cooperative_matrix2_per_element":
            if want and not getattr(dev, "coopmat2_per_element", False):
                return f"no {NV_CM2} per-element operations"
        elif key == "shared_memory":
            have = int(getattr(getattr(dev, "limits", None), "maxComputeSharedMemorySize", 0) or 0)
            if have < int(want):
                return f"{have} bytes of shared memory per workgroup, not {int(want)}"
        elif key == "integer_dot_product":
            if want and not getattr(dev, "int_dot", False):
                return "no VK_KHR_shader_integer_dot_product"
        elif key == "fp16_storage":
            if want and not getattr(dev, "fp16_storage", False):
                return "no 16-bit storage buffers"
        else:
            return f"unknown capability {key!r} (bundle from a newer gpuc?)"
    return None
