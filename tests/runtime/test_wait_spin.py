"""A passive wait (runtime/slots.py SPIN_LEAD_S, Device.wait spin_at): the first run of some work blocks;
later runs of the same work block until shortly before its shortest time so far and then spin, and
every wait still returns the run's results, whether the fence signals before, during or after the spin."""
import numpy as np
import pytest

import gpuc
from gpuc.runtime import device as dev
from helpers.builder import ModelBuilder

pytest.importorskip("vulkan")


def add_model():
    mb = ModelBuilder()
    a = mb.input("a", [64, 32])
    y = mb.tensor("y", [64, 32])
    mb.op("ADD", [a, a], [y])
    mb.output(y)
    return gpuc.compile(mb.finish(), cache=False)


def test_spin_point_follows_the_shortest_run(monkeypatch):
    seen = []
    real = dev.Device.wait

    def wait(self, fence, active=False, timeout_s=None, spin_at=None):
        seen.append((active, spin_at, __import__("time").perf_counter()))
        return real(self, fence, active, timeout_s, spin_at)

    monkeypatch.setattr(dev.Device, "wait", wait)
    x = np.arange(64 * 32, dtype=np.float32).reshape(64, 32)
    with gpuc.load(add_model()) as m:
        for _ in range(4):
            np.testing.assert_array_equal(m.run(x)[0], 2 * x)
        np.testing.assert_array_equal(m.run(x, wait="active")[0], 2 * x)
        h = m.run_async(x)
        h.wait()                                   # (its own result)
    passive = [s for s in seen if not s[0]]
    assert passive[0][1] is None                   # nothing known yet: a plain blocking wait
    assert all(s[1] is not None and s[1] <= s[2] + 1.0 for s in passive[1:])
    assert len(passive) == 5


@pytest.mark.parametrize("delay", [0.0, 0.05])
def test_spin_before_and_after_the_fence(gpu, delay, monkeypatch):
    """spin_at in the past (spin at once) and 50 ms ahead (block, then spin): the same results, and a
    run longer than its estimate (spin ends first) falls back to blocking."""
    import time
    monkeypatch.setattr(dev, "SPIN_S", 1e-6)
    x = np.ones((64, 32), np.float32)
    with gpuc.load(add_model(), device=gpu.device) as m:
        m.run(x)
        sl = m.slots[0]
        m.input_view(0)[...] = 3.0
        sl.busy = True
        m.slots.submit(sl)
        t0, work = sl.submitted
        m.slots._took[work] = delay                # estimate: ends `delay` after submit
        m.slots.wait(sl)
        sl.free()
        assert float(m.output_view(0)[0, 0]) == 6.0
        assert time.perf_counter() - t0 < 5.0
