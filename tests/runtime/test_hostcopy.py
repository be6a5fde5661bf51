"""runtime/hostcopy.py: host copies split over threads (forced on small arrays through the settings)
give exactly numpy's assignment, wait for every part, raise a part's error, and keep the thread
count bounded."""
import threading

import numpy as np
import pytest

from gpuc.runtime import hostcopy, settings


@pytest.fixture
def split():
    with settings.override(copy_threads=3, copy_split_bytes=64):
        yield


@pytest.mark.parametrize("shape,src_dtype", [((7, 5, 3), np.float32), ((1000,), np.float64), ((4, 33), np.int32),
                                             ((2, 2), np.float32), ((3, 4099), np.float32), ((1, 2, 3000), np.float32)])
def test_copy_into_equals_assignment(split, shape, src_dtype):
    src = (np.random.default_rng(0).standard_normal(shape) * 100).astype(src_dtype)
    dst = np.zeros(shape, np.float32)
    hostcopy.copy_into(dst, src)
    want = np.zeros(shape, np.float32)
    want[...] = src
    np.testing.assert_array_equal(dst, want)
    out = hostcopy.copy_out(dst)
    assert type(out) is np.ndarray and out.flags.owndata and not np.shares_memory(out, dst)
    np.testing.assert_array_equal(out, dst)


def test_byte_ranges_cover_once_aligned():
    for nbytes, n in [(1, 3), (4096, 3), (10 ** 6 + 7, 8), (64, 64)]:
        ranges = hostcopy._byte_ranges(nbytes, n)
        assert ranges[0][0] == 0 and ranges[-1][1] == nbytes and len(ranges) <= n
        assert all(a % hostcopy.ALIGN == 0 and a < b for a, b in ranges)
        assert all(ranges[i][1] == ranges[i + 1][0] for i in range(len(ranges) - 1))


def test_contiguous_parts_are_byte_ranges(split):
    dst, src = np.zeros((2, 5000), np.float32), np.ones((2, 5000), np.float32)
    parts = hostcopy._parts(dst, src, 3)
    assert len(parts) == 3 and all(d.dtype == np.uint8 for d, _ in parts)
    assert sum(d.nbytes for d, _ in parts) == dst.nbytes


def test_broadcast_strided_and_views(split):
    dst = np.zeros((6, 40), np.float32)
    hostcopy.copy_into(dst[:4], np.float32(2.5))            # a scalar: plain assignment
    assert (dst[:4] == 2.5).all() and (dst[4:] == 0).all()
    src = np.arange(240, dtype=np.float32).reshape(40, 6).T  # non-contiguous source: split along an axis
    hostcopy.copy_into(dst, src)
    np.testing.assert_array_equal(dst, src)
    big = np.zeros((40, 6), np.float32)
    hostcopy.copy_into(big.T, src)                          # non-contiguous destination
    np.testing.assert_array_equal(big.T, src)


def test_a_failing_part_raises_after_the_others(split):
    src = np.full((9, 30), 1.5, dtype=object)
    src[8, 29] = "not a number"                             # the last part fails
    dst = np.zeros((9, 30), np.float32)
    with pytest.raises(ValueError):
        hostcopy.copy_into(dst, src)
    assert (dst[:, :10] == 1.5).all()                       # the caller's own part (split along axis 1)


def test_single_thread_setting_never_splits(monkeypatch):
    monkeypatch.setattr(hostcopy, "_executor", lambda n: pytest.fail("split with copy_threads=1"))
    with settings.override(copy_threads=1, copy_split_bytes=1):
        dst = np.zeros((64, 64), np.float32)
        hostcopy.copy_into(dst, np.ones((64, 64), np.float32))
        assert (dst == 1).all()
    with settings.override(copy_threads=4, copy_split_bytes=1 << 30):     # under the size: not split
        hostcopy.copy_into(dst, np.zeros((64, 64), np.float32))
        assert (dst == 0).all()


def test_thread_count_bounded(split):
    for _ in range(50):
        hostcopy.copy_into(np.zeros((64, 64), np.float32), np.ones((64, 64), np.float32))
    copiers = [t for t in threading.enumerate() if t.name.startswith("gpuc-copy2_")]
    assert 1 <= len(copiers) <= 2                            # copy_threads=3: the caller and 2 workers
    assert hostcopy.threads() == 3


def test_env_setting(monkeypatch):
    monkeypatch.setenv("GPUC_COPY_THREADS", "5")
    monkeypatch.setenv("GPUC_COPY_SPLIT_BYTES", "4096")
    assert hostcopy.threads() == 5 and hostcopy.split_bytes() == 4096
    monkeypatch.setenv("GPUC_COPY_THREADS", "0")
    assert 1 <= hostcopy.threads() <= hostcopy.MAX_THREADS


def test_fixed_parts_setting_equals_assignment():
    with settings.override(copy_threads=3, copy_split_bytes=64, copy_chunks=1):
        assert hostcopy.Copier.current().chunks == 1
        src = np.random.default_rng(1).standard_normal((5, 9000)).astype(np.float32)
        dst = np.zeros_like(src)
        hostcopy.copy_into(dst, src)
        np.testing.assert_array_equal(dst, src)


def test_parts_go_to_the_threads_that_come():
    """Every pool thread busy elsewhere: the caller copies every part itself and returns without
    waiting for them; a pool thread that starts afterwards writes nothing."""
    with settings.override(copy_threads=3, copy_split_bytes=64, copy_chunks=4):
        copier = hostcopy.Copier.current()
    gate = threading.Event()
    pool = hostcopy._executor(2)
    blockers = [pool.submit(gate.wait) for _ in range(2)]
    try:
        src = np.random.default_rng(2).standard_normal((8, 4096)).astype(np.float32)
        dst = np.zeros_like(src)
        copier.copy_into(dst, src)
        np.testing.assert_array_equal(dst, src)
        dst[...] = 0
    finally:
        gate.set()
    for b in blockers:
        b.result(5)
    pool.submit(lambda: None).result(5)          # the queue is drained: no late part was written
    assert not dst.any()
