"""GpuRunner: compiles and runs models on one Vulkan device (the session-wide `gpu` fixture of
tests/conftest.py)."""
from __future__ import annotations

import gpuc


class GpuRunner:
    """Compiles and runs models on one Vulkan device, created lazily on first use."""

    def __init__(self):
        self._device = None

    @property
    def device(self):
        if self._device is None:
            from gpuc.runtime.device import Device
            self._device = Device()
        return self._device

    def load(self, model: bytes):
        bundle = gpuc.compile(model)
        assert isinstance(bundle, (bytes, bytearray)) and len(bundle) > 0
        return gpuc.load(bytes(bundle), device=self.device)

    def run(self, model: bytes, inputs):
        m = self.load(model)
        try:
            return m.run(inputs)
        finally:
            m.close()

    def close(self):
        if self._device is not None:
            self._device.close()
            self._device = None
