"""A decode step's cache writes folded into its attention (compiler/ops/kv_write.py fold_into_attention):
litert-torch's decode layer -- q and k rotated out of a fused QKV projection, k and v written into the
caches by DYNAMIC_UPDATE_SLICE at the step's position, the attention composite over the written caches --
runs as one SDPA_DECODE (split + combine) that writes both caches itself, checked against LiteRT (which
runs the plain ops) and bit for bit against gpuc with the fold off, at positions in the first, a middle
and the last key chunk, and one past the end (clamped as LiteRT clamps it)."""
from __future__ import annotations

import numpy as np
import pytest
from flatbuffers import flexbuffers

from helpers.builder import ModelBuilder, with_subgraphs

pytest.importorskip("vulkan")

import gpuc  # noqa: E402
from gpuc.runtime.bundle import read_bundle  # noqa: E402
from helpers.litert import run_litert  # noqa: E402
from helpers.llm_graphs import NAME, const, op, sdpa_decomposition  # noqa: E402

H, KH, D, KV = 4, 2, 16, 64          # (four 16-key chunks)








def _part(b, qkv, begin, heads):
    s = op(b, "SLICE", [qkv, const(b, np.int32([0, 0, begin])), const(b, np.int32([1, 1, heads * D]))], [1, 1, heads * D])
    return op(b, "RESHAPE", [s, const(b, np.int32([1, 1, heads, D]))], [1, 1, heads, D], new_shape=[1, 1, heads, D])


def _rope(b, x, heads, c, s):
    h, xs = D // 2, [1, 1, heads, D]
    half = xs[:-1] + [h]
    x1 = op(b, "SLICE", [x, const(b, np.int32([0, 0, 0, 0])), const(b, np.int32(half))], half)
    x2 = op(b, "SLICE", [x, const(b, np.int32([0, 0, 0, h])), const(b, np.int32([-1, -1, -1, h]))], half)
    o1 = op(b, "SUB", [op(b, "MUL", [x1, c], half), op(b, "MUL", [x2, s], half)], half)
    o2 = op(b, "ADD", [op(b, "MUL", [x2, c], half), op(b, "MUL", [x1, s], half)], half)
    return op(b, "CONCATENATION", [o1, o2], xs, axis=3)


def model() -> bytes:
    b = ModelBuilder()
    qkv = b.input("qkv", [1, 1, (H + 2 * KH) * D])
    c, s = b.input("cos", [1, 1, 1, D // 2]), b.input("sin", [1, 1, 1, D // 2])
    kc, vc = b.input("kv_cache_k", [1, KV, KH, D]), b.input("kv_cache_v", [1, KV, KH, D])
    start, mask = b.input("start", [4], "int32"), b.input("mask", [1, 1, 1, KV])
    q = _rope(b, _part(b, qkv, 0, H), H, c, s)
    k = _rope(b, _part(b, qkv, H * D, KH), KH, c, s)
    ko = op(b, "DYNAMIC_UPDATE_SLICE", [kc, k, start], [1, KV, KH, D])
    vo = op(b, "DYNAMIC_UPDATE_SLICE", [vc, _part(b, qkv, (H + KH) * D, KH), start], [1, KV, KH, D])
    y = b.tensor("y", [1, 1, H, D])
    b.operators.append({"opcode_index": b.opcode("STABLEHLO_COMPOSITE"), "inputs": np.asarray([q, ko, vo, mask], np.int32),
                        "outputs": np.asarray([y], np.int32),
                        "builtin_options2": ("StableHLOCompositeOptions",
                                             {"name": NAME, "decomposition_subgraph_index": 1,
                                              "composite_attributes": np.frombuffer(flexbuffers.Dumps({}), np.uint8)})})
    for o in (y, ko, vo):
        b.output(o)
    return with_subgraphs(b, sdpa_decomposition(H, KH, D, KV, 1, (1, 1, 1, KV), D ** -0.25))


def _inputs(pos, seed=0):
    r = np.random.default_rng(seed)
    ang = r.uniform(-3, 3, [1, 1, 1, D // 2]).astype(np.float32)
    mask = np.zeros([1, 1, 1, KV], np.float32)
    mask[..., min(pos, KV - 1) + 1:] = np.finfo(np.float32).min          # (causal: keys up to the position)
    return [r.standard_normal([1, 1, (H + 2 * KH) * D]).astype(np.float32), np.cos(ang), np.sin(ang),
            r.standard_normal([1, KV, KH, D]).astype(np.float32), r.standard_normal([1, KV, KH, D]).astype(np.float32),
            np.int32([0, pos, 0, 0]), mask]


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
