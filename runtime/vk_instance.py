"""Opening Vulkan, below Device (runtime/device.py): the instance (with the validation layer's
messenger where GPUC_VALIDATION=1), the physical devices listed and ranked (discrete GPU first) and
chosen (runtime/device_select.py), and Vulkan's errors raised as one DeviceError naming what failed
(`vk_call` around a wrapped call, `vk_check` on a VkResult of a direct vk.lib call)."""
from __future__ import annotations

import vulkan as vk

from gpuc.errors import DeviceError
from gpuc.runtime import device_select, validation

_TYPE_RANK = {vk.VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: 0, vk.VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: 1,
              vk.VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: 2, vk.VK_PHYSICAL_DEVICE_TYPE_CPU: 3,
              vk.VK_PHYSICAL_DEVICE_TYPE_OTHER: 4}
_TYPE_NAME = {0: "discrete GPU", 1: "integrated GPU", 2: "virtual GPU", 3: "CPU", 4: "other"}


def type_name(device_type) -> str:
    """"discrete GPU", "CPU", ... for a VkPhysicalDeviceType."""
    return _TYPE_NAME[_TYPE_RANK.get(device_type, 4)]


def vk_call(what, fn, *args):
    """fn(*args), with Vulkan's out-of-memory and device-lost errors as a DeviceError saying `what` failed."""
    try:
        return fn(*args)
    except vk.VkErrorOutOfDeviceMemory:
        raise DeviceError(f"{what}: out of device memory; try a smaller model or batch") from None
    except vk.VkErrorOutOfHostMemory:
        raise DeviceError(f"{what}: out of host memory") from None
    except vk.VkErrorDeviceLost:
        raise DeviceError(f"{what}: the Vulkan device was lost (driver reset or GPU fault); reload the model") from None


def vk_check(what, result):
    """Raise for a VkResult returned by a direct (vk.lib) call, as the binding's wrappers would."""
    if result != vk.VK_SUCCESS:
        exc = vk.exception_codes.get(result)
        if exc is None:
            raise DeviceError(f"{what}: Vulkan error {result}")
        vk_call(what, _raise, exc)


def _raise(exc):
    raise exc()


def instance():
    """(instance, destroy_messenger) -- the messenger exists only with GPUC_VALIDATION=1."""
    app = vk.VkApplicationInfo(pApplicationName="gpuc", applicationVersion=1, pEngineName="gpuc",
                               engineVersion=1, apiVersion=vk.VK_MAKE_VERSION(1, 1, 0))
    layers, exts = validation.instance_layers_and_extensions()
    info = vk.VkInstanceCreateInfo(pApplicationInfo=app, enabledLayerCount=len(layers),
                                   ppEnabledLayerNames=layers or None, enabledExtensionCount=len(exts),
                                   ppEnabledExtensionNames=exts or None)
    try:
        inst = vk.vkCreateInstance(info, None)
        return inst, validation.attach(inst)
    except (vk.VkErrorIncompatibleDriver, vk.VkErrorInitializationFailed) as e:
        raise DeviceError("no Vulkan driver found (install your GPU's Vulkan driver, or "
                          f"mesa-vulkan-drivers for the CPU device lavapipe): {type(e).__name__}") from None


def list_devices():
    """[{index, name, type, uuid, pci_bus_id}] of every Vulkan physical device: uuid is deviceUUID as
    NVML writes it ("GPU-…"; None on Vulkan 1.0), pci_bus_id "dddd:bb:dd.f" (None without
    VK_EXT_pci_bus_info); either one, or the index, is a `select` (runtime/device_select.py)."""
    inst, unhook = instance()
    try:
        out = []
        for i, pd in enumerate(vk.vkEnumeratePhysicalDevices(inst)):
            p = vk.vkGetPhysicalDeviceProperties(pd)
            uuid, bus = device_select.device_ids(pd)
            out.append({"index": i, "name": p.deviceName, "type": type_name(p.deviceType),
                        "uuid": device_select.format_uuid(uuid), "pci_bus_id": bus})
        return out
    finally:
        unhook()
        vk.vkDestroyInstance(inst, None)


def choose_physical(pds, select):
    """(physical device, index) for `select`: index, deviceUUID, PCI bus id, "auto" or name
    substring (runtime/device_select.py); None / "": the best ranked."""
    ranked = sorted(range(len(pds)),
                    key=lambda i: (_TYPE_RANK.get(vk.vkGetPhysicalDeviceProperties(pds[i]).deviceType, 4), i))
    i = device_select.choose(pds, select, ranked)
    return pds[i], i
