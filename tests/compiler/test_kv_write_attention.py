"""A decode step's cache writes folded into its attention (compiler/ops/kv_write.py fold_into_attention):
litert-torch's decode layer -- q and k rotated out of a fused QKV projection, k and v written into the
caches by DYNAMIC_UPDATE_SLICE at the step's position, the attention composite over the written caches --
runs as one SDPA_DECODE (split + combine) that writes both caches itself, checked against LiteRT (which
runs the plain ops) and bit for bit against gpuc with the fold off, at positions in the first, a middle
and the last key chunk, and one past the end (clamped as LiteRT clamps it)."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("vulkan")

import gpuc  # noqa: E402
from gpuc.runtime.bundle import read_bundle  # noqa: E402
from helpers.litert import run_litert  # noqa: E402
from helpers.kv_write_graphs import inputs as _inputs, model  # noqa: E402


@pytest.fixture(scope="module")
def bundles():
    data = model()
    return data, gpuc.compile(data), gpuc.compile(data, disable_passes=["fold_update_slices"])


def test_cache_writes_run_inside_the_attention(bundles):
    _, fused, plain = bundles
    labels = [d.label.split()[0] for d in read_bundle(fused).dispatches]
    # (the caches are plain inputs here, not a signature's state: a copy of each first, then split + combine)
    assert labels == ["SDPA_DECODE"] * 4, labels
    assert len(read_bundle(plain).dispatches) > 4


@pytest.mark.parametrize("pos", [0, 21, 63, 70])
def test_step_matches_litert_and_the_unfused_writes(bundles, pos):
    data, fused, plain = bundles
    xs = _inputs(pos)
    ref = run_litert(data, xs)
    got = gpuc.load(fused).run(xs)
    unf = gpuc.load(plain).run(xs)
    np.testing.assert_allclose(got[0], ref[0], rtol=1e-5, atol=2e-6)
    for g, r, u in zip(got, ref, unf):
        np.testing.assert_array_equal(g, u)
    for g, r in zip(got[1:], ref[1:]):
        np.testing.assert_array_equal(g, r)
