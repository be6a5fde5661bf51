"""Run-time misuse and device faults: each gets a clear GpucError, never a crash or a wrong answer.

Threads: one LoadedModel may be used from several threads; run() calls are serialised by a lock.
"""
import threading

import numpy as np
import pytest

import gpuc
from gpuc.errors import DeviceError, GpucError
from gpuc.runtime import bundle as B
from helpers.builder import ModelBuilder
from helpers.data import rnd

pytest.importorskip("vulkan")


def add_model():
    mb = ModelBuilder()
    a = mb.input("a", [2, 3])
    b = mb.input("b", [2, 3])
    y = mb.tensor("y", [2, 3])
    mb.op("ADD", [a, b], [y])
    mb.output(y)
    return gpuc.compile(mb.finish(), cache=False)


@pytest.fixture(scope="module")
def model():
    with gpuc.load(add_model()) as m:
        yield m


def test_io_metadata(model):
    assert [(s.name, s.shape, s.dtype.name) for s in model.inputs] == [("a", (2, 3), "float32"), ("b", (2, 3), "float32")]
    assert model.outputs[0].name == "y"


@pytest.mark.parametrize("bad,msg", [
    ([np.zeros((2, 3), np.float32)], "takes 2 input"),
    ([np.zeros((3, 2), np.float32)] * 2, "expected shape"),
    ([np.zeros((2, 3), np.complex64)] * 2, "expected dtype"),
    ({"a": np.zeros((2, 3), np.float32)}, "missing input"),
    ({"a": 1, "b": 2, "c": 3}, "unknown input"),
])
def test_wrong_inputs(model, bad, msg):
    with pytest.raises(GpucError, match=msg):
        model.run(bad)


def test_dict_noncontiguous_float64_and_nan_inputs(model):
    a = rnd((3, 2), 1).T                     # non-contiguous view
    b = rnd((2, 3), 2).astype(np.float64)    # refused as LiteRT refuses it; converted with cast=True
    with pytest.raises(GpucError, match="input #1 'b': expected dtype float32, got float64"):
        model.run({"a": a, "b": b})
    np.testing.assert_allclose(model.run({"a": a, "b": b}, cast=True)[0], a + b.astype(np.float32), rtol=1e-6)
    out = model.run([np.full((2, 3), np.nan, np.float32), b], cast=True)[0]
    assert np.isnan(out).all()


def test_threads_share_one_model(model):
    errors, xs = [], [(rnd((2, 3), i), rnd((2, 3), i + 100)) for i in range(8)]

    def work(a, b):
        try:
            for _ in range(20):
                np.testing.assert_allclose(model.run([a, b])[0], a + b, rtol=1e-6)
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    ts = [threading.Thread(target=work, args=x) for x in xs]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors


def test_run_after_close():
    m = gpuc.load(add_model())
    m.close()
    m.close()                                # idempotent
    with pytest.raises(GpucError, match="closed"):
        m.run([np.zeros((2, 3), np.float32)] * 2)


def test_out_of_device_memory_at_load_is_a_clear_error():
    b = B.read_bundle(add_model())
    b.arena_bytes = 1 << 50                  # a petabyte: no device has it
    with pytest.raises(DeviceError, match="memory"):
        gpuc.load(B.write_bundle(b))


def test_unknown_device_is_a_clear_error():
    with pytest.raises(DeviceError, match="no Vulkan device"):
        gpuc.load(add_model(), device="no-such-gpu-name")
    with pytest.raises(DeviceError, match="does not exist"):
        gpuc.load(add_model(), device="99")


def test_no_vulkan_driver_is_a_clear_error(tmp_path):
    import subprocess
    import sys
    code = "import gpuc, sys\ntry:\n    gpuc.load(sys.argv[1])\nexcept gpuc.errors.GpucError as e:\n    print('ERR', e)\n"
    p = tmp_path / "m.bundle"
    p.write_bytes(add_model())
    env = {"VK_ICD_FILENAMES": str(tmp_path / "none.json"), "VK_DRIVER_FILES": str(tmp_path / "none.json"),
           "PATH": "/usr/bin:/bin"}
    import os
    env.update({k: v for k, v in os.environ.items() if k.startswith(("PYTHON", "HOME"))})
    r = subprocess.run([sys.executable, "-c", code, str(p)], capture_output=True, text=True, env=env)
    assert "ERR" in r.stdout and ("no Vulkan" in r.stdout), r.stdout + r.stderr


