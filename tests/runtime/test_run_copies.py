"""run()'s host copies split over threads (runtime/hostcopy.py, forced on tiny models through the
settings): the same outputs as single-thread copies, at every batch, from strided inputs too; fresh
output arrays owned by the caller; the settings taken at load; close() during threaded runs safe."""
import threading
import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("vulkan")

import gpuc  # noqa: E402
from gpuc.errors import GpucError  # noqa: E402
from gpuc.runtime import hostcopy, settings  # noqa: E402
from helpers.models import block_model  # noqa: E402

SPLIT = dict(copy_threads=3, copy_split_bytes=16)


@pytest.fixture(scope="module")
def bundles():
    model = block_model()
    return gpuc.compile(model), gpuc.compile(model, max_batch=6)


@pytest.fixture
def counted(monkeypatch):
    """How many copies went to the thread pool."""
    calls = []
    real = hostcopy._executor

    def executor(n):
        calls.append(n)
        return real(n)
    monkeypatch.setattr(hostcopy, "_executor", executor)
    return calls


def _xs(spec, b, seed):
    return np.random.default_rng(seed).uniform(-1, 1, (b,) + tuple(spec.shape[1:])).astype(spec.dtype)


def test_threaded_copies_equal_single_thread(bundles, counted):
    b1, bn = bundles
    with settings.override(copy_threads=1):
        ref1, refn = gpuc.load(b1), gpuc.load(bn)
    with settings.override(**SPLIT):
        m1, mn = gpuc.load(b1, device=ref1.device), gpuc.load(bn, device=ref1.device)
    try:
        assert mn.slots[0].copier.threads == 3 and refn.slots[0].copier.threads == 1
        x1 = _xs(m1.inputs[0], 1, 0)
        np.testing.assert_array_equal(m1.run(x1)[0], ref1.run(x1)[0])
        for b in (1, 4, 6):
            x = _xs(mn.inputs[0], b, b)
            want = refn.run(x)
            got = mn.run(x)
            assert len(got) == len(want)
            for g, w in zip(got, want):
                assert g.shape == w.shape and g.flags.owndata
                np.testing.assert_array_equal(g, w)
            assert not np.shares_memory(got[0], mn.output_view(0, batch=b))
        strided = np.ascontiguousarray(np.swapaxes(_xs(mn.inputs[0], 5, 9), 1, 2)).swapaxes(1, 2)
        assert not strided.flags.c_contiguous
        np.testing.assert_array_equal(mn.run(strided)[0], refn.run(np.ascontiguousarray(strided))[0])
        first = mn.run(x)[0]
        keep = first.copy()
        mn.run(_xs(mn.inputs[0], 6, 99))                    # a later run leaves earlier outputs alone
        np.testing.assert_array_equal(first, keep)
        assert counted and max(counted) == 2                # the caller and 2 pool threads
    finally:
        for m in (m1, mn, ref1, refn):
            m.close()


def test_settings_are_read_at_load(bundles, counted):
    with settings.override(copy_threads=1, copy_split_bytes=16):
        m = gpuc.load(bundles[1])
    try:
        with settings.override(**SPLIT):                    # later changes leave a loaded model alone
            m.run(_xs(m.inputs[0], 6, 1))
        assert not counted
    finally:
        m.close()


def test_close_during_threaded_runs(monkeypatch):
    """The lifecycle fuzz (8 threads running while another closes the model), every copy split."""
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[2] / "scripts"))
    import fuzz_lifecycle
    monkeypatch.setenv("GPUC_COPY_THREADS", "3")
    monkeypatch.setenv("GPUC_COPY_SPLIT_BYTES", "16")
    res = fuzz_lifecycle.run(cases=4, seed=11, timeout=60, log=lambda s: None, threads=8, target="model")
    assert not res["failures"], res["failures"][:5]
    assert res["crashes"] == res["hangs"] == 0
    assert res["completed"] > 0 and res["closed"] > 0, res


PIPELINED = dict(upload_memory="cached", upload_chunk_bytes=1, copy_threads=3, copy_split_bytes=16)


def test_pipelined_upload_equals_plain(bundles):
    """Host-memory staging, one item per chunk: the chunk copies land in the slot's own buffer, and
    runs from two threads at once (the slots share the arena) still give each its own results."""
    bn = bundles[1]
    with settings.override(copy_threads=1):
        ref = gpuc.load(bn)
    with settings.override(**PIPELINED):
        m = gpuc.load(bn)
    try:
        xs = [_xs(m.inputs[0], b, 20 + b) for b in (6, 2, 1, 5)]
        want = [ref.run(x)[0] for x in xs]
        for x, w in zip(xs, want):
            np.testing.assert_array_equal(m.run(x)[0], w)
        used = [sl.upload for sl in m.slots if sl.upload is not None]
        assert used and all(not u["in_vram"] and u["cmds"] for u in used)
        assert {k[0] for u in used for k in u["cmds"]} == {6, 2, 5}     # batch 1 takes the plain path
        errors = []

        def loop(k):
            try:
                for i in range(12):
                    j = (i + k) % len(xs)
                    np.testing.assert_array_equal(m.run_async(xs[j]).wait()[0], want[j])
            except BaseException as e:      # noqa: BLE001 - reported below
                errors.append(e)
        threads = [threading.Thread(target=loop, args=(k,)) for k in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, errors[:2]
    finally:
        m.close()
        ref.close()


def test_pipelined_upload_on_one_thread(bundles):
    with settings.override(**dict(PIPELINED, copy_threads=1)):
        m = gpuc.load(bundles[1])
    with settings.override(copy_threads=1):
        ref = gpuc.load(bundles[1], device=m.device)
    try:
        x = _xs(m.inputs[0], 6, 5)
        np.testing.assert_array_equal(m.run(x)[0], ref.run(x)[0])
        assert m.slots[0].upload["cmds"]
    finally:
        m.close()
        ref.close()


def test_close_during_pipelined_runs(bundles):
    bn = bundles[1]
    with settings.override(**PIPELINED):
        m = gpuc.load(bn)
    x = _xs(m.inputs[0], 6, 3)
    want = m.run(x)[0]
    bad = []

    def loop():
        while True:
            try:
                out = m.run(x)[0]
            except GpucError as e:
                if "model is closed" not in str(e):
                    bad.append(e)
                return
            if not np.array_equal(out, want):
                bad.append("wrong output")
    threads = [threading.Thread(target=loop) for _ in range(4)]
    for t in threads:
        t.start()
    time.sleep(0.3)
    m.close()
    for t in threads:
        t.join(30)
    assert not any(t.is_alive() for t in threads) and not bad, bad[:3]


def test_pipeline_on_over_device_staging(bundles):
    """upload_pipeline=on where input staging is device-local (lavapipe's one memory type): the upload
    goes through a host buffer of its own; input_view / run_in_place keep the staging."""
    bn = bundles[1]
    with settings.override(copy_threads=1):
        ref = gpuc.load(bn)
    with settings.override(upload_memory="device", upload_chunk_bytes=1, upload_pipeline="on", **SPLIT):
        m = gpuc.load(bn)
    try:
        x = _xs(m.inputs[0], 6, 8)
        want = ref.run(x)[0]
        np.testing.assert_array_equal(m.run(x)[0], want)
        st = m.slots[0].upload
        assert st["in_vram"] and st["cmds"] and st["src"][0] is not m.slots[0].in_buf
        m.input_view(0, batch=6)[...] = x
        m.run_in_place(batch=6)
        np.testing.assert_array_equal(m.output_view(0, batch=6), want)
    finally:
        m.close()
        ref.close()
    with settings.override(upload_pipeline="sometimes"):
        with pytest.raises(GpucError, match="GPUC_UPLOAD_PIPELINE"):
            gpuc.load(bn)
