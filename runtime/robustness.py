"""Robust mode (`gpuc.open_device(robust=True)`, `gpuc.load(..., robust=True)`, `--robust`): the device
bounds every buffer access of every kernel to the range bound to it, for bundles from sources that
are not trusted.  Load already refuses a bundle whose dispatch table disagrees with its kernels
(runtime/bundle_shaders.py); robust mode also covers a kernel whose code itself is hostile.

robustBufferAccess (core Vulkan 1.0) keeps an out-of-range access inside the buffer; where the
device has VK_EXT_robustness2's robustBufferAccess2, out-of-range reads return zero and writes are
dropped, measured against the exact range of each binding (every tensor is bound at its own offset
and size: runtime/descriptors.py).
"""
from __future__ import annotations

import vulkan as vk

from gpuc.errors import DeviceError


def enable(device, tail):
    """(VkPhysicalDeviceFeatures with robustBufferAccess, the pNext chain head ending in `tail`,
    extensions to enable) for vkCreateDevice; sets device.robust_features to what was enabled.
    DeviceError where the device has no robustBufferAccess."""
    have = vk.vkGetPhysicalDeviceFeatures(device.physical)
    if not have.robustBufferAccess:
        raise DeviceError(f"device {device.name!r} has no robustBufferAccess: robust mode is not available there")
    device.robust_features = ["robustBufferAccess"]
    core = vk.VkPhysicalDeviceFeatures(robustBufferAccess=vk.VK_TRUE)
    exts = {e.extensionName for e in vk.vkEnumerateDeviceExtensionProperties(device.physical, None)}
    if vk.VK_EXT_ROBUSTNESS_2_EXTENSION_NAME not in exts or device.props.apiVersion < vk.VK_MAKE_VERSION(1, 1, 0):
        return core, tail, []
    q = vk.VkPhysicalDeviceRobustness2FeaturesEXT()
    vk.vkGetPhysicalDeviceFeatures2(device.physical, vk.VkPhysicalDeviceFeatures2(pNext=q))
    if not q.robustBufferAccess2:
        return core, tail, []
    device.robust_features.append("robustBufferAccess2")
    on = vk.VkPhysicalDeviceRobustness2FeaturesEXT(pNext=tail, robustBufferAccess2=vk.VK_TRUE)
    device._robust_keep = on                # alive until vkCreateDevice returns (and beyond: harmless)
    return core, on, [vk.VK_EXT_ROBUSTNESS_2_EXTENSION_NAME]