def test_views_and_run_in_place(model):
    a, b = rnd((2, 3), 5), rnd((2, 3), 6)
    model.input_view(0)[...] = a
    model.input_view(1)[...] = b
    model.run_in_place()
    np.testing.assert_allclose(model.output_view(0), a + b, rtol=1e-6)
    model.run_in_place(wait="active")
    np.testing.assert_allclose(model.output_view(0), a + b, rtol=1e-6)


def test_run_async_pipelined_and_more_runs_than_slots(model):
    xs = [(rnd((2, 3), i), rnd((2, 3), 50 + i)) for i in range(7)]
    handles = [model.run_async(list(x)) for x in xs]        # 7 runs, 2 slots: older ones complete
    for h, (a, b) in zip(handles, xs):
        out = h.wait()[0]
        assert h.done()
        np.testing.assert_allclose(out, a + b, rtol=1e-6)
    assert model.run(list(xs[0]), wait="active")[0].shape == (2, 3)


@pytest.mark.parametrize("kind", ["device", "cached", "uncached", "bogus"])
def test_upload_memory_kinds_give_the_same_result(monkeypatch, kind):
    """GPUC_UPLOAD_MEMORY only moves the input staging buffers; an unknown value means cached.
    GPUC_WEIGHTS_IN_BAR=1 maps the weights themselves (where the BAR allows)."""
    monkeypatch.setenv("GPUC_UPLOAD_MEMORY", kind)
    monkeypatch.setenv("GPUC_WEIGHTS_IN_BAR", "1")
    a, b = rnd((2, 3)), rnd((2, 3))
    with gpuc.load(add_model()) as m:
        for _ in range(3):
            np.testing.assert_array_equal(m.run([a, b])[0], a + b)
    # weights: mapped device-local memory (device) or a staging buffer and a GPU copy (the others)
    c = rnd((2, 3))
    mb = ModelBuilder()
    x, y = mb.input("x", [2, 3]), mb.tensor("y", [2, 3])
    mb.op("MUL", [x, mb.const("c", c)], [y])
    mb.output(y)
    with gpuc.load(gpuc.compile(mb.finish(), cache=False)) as m:
        assert m.arenas.weights_direct == (kind == "device" and m.device.bar_fits(m.bundle.weights.nbytes))
        np.testing.assert_array_equal(m.run([a])[0], a * c)


def test_buffer_takes_a_memory_kind():
    """Device.buffer(size, usage, kind) -> (buffer, memory, size); a kind is a MemoryKind, nothing else."""
    import vulkan as vk
    from gpuc.runtime.device import MemoryKind, shared_device
    d = shared_device()
    for kind in MemoryKind:
        buf, mem, size = d.buffer(100, vk.VK_BUFFER_USAGE_TRANSFER_SRC_BIT, kind)
        assert size == 256
        vk.vkDestroyBuffer(d.device, buf, None)
        vk.vkFreeMemory(d.device, mem, None)
    with pytest.raises(TypeError, match="MemoryKind"):
        d.buffer(100, vk.VK_BUFFER_USAGE_TRANSFER_SRC_BIT, True)


class _Limits:
    def __init__(self, real, **override):
        self._real, self._override = real, override

    def __getattr__(self, name):
        return self._override[name] if name in self._override else getattr(self._real, name)


def test_device_offset_alignment_is_checked_at_load(monkeypatch):
    """Tensor offsets are multiples of the bundle format's OFFSET_ALIGN; a device asking for more
    is refused at load, naming both numbers."""
    from gpuc.runtime.device import shared_device
    d = shared_device()
    assert B.OFFSET_ALIGN % d.limits.minStorageBufferOffsetAlignment == 0
    monkeypatch.setattr(d, "limits", _Limits(d.limits, minStorageBufferOffsetAlignment=512))
    with pytest.raises(DeviceError, match=r"aligned to 512 bytes \(minStorageBufferOffsetAlignment\).* 256 bytes"):
        gpuc.load(add_model())


def test_bundle_offsets_must_be_aligned():
    b = B.read_bundle(add_model())
    assert all(t.offset % B.OFFSET_ALIGN == 0 for t in b.tensors)
    b.tensors[b.outputs[0]].offset += 4
    b.arena_bytes += 256
    with pytest.raises(gpuc.errors.BundleError, match="offset .* is not a multiple of 256"):
        B.read_bundle(B.write_bundle(b))


def test_a_closed_model_leaves_the_device_alone(monkeypatch):
    """close() again, or the garbage collector's __del__ (in whatever thread it runs), must not wait
    on the device: that would race with another thread's queue submit."""
    from gpuc.runtime import resources
    m = gpuc.load(add_model())
    m.close()
    calls = []
    monkeypatch.setattr(resources.vk, "vkDeviceWaitIdle", lambda d: calls.append(d))
    m.close()
    m.__del__()
    assert not calls
