"""Load-time overlap (runtime/overlap.py, runtime/pipelines.py): pipelines created over several
threads, the weight upload beside them, the device opened while the bundle is parsed.  Whatever the
threading, a load gives the same pipelines, the same outputs and the same errors as done inline."""
import numpy as np
import pytest

import gpuc
from gpuc.errors import BundleError, DeviceError
from gpuc.runtime import overlap, pipelines
from helpers.builder import ModelBuilder
from helpers.data import rnd

pytest.importorskip("vulkan")


def several_shaders_model():
    """FULLY_CONNECTED -> SOFTMAX -> MEAN -> ADD: four different kernels, with weights to upload."""
    mb = ModelBuilder()
    x = mb.input("x", [2, 16])
    w, bias = mb.const("w", rnd((8, 16), 1)), mb.const("bias", rnd((8,), 2))
    h = mb.tensor("h", [2, 8])
    mb.op("FULLY_CONNECTED", [x, w, bias], [h])
    s = mb.tensor("s", [2, 8])
    mb.op("SOFTMAX", [h], [s], beta=1.0)
    axis = mb.const("axis", np.array([1], np.int32))
    m = mb.tensor("m", [2, 1])
    mb.op("MEAN", [s, axis], [m], keep_dims=True)
    y = mb.tensor("y", [2, 8])
    mb.op("ADD", [s, m], [y])
    mb.output(y)
    return gpuc.compile(mb.finish(), cache=False)


@pytest.fixture(scope="module")
def bundle():
    return several_shaders_model()


def run_with(monkeypatch, bundle, **env):
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    x = rnd((2, 16), 3)
    with gpuc.load(bundle) as m:
        return m.run([x])[0], len(m.pipelines)


@pytest.mark.parametrize("threads", ["2", "3", "8"])
def test_threaded_load_matches_inline(monkeypatch, bundle, threads):
    inline, n = run_with(monkeypatch, bundle, GPUC_LOAD_THREADS="0")
    assert n >= 3
    threaded, n2 = run_with(monkeypatch, bundle, GPUC_LOAD_THREADS="1", GPUC_PIPELINE_THREADS=threads)
    assert n2 == n
    np.testing.assert_array_equal(threaded, inline)


@pytest.mark.parametrize("sizes,n", [([5, 1, 1, 1, 1, 1], 2), ([3] * 7, 3), ([1], 4), ([9, 8, 1, 1], 8)])
def test_deal_covers_every_shader_once_and_balances(sizes, n):
    groups = pipelines.deal(sizes, n)
    assert sorted(i for g in groups for i in g) == list(range(len(sizes)))
    assert len(groups) <= min(n, len(sizes))
    loads = [sum(sizes[i] for i in g) for g in groups]
    assert max(loads) - min(loads) <= max(sizes)


def test_threads_for_respects_settings(monkeypatch):
    monkeypatch.setenv("GPUC_PIPELINE_THREADS", "3")
    assert overlap.threads_for(10) == 3 and overlap.threads_for(2) == 2 and overlap.threads_for(1) == 1
    monkeypatch.setenv("GPUC_PIPELINE_THREADS", "junk")
    assert 1 <= overlap.threads_for(10) <= 8
    monkeypatch.setenv("GPUC_LOAD_THREADS", "0")
    assert overlap.threads_for(10) == 1


def test_failed_pipeline_group_frees_the_others_and_raises(monkeypatch, bundle):
    """One thread's vkCreateComputePipelines fails: the pipelines the other threads made are destroyed,
    the load raises that error, and the next load works."""
    monkeypatch.setenv("GPUC_PIPELINE_THREADS", "2")
    real, destroyed, calls = pipelines._create_group, [], []

    def flaky(dev, cache, infos, idx, counting=None):
        calls.append(idx)
        if 0 in idx:
            raise DeviceError("creating compute pipelines: out of device memory; try a smaller model or batch")
        return real(dev, cache, infos, idx)

    real_destroy = pipelines.vk.vkDestroyPipeline
    monkeypatch.setattr(pipelines, "_create_group", flaky)
    monkeypatch.setattr(pipelines.vk, "vkDestroyPipeline", lambda d, p, a: (destroyed.append(p), real_destroy(d, p, a)))
    with pytest.raises(DeviceError, match="out of device memory"):
        gpuc.load(bundle)
    assert len(calls) == 2
    made_by_other = len([i for g in calls if 0 not in g for i in g])
    assert len(destroyed) >= made_by_other > 0
    monkeypatch.undo()
    with gpuc.load(bundle) as m:
        assert m.run([rnd((2, 16), 3)])[0].shape == (2, 8)


