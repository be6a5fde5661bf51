"""KV-cache writes (compiler/ops/kv_write.py): a DYNAMIC_UPDATE_SLICE whose update is a RESHAPE of a
last-axis SLICE of a wider tensor (v of a fused QKV projection) reads the update from that tensor, so
no SLICE copy runs; checked against LiteRT, with starts in range and clamped.  An update read elsewhere
too keeps its SLICE and still matches."""
from __future__ import annotations

import numpy as np
import pytest

from helpers.builder import ModelBuilder

pytest.importorskip("vulkan")

import gpuc  # noqa: E402
from gpuc.runtime.bundle import read_bundle  # noqa: E402
from helpers.litert import run_litert  # noqa: E402

KV, KH, D, T, W = 10, 2, 8, 3, 48


def model(begin=32, expose=False, reshape=True) -> bytes:
    b = ModelBuilder()
    cache = b.input("cache", [1, KV, KH, D])
    qkv = b.input("qkv", [1, T, W])
    start = b.input("start", [4], "int32")
    if reshape:
        s = b.tensor("s", [1, T, KH * D])
        b.op("SLICE", [qkv, b.const("b", np.int32([0, 0, begin])), b.const("n", np.int32([1, T, KH * D]))], [s])
        v = b.tensor("v", [1, T, KH, D])
        b.op("RESHAPE", [s, b.const("shape", np.int32([1, T, KH, D]))], [v], new_shape=[1, T, KH, D])
    else:                    # (litert-torch's grouped QKV: [1, T, KH, G * D + 2 * D], v sliced per KV head)
        g4 = b.tensor("g4", [1, T, KH, W // KH])
        b.op("RESHAPE", [qkv, b.const("shape", np.int32([1, T, KH, W // KH]))], [g4], new_shape=[1, T, KH, W // KH])
        v = b.tensor("v", [1, T, KH, D])
        b.op("SLICE", [g4, b.const("b", np.int32([0, 0, 0, begin // KH])), b.const("n", np.int32([1, T, KH, D]))], [v])
    y = b.tensor("y", [1, KV, KH, D])
    b.op("DYNAMIC_UPDATE_SLICE", [cache, v, start], [y])
    b.output(y)
    if expose:
        b.output(v)
    return b.finish()


@pytest.mark.parametrize("begin,pos,reshape", [(32, 4, True), (16, 0, True), (0, 9, True),   # (9: clamped to 7)
                                               (32, 3, False)])
def test_update_read_from_its_source(begin, pos, reshape):
    data = model(begin, reshape=reshape)
    bundle = gpuc.compile(data)
    labels = [d.label for d in read_bundle(bundle).dispatches]
    assert not any(lb.startswith("SLICE") or "GATHER_COPY" in lb for lb in labels), labels
    r = np.random.default_rng(pos)
    xs = [r.standard_normal([1, KV, KH, D]).astype(np.float32), r.standard_normal([1, T, W]).astype(np.float32),
          np.int32([0, pos, 0, 0])]
    np.testing.assert_array_equal(gpuc.load(bundle).run(xs)[0], run_litert(data, xs)[0])


def test_update_read_elsewhere_keeps_its_slice():
    data = model(expose=True)
    r = np.random.default_rng(3)
    xs = [r.standard_normal([1, KV, KH, D]).astype(np.float32), r.standard_normal([1, T, W]).astype(np.float32),
          np.int32([0, 2, 0, 0])]
    for g, ref in zip(gpuc.load(gpuc.compile(data)).run(xs), run_litert(data, xs)):
        np.testing.assert_array_equal(g, ref)
