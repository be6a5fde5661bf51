"""GpuRunner: compiles and runs models on one Vulkan device (the session-wide `gpu` fixture of
tests/conftest.py); run_uncached, assert_rel_close and assert_batch_prefixes: a model compiled without the
cache, run and checked (the split-K tests' helpers)."""
from __future__ import annotations

import numpy as np

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


def run_uncached(model: bytes, xs, **opts):
    """(the first output of one run, the bundle as read_bundle reads it) of `model` compiled without the
    cache with compile options `opts`."""
    from gpuc.runtime.bundle import read_bundle
    data = gpuc.compile(model, cache=False, **opts)
    with gpuc.load(data) as m:
        return m.run(xs)[0], read_bundle(data)


def assert_rel_close(out, ref, rel: float = 1e-5):
    """`out` is finite and within rel * max|ref| of `ref` everywhere."""
    assert np.isfinite(out).all()
    assert float(np.abs(out - ref).max()) <= rel * float(np.abs(ref).max())


def assert_batch_prefixes(data: bytes, model: bytes, items, batches, rel: float = 1e-5):
    """The --max-batch bundle `data` of the one-input `model`, run on the first b of `items` ([n, 1, ...]:
    n one-item inputs) for each b in `batches`, gives each item LiteRT's output for it alone."""
    from .litert import run_litert
    refs = [run_litert(model, [items[i]])[0] for i in range(max(batches))]
    with gpuc.load(data) as m:
        for b in batches:
            out = m.run([items[:b, 0]])[0]
            for i in range(b):
                assert_rel_close(out[i:i + 1], refs[i], rel)
