"""Choosing the Vulkan device (runtime/device_select.py): index, deviceUUID in its spellings, PCI bus
id, name substring, "auto" from CUDA_VISIBLE_DEVICES / NVIDIA_VISIBLE_DEVICES (GPU- UUIDs as they
are, indices through NVML: faked here, as this machine has no NVIDIA GPU), GPUC_DEVICE, and the
errors for what matches no device; `gpuc devices --json`."""
import json
import subprocess
import sys

import pytest

pytest.importorskip("vulkan")

import vulkan as vk  # noqa: E402

import gpuc  # noqa: E402
from gpuc.errors import DeviceError  # noqa: E402
from gpuc.runtime import device_select as ds  # noqa: E402
from gpuc.runtime.vk_instance import instance, list_devices  # noqa: E402

OTHER = "GPU-00000000-1111-2222-3333-444444444444"


@pytest.fixture(scope="module")
def pds():
    inst, unhook = instance()
    yield vk.vkEnumeratePhysicalDevices(inst)
    unhook()
    vk.vkDestroyInstance(inst, None)


@pytest.fixture(scope="module")
def uuid(pds):
    return ds.device_ids(pds[0])[0]


@pytest.fixture(autouse=True)
def no_visible(monkeypatch):
    for v in ds.VISIBLE_ENVS:
        monkeypatch.delenv(v, raising=False)


def choose(pds, select):
    return ds.choose(pds, select, list(range(len(pds))))


def test_parse_forms():
    h = "6d657361322e332e3600000000000000"
    assert ds.parse_uuid("GPU-6d657361-322e-332e-3600-000000000000") == h
    assert ds.parse_uuid(h.upper()) == h and ds.parse_uuid("gpu-" + h) == h
    assert ds.format_uuid(h) == "GPU-6d657361-322e-332e-3600-000000000000"
    assert ds.parse_uuid("llvmpipe") is None and ds.parse_uuid(h[:-1]) is None
    assert ds.parse_pci("00000000:65:00.0") == (0, 0x65, 0, 0) == ds.parse_pci("0000:65:00.0") == ds.parse_pci("65:00.0")
    assert ds.parse_pci("0001:B3:1f.7") == (1, 0xB3, 0x1F, 7)
    assert ds.parse_pci("65:00") is None and ds.parse_pci("0:65:00.8") is None


def test_index_uuid_name_and_default(pds, uuid):
    assert len(uuid) == 32
    name = vk.vkGetPhysicalDeviceProperties(pds[0]).deviceName
    for sel in (0, "0", ds.format_uuid(uuid), uuid, uuid.upper(), ds.format_uuid(uuid).lower(), name[:4].upper(),
                None, "", "auto"):
        assert choose(pds, sel) == 0, sel


def test_what_matches_nothing_is_one_clear_error(pds, uuid):
    with pytest.raises(DeviceError, match=r"no Vulkan device has UUID GPU-00000000-1111.*" + ds.format_uuid(uuid)):
        choose(pds, OTHER)
    with pytest.raises(DeviceError, match="PCI bus id '0000:99:00.0'"):
        choose(pds, "0000:99:00.0")
    with pytest.raises(DeviceError, match="does not exist"):
        choose(pds, len(pds))
    with pytest.raises(DeviceError, match="no Vulkan device name contains 'no such gpu'"):
        choose(pds, "no such gpu")
    with pytest.raises(DeviceError, match="must be an index"):
        choose(pds, 1.5)


def test_auto_from_visible_devices(pds, uuid, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", ds.format_uuid(uuid) + "," + OTHER)    # a UUID: no NVML needed
    assert choose(pds, "auto") == 0
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", OTHER)
    with pytest.raises(DeviceError, match="device 'auto' .CUDA_VISIBLE_DEVICES="):
        choose(pds, "auto")
    # indices map through NVML; CUDA_VISIBLE_DEVICES wins over NVIDIA_VISIBLE_DEVICES
    monkeypatch.setattr(ds, "_nvml_uuids", lambda: [ds.parse_uuid(OTHER), uuid])
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    monkeypatch.setenv("NVIDIA_VISIBLE_DEVICES", "0")
    assert choose(pds, "auto") == 0
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    with pytest.raises(DeviceError, match="no Vulkan device has UUID " + OTHER):
        choose(pds, "auto")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2")
    with pytest.raises(DeviceError, match="GPU 2 does not exist .NVML lists 2"):
        choose(pds, "auto")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    monkeypatch.setenv("NVIDIA_VISIBLE_DEVICES", "1")
    assert choose(pds, "auto") == 0
    for v in ("all", "", "none"):                     # no one GPU named: the default device
        monkeypatch.setenv("NVIDIA_VISIBLE_DEVICES", v)
        assert choose(pds, "auto") == 0
    monkeypatch.setenv("NVIDIA_VISIBLE_DEVICES", "MIG-abc")
    with pytest.raises(DeviceError, match="MIG"):
        choose(pds, "auto")
    monkeypatch.setenv("NVIDIA_VISIBLE_DEVICES", "zero")
    with pytest.raises(DeviceError, match="neither an index nor a GPU- UUID"):
        choose(pds, "auto")
    # an index without NVML: a warning, and the default device
    monkeypatch.setattr(ds, "_nvml_uuids", lambda: None)
    monkeypatch.setenv("NVIDIA_VISIBLE_DEVICES", "1")
    with pytest.warns(UserWarning, match="NVML"):
        assert choose(pds, "auto") == 0


def test_open_device_and_load_by_uuid(uuid, monkeypatch):
    d = gpuc.open_device(select=ds.format_uuid(uuid))
    try:
        info = d.describe()
        assert info["uuid"] == ds.format_uuid(uuid) and info["index"] == 0
    finally:
        d.close()
    monkeypatch.setenv("GPUC_DEVICE", OTHER)
    with pytest.raises(DeviceError, match="UUID " + OTHER):
        gpuc.open_device()


def test_devices_json(uuid):
    out = subprocess.run([sys.executable, "-m", "gpuc", "devices", "--json"], capture_output=True, text=True, check=True)
    devs = json.loads(out.stdout)
    assert devs == list_devices()
    assert devs[0]["uuid"] == ds.format_uuid(uuid) and set(devs[0]) == {"index", "name", "type", "uuid", "pci_bus_id"}
