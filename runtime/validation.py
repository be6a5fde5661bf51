"""GPUC_VALIDATION=1: enable VK_LAYER_KHRONOS_validation with a debug messenger that records
every warning and error.  Tests fail on any recorded message (tests/conftest.py)."""
from __future__ import annotations

import vulkan as vk

from gpuc.errors import DeviceError
from gpuc.runtime import settings

LAYER = "VK_LAYER_KHRONOS_validation"
MESSAGES: list[str] = []


def enabled() -> bool:
    return settings.current().validation


def instance_layers_and_extensions():
    if not enabled():
        return [], []
    layers = [p.layerName for p in vk.vkEnumerateInstanceLayerProperties()]
    if LAYER not in layers:
        raise DeviceError(f"GPUC_VALIDATION=1 but {LAYER} is not installed "
                          "(Debian: apt-get install vulkan-validationlayers)")
    return [LAYER], [vk.VK_EXT_DEBUG_UTILS_EXTENSION_NAME]


def layer_version() -> int:
    """specVersion of the installed validation layer (0 when validation is off or it is missing)."""
    if not enabled():
        return 0
    return max([p.specVersion for p in vk.vkEnumerateInstanceLayerProperties() if p.layerName == LAYER] or [0])


def layer_knows_cooperative_matrix() -> bool:
    """VK_KHR_cooperative_matrix came with Vulkan headers 1.3.255: an older layer (Debian 12 ships
    1.3.239) reports its structures as unknown, so with validation on gpuc leaves the extension off."""
    return not enabled() or layer_version() >= vk.VK_MAKE_VERSION(1, 3, 255)


def _callback(severity, types, data, user):
    text = vk.ffi.string(data.pMessage).decode(errors="replace")
    MESSAGES.append(text)
    return vk.VK_FALSE


def attach(instance):
    """Create the debug messenger; returns a destroy() callable (a no-op when disabled)."""
    if not enabled():
        return lambda: None
    create = vk.vkGetInstanceProcAddr(instance, "vkCreateDebugUtilsMessengerEXT")
    destroy = vk.vkGetInstanceProcAddr(instance, "vkDestroyDebugUtilsMessengerEXT")
    info = vk.VkDebugUtilsMessengerCreateInfoEXT(
        messageSeverity=vk.VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT
        | vk.VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT,
        messageType=vk.VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT
        | vk.VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT
        | vk.VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT,
        pfnUserCallback=_callback)
    messenger = create(instance, info, None)
    return lambda: destroy(instance, messenger, None)
