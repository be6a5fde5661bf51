"""Which Vulkan device a `select` names: an index, a deviceUUID, a PCI bus id, a name substring, or
"auto" (the GPU that CUDA_VISIBLE_DEVICES / NVIDIA_VISIBLE_DEVICES give this process).

On a host of identical GPUs every card has the same name and PCI device ID, and the Vulkan loader's
own variables only reorder or filter by those, so a scheduler's choice (Ray, Slurm, Kubernetes set
CUDA_VISIBLE_DEVICES) is matched through the card's UUID: VkPhysicalDeviceIDProperties.deviceUUID is
the UUID NVML and CUDA report ("GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx") on NVIDIA's driver.
NVML (nvidia-ml-py, `import pynvml`) turns index entries into UUIDs; it is an optional import.
"""
from __future__ import annotations

import re
import warnings

import vulkan as vk

from gpuc.errors import DeviceError
from gpuc.runtime import settings

AUTO = "auto"
VISIBLE_ENVS = settings.VISIBLE_ENVS             # (read through runtime/settings.py)

_HEX32 = re.compile(r"[0-9a-f]{32}")
_PCI = re.compile(r"(?:([0-9a-f]{1,8}):)?([0-9a-f]{1,2}):([0-9a-f]{1,2})\.([0-7])")


def device_ids(pd) -> tuple[str | None, str | None]:
    """(deviceUUID as 32 hex digits, PCI bus id "dddd:bb:dd.f") of a physical device; None where the
    device cannot say (Vulkan 1.0; no VK_EXT_pci_bus_info)."""
    if vk.vkGetPhysicalDeviceProperties(pd).apiVersion < vk.VK_MAKE_VERSION(1, 1, 0):
        return None, None
    exts = {e.extensionName for e in vk.vkEnumerateDeviceExtensionProperties(pd, None)}
    idp = vk.VkPhysicalDeviceIDProperties()
    pci = vk.VkPhysicalDevicePCIBusInfoPropertiesEXT(pNext=idp) if "VK_EXT_pci_bus_info" in exts else None
    vk.vkGetPhysicalDeviceProperties2(pd, vk.VkPhysicalDeviceProperties2(pNext=pci if pci is not None else idp))
    uuid = bytes(vk.ffi.buffer(idp.deviceUUID)).hex()
    bus = None if pci is None else f"{pci.pciDomain:04x}:{pci.pciBus:02x}:{pci.pciDevice:02x}.{pci.pciFunction:x}"
    return uuid, bus


def format_uuid(hex32: str | None) -> str | None:
    """32 hex digits -> "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" (how nvidia-smi and NVML write it)."""
    if not hex32:
        return None
    h = hex32
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def parse_uuid(s: str) -> str | None:
    """A UUID in any of the usual spellings ("GPU-…", with or without dashes, any case) -> 32 hex
    digits; None if `s` is not one."""
    t = s.strip().lower()
    if t.startswith("gpu-"):
        t = t[4:]
    t = t.replace("-", "")
    return t if _HEX32.fullmatch(t) else None


def parse_pci(s: str) -> tuple[int, int, int, int] | None:
    """A PCI bus id ("0000:65:00.0", NVML's "00000000:65:00.0", or "65:00.0") -> (domain, bus,
    device, function); None if `s` is not one."""
    m = _PCI.fullmatch(s.strip().lower())
    if not m:
        return None
    return int(m.group(1) or "0", 16), int(m.group(2), 16), int(m.group(3), 16), int(m.group(4), 16)


def _nvml_uuids() -> list[str] | None:
    """The UUIDs of NVML's GPUs in NVML's order (PCI bus order), as 32 hex digits; None without NVML."""
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except Exception:                    # noqa: BLE001 - no NVIDIA driver: as without NVML
        return None
    try:
        out = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            u = pynvml.nvmlDeviceGetUUID(pynvml.nvmlDeviceGetHandleByIndex(i))
            out.append(parse_uuid(u.decode() if isinstance(u, bytes) else u))
        return out
    finally:
        pynvml.nvmlShutdown()


def auto_uuid(environ=None) -> tuple[str | None, str]:
    """(UUID as 32 hex digits or None for the default device, why): the first entry of
    CUDA_VISIBLE_DEVICES (else NVIDIA_VISIBLE_DEVICES), a GPU- UUID taken as it is, an index mapped
    through NVML.  No variable, an empty / "all" / "none" value, or no NVML for an index: None."""
    env = dict(settings.current().visible_devices) if environ is None else environ
    for var in VISIBLE_ENVS:
        value = env.get(var)
        if value is None:
            continue
        entries = [e.strip() for e in value.split(",") if e.strip()]
        if not entries or entries[0].lower() in ("all", "none", "void", "-1"):
            return None, f"{var}={value!r} names no one GPU"
        first = entries[0]
        uuid = parse_uuid(first)
        if uuid is not None:
            return uuid, f"{var}={value!r}"
        if first.lower().startswith("mig-"):
            raise DeviceError(f"{var}={value!r}: a MIG instance has no Vulkan device of its own; give a whole "
                              "GPU (GPU-… UUID or index)")
        if not first.isdigit():
            raise DeviceError(f"{var}={value!r}: its first entry {first!r} is neither an index nor a GPU- UUID")
        uuids = _nvml_uuids()
        if uuids is None:
            warnings.warn(f"gpuc: {var}={value!r} names GPU {first}, but NVML (pip install nvidia-ml-py) is not "
                          "available to map it to its UUID: using the default Vulkan device", stacklevel=3)
            return None, f"{var}={value!r} without NVML"
        i = int(first)
        if i >= len(uuids):
            raise DeviceError(f"{var}={value!r}: GPU {i} does not exist (NVML lists {len(uuids)} GPU(s))")
        return uuids[i], f"{var}={value!r} (NVML GPU {i})"
    return None, "no CUDA_VISIBLE_DEVICES / NVIDIA_VISIBLE_DEVICES"


def choose(pds, select, ranked) -> int:
    """The index in `pds` of the device `select` names (see the module doc); `ranked`: the indices
    best first (the default device is ranked[0])."""
    if select is None or (isinstance(select, str) and not select.strip()):
        return ranked[0]
    if isinstance(select, bool) or not isinstance(select, (int, str)):
        raise DeviceError(f"device must be an index, UUID, PCI bus id, name substring or 'auto', not {select!r}")
    s = str(select).strip()
    if s.isdigit():
        i = int(s)
        if i >= len(pds):
            raise DeviceError(f"device {i} does not exist ({len(pds)} Vulkan device(s); see `gpuc devices`)")
        return i
    if s.lower() == AUTO:
        uuid, why = auto_uuid()
        if uuid is None:
            return ranked[0]
        return _by_uuid(pds, uuid, f"device 'auto' ({why})")
    uuid = parse_uuid(s)
    if uuid is not None:
        return _by_uuid(pds, uuid, f"device {s!r}")
    pci = parse_pci(s)
    if pci is not None:
        buses = []
        for i in ranked:
            bus = device_ids(pds[i])[1]
            if bus is not None and parse_pci(bus) == pci:
                return i
            buses.append(bus or "unknown (no VK_EXT_pci_bus_info)")
        raise DeviceError(f"no Vulkan device is at PCI bus id {s!r}; the devices' bus ids: {', '.join(buses)} "
                          "(`gpuc devices --json`)")
    for i in ranked:
        if s.lower() in vk.vkGetPhysicalDeviceProperties(pds[i]).deviceName.lower():
            return i
    raise DeviceError(f"no Vulkan device name contains {s!r}, and it is no index, UUID, PCI bus id or 'auto' "
                      "(see `gpuc devices`)")


def _by_uuid(pds, uuid: str, what: str) -> int:
    have = []
    for i, pd in enumerate(pds):
        u = device_ids(pd)[0]
        if u == uuid:
            return i
        have.append(format_uuid(u) or "unknown (Vulkan 1.0)")
    raise DeviceError(f"{what}: no Vulkan device has UUID {format_uuid(uuid)}; the devices' UUIDs: "
                      f"{', '.join(have)} (`gpuc devices --json`)")