def test_failed_upload_thread_reports_its_error(monkeypatch, bundle):
    from gpuc.runtime.arenas import Arenas

    def boom(self):
        raise DeviceError("creating a buffer: out of device memory; try a smaller model or batch")
    monkeypatch.setattr(Arenas, "upload_weights", boom)
    with pytest.raises(DeviceError, match="creating a buffer"):
        gpuc.load(bundle)


@pytest.mark.parametrize("threads", ["0", "1"])
def test_bad_bundle_error_wins_over_device_open(monkeypatch, bundle, threads):
    """The device opens in a thread while the bundle is checked: a corrupt bundle is still the error
    the caller sees, threads or not."""
    monkeypatch.setenv("GPUC_LOAD_THREADS", threads)
    bad = bytearray(bundle)
    bad[len(bad) // 2] ^= 0xFF
    with pytest.raises(BundleError, match="corrupt bundle"):
        gpuc.load(bytes(bad))


def test_background_reraises_and_inline_mode(monkeypatch):
    def fail():
        raise ValueError("x")
    with pytest.raises(ValueError):
        overlap.Background(fail).result()
    monkeypatch.setenv("GPUC_LOAD_THREADS", "0")
    seen = []
    job = overlap.Background(seen.append, 1)
    assert seen == [1] and job.result() is None


def test_prewarm_then_load_shares_the_device(bundle):
    from gpuc.runtime import prewarm
    from gpuc.runtime.device import shared_device
    job = prewarm()
    assert job.result() is shared_device()
    with gpuc.load(bundle) as m:
        assert m.device is shared_device()


def test_prewarm_never_raises_and_load_reports_the_device_error():
    gpuc.prewarm(device="no-such-gpu-name")        # returns at once, whatever happens in its thread
    with pytest.raises(DeviceError, match="no Vulkan device name contains 'no-such-gpu-name'"):
        gpuc.load(several_shaders_model(), device="no-such-gpu-name")


def test_interrupted_wait_still_waits_for_the_work(monkeypatch):
    """A Ctrl-C while waiting for a load thread is re-raised only once the thread is done, so the
    caller's cleanup never frees what a running driver call still uses."""
    import threading
    import time
    done = threading.Event()

    def work():
        time.sleep(0.2)
        done.set()
    job = overlap.Background(work)
    real_join, calls = threading.Thread.join, []

    def join_interrupted_once(self, timeout=None):
        calls.append(1)
        if len(calls) == 1:
            raise KeyboardInterrupt
        return real_join(self, timeout)
    monkeypatch.setattr(threading.Thread, "join", join_interrupted_once)
    with pytest.raises(KeyboardInterrupt):
        job.result()
    assert done.is_set() and len(calls) >= 2


def test_pipeline_threads_all_joined_when_one_fails_late(monkeypatch, bundle):
    """The failing group returns first; the others are still creating: every thread is waited for
    before the error is raised (the pipeline cache and modules are freed only after)."""
    import time
    monkeypatch.setenv("GPUC_PIPELINE_THREADS", "3")
    real, finished = pipelines._create_group, []

    def slow_or_failing(dev, cache, infos, idx, counting=None):
        if 0 in idx:
            raise DeviceError("creating compute pipelines: out of device memory; try a smaller model or batch")
        time.sleep(0.2)
        out = real(dev, cache, infos, idx)
        finished.append(idx)
        return out
    monkeypatch.setattr(pipelines, "_create_group", slow_or_failing)
    with pytest.raises(DeviceError, match="out of device memory"):
        gpuc.load(bundle)
    assert len(finished) == 2


def test_exit_right_after_prewarm_is_clean():
    """The interpreter exits while the device may still be opening: exit waits for it, then closes it."""
    import subprocess
    import sys
    r = subprocess.run([sys.executable, "-c", "import gpuc; gpuc.prewarm(); print('ok')"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr
