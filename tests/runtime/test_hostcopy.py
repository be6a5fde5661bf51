"""runtime/hostcopy.py: large host copies split over threads give exactly numpy's assignment."""
import numpy as np
import pytest

from gpuc.runtime import hostcopy


@pytest.fixture
def split(monkeypatch):
    monkeypatch.setattr(hostcopy, "SPLIT_BYTES", 64)
    monkeypatch.setattr(hostcopy, "_threads", lambda: 3)
    monkeypatch.setattr(hostcopy, "_pool", None)


@pytest.mark.parametrize("shape,src_dtype", [((7, 5, 3), np.float32), ((1000,), np.float64), ((4, 33), np.int32),
                                             ((2, 2), np.float32)])
def test_copy_into_equals_assignment(split, shape, src_dtype):
    src = (np.random.default_rng(0).standard_normal(shape) * 100).astype(src_dtype)
    dst = np.zeros(shape, np.float32)
    hostcopy.copy_into(dst, src)
    want = np.zeros(shape, np.float32)
    want[...] = src
    np.testing.assert_array_equal(dst, want)
    np.testing.assert_array_equal(hostcopy.copy_out(dst), dst)


def test_broadcast_and_views(split):
    dst = np.zeros((6, 40), np.float32)
    hostcopy.copy_into(dst[:4], np.float32(2.5))            # a scalar: plain assignment
    assert (dst[:4] == 2.5).all() and (dst[4:] == 0).all()
    src = np.arange(240, dtype=np.float32).reshape(40, 6).T  # non-contiguous source
    hostcopy.copy_into(dst, src)
    np.testing.assert_array_equal(dst, src)
