"""`odml.scaled_dot_product_attention` for one query token (compiler/ops/sdpa_decode.py): the
decomposition litert-torch writes (GQA by TRANSPOSE + RESHAPE + BROADCAST_TO, Q and K scaled, the mask
added, SOFTMAX, two BATCH_MATMULs) becomes SDPA_DECODE's two dispatches, checked against LiteRT's builtin
kernels (which run the decomposition): GQA and MHA, several key chunks, chunks wholly masked (finfo.min and -inf: skipped
where a key is live), every key masked (nothing skipped).
Forms it does not take (a per-head mask, two query rows) keep the decomposition and still match."""
from __future__ import annotations

import numpy as np
import pytest
from flatbuffers import flexbuffers

from gpuc.compiler.frontend.importer import load_tflite
from helpers.builder import ModelBuilder, with_subgraphs

pytest.importorskip("vulkan")

import gpuc  # noqa: E402
from gpuc.runtime.bundle import read_bundle  # noqa: E402
from helpers.litert import run_litert, run_litert_both  # noqa: E402
from helpers.llm_graphs import NAME, sdpa_decomposition  # noqa: E402

def model(H=4, KH=2, D=16, KV=100, T=1, mask_shape=None, attrs=None) -> bytes:
    mask_shape = mask_shape or (1, 1, T, KV)
    mb = ModelBuilder()
    ins = [mb.input("q", [1, T, H, D]), mb.input("k", [1, KV, KH, D]), mb.input("v", [1, KV, KH, D]),
           mb.input("mask", list(mask_shape))]
    y = mb.tensor("y", [1, T, H, D])
    mb.operators.append({"opcode_index": mb.opcode("STABLEHLO_COMPOSITE"), "inputs": np.asarray(ins, np.int32),
                         "outputs": np.asarray([y], np.int32),
                         "builtin_options2": ("StableHLOCompositeOptions",
                                              {"name": NAME, "decomposition_subgraph_index": 1,
                                               "composite_attributes": np.frombuffer(
                                                   flexbuffers.Dumps(attrs if attrs is not None else {}), np.uint8)})})
    mb.output(y)
    return with_subgraphs(mb, sdpa_decomposition(H, KH, D, KV, T, mask_shape, D ** -0.25))


def _inputs(H=4, KH=2, D=16, KV=100, T=1, mask_shape=None, valid=60, neg=np.finfo(np.float32).min, seed=0):
    r = np.random.default_rng(seed)
    mask = np.zeros(mask_shape or (1, 1, T, KV), np.float32)
    mask[..., valid:] = neg
    return [r.standard_normal([1, T, H, D]).astype(np.float32), r.standard_normal([1, KV, KH, D]).astype(np.float32),
            r.standard_normal([1, KV, KH, D]).astype(np.float32), mask]


def _check(data, xs, fused: bool):
    ops = [n.op for n in load_tflite(data).main.nodes]
    assert (ops == ["SDPA_DECODE"]) == fused, ops
    bundle = gpuc.compile(data)
    templates = {s.name for s in read_bundle(bundle).shaders}
    assert ("sdpa_decode_split" in templates) == fused
    ref = run_litert(data, xs)[0]
    got = gpuc.load(bundle).run(xs)[0]
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=2e-6)


@pytest.mark.parametrize("H,KH,KV,valid,neg", [(4, 2, 100, 60, np.finfo(np.float32).min),   # GQA, 4 chunks, 2 masked
                                                (2, 2, 100, 100, 0.0),                       # MHA, no key masked
                                                (8, 1, 70, 33, -np.inf),                     # one KV head, -inf mask
                                                (14, 2, 100, 37, np.finfo(np.float32).min),  # 7 query heads a KV head
                                                (4, 2, 100, 0, np.finfo(np.float32).min)])   # every key masked
def test_decode_form_fused_against_litert(H, KH, KV, valid, neg):
    attrs = {"scale": float(np.float32(16 ** -0.5))}
    _check(model(H, KH, KV=KV, attrs=attrs), _inputs(H, KH, KV=KV, valid=valid, neg=neg), fused=True)


def test_other_forms_keep_the_decomposition():
    per_head = (1, 4, 1, 100)                      # a mask per head: not the form SDPA_DECODE takes
    _check(model(mask_shape=per_head), _inputs(mask_shape=per_head), fused=False)
    _check(model(T=2), _inputs(T=2), fused=False)   # two query rows: prefill's form
    # a scale attribute that disagrees with the decomposition's constants: the attribute wins, as in LiteRT's
    # default interpreter (XNNPACK runs the composite natively; the decomposition is rebuilt: ops/sdpa_composite.py)
    data, xs = model(attrs={"scale": 0.5}), _inputs()
    ref = run_litert_both(data, xs)[0][0]
    np.testing.assert_allclose(gpuc.load(gpuc.compile(data)).run(xs)[0], ref, rtol=1e-5, atol=2e-6)


@pytest.mark.parametrize("H,KH,D,KV,valid,max_nchunk,seg", [
    (4, 2, 128, 300, 200, 1, 32),     # 256-key chunks: passes, values loaded in the loop
    (2, 1, 256, 1100, 1000, 64, 32),  # 35 chunks: the combine loops
    (14, 2, 16, 100, 37, 64, 8)])     # 8-invocation head segments: lavapipe's subgroup (no barrier)
def test_decode_long_chunks_and_many_chunks(monkeypatch, H, KH, D, KV, valid, max_nchunk, seg):
    from gpuc.compiler.ops import sdpa_decode
    monkeypatch.setattr(sdpa_decode, "MAX_NCHUNK", max_nchunk)
    monkeypatch.setattr(sdpa_decode, "SEG", seg)
    monkeypatch.setenv("GPUC_NO_CACHE", "1")       # (the constants are not in the compile cache's key)
    attrs = {"scale": float(np.float32(D ** -0.5))}
    _check(model(H, KH, D, KV, attrs=attrs), _inputs(H, KH, D, KV, valid=valid), fused=True)


def _numpy_sdpa(q, k, v, mask, H, KH, D):
    G = H // KH
    qs = q.reshape(H, D).astype(np.float64) * np.float32(D ** -0.25)      # (the decomposition's scales)
    kk = np.repeat(k.reshape(-1, KH, D).transpose(1, 0, 2), G, 0) * np.float32(D ** -0.25)
    vv = np.repeat(v.reshape(-1, KH, D).transpose(1, 0, 2), G, 0)
    s = np.einsum("hd,hjd->hj", qs, kk) + mask.reshape(1, -1)
    p = np.exp(s - s.max(-1, keepdims=True))
    return (np.einsum("hj,hjd->hd", p / p.sum(-1, keepdims=True), vv)).reshape(1, 1, H, D)


@pytest.mark.parametrize("H,KH,D,KV", [(12, 2, 128, 300),    # 6 query heads a KV head, head size 128
                                       (4, 4, 64, 200)])     # MHA (1 a KV head), head size 64
def test_one_dispatch_matches_split_and_combine(monkeypatch, H, KH, D, KV):
    """The one-dispatch form (the last workgroup of each KV head combines; ops/sdpa_decode.py ONE_DISPATCH)
    against the two-dispatch plan and numpy, at positions 0, inside and a full cache, in turns over
    several runs of one loaded model: the arrival counters go back to 0 after each run (else a run after
    the first would find no last workgroup and keep a stale output)."""
    from gpuc.compiler.ops import sdpa_decode
    monkeypatch.setenv("GPUC_NO_CACHE", "1")       # (the constant is not in the compile cache's key)
    data = model(H, KH, D, KV)
    bundles = []
    for one in (True, False):
        monkeypatch.setattr(sdpa_decode, "ONE_DISPATCH", one)
        bundles.append(gpuc.compile(data))
    assert [len(read_bundle(b).dispatches) for b in bundles] == [1, 2]
    q, k, v, _ = _inputs(H, KH, D, KV)
    with gpuc.load(bundles[0]) as m1, gpuc.load(bundles[1]) as m2:
        for rep in range(3):
            for valid in (1, 77, KV):
                mask = np.zeros((1, 1, 1, KV), np.float32)
                mask[..., valid:] = np.finfo(np.float32).min
                xs = [q * (1 + rep), k, v, mask]
                got, ref2 = m1.run(xs)[0], m2.run(xs)[0]
                np.testing.assert_allclose(got, ref2, rtol=2e-6, atol=1e-6)
                np.testing.assert_allclose(got, _numpy_sdpa(*xs, H, KH, D), rtol=1e-5, atol=2e-6)


def test_one_dispatch_writes_the_cache_and_rotates_q(monkeypatch):
    """The one-dispatch form with the step's cache writes and q's rotation folded in (kv_write, rope): the
    same output and caches as split + combine, at the first position, inside and the last."""
    from gpuc.compiler.ops import sdpa_decode
    from helpers.kv_write_graphs import inputs as kv_inputs, model as kv_model
    monkeypatch.setenv("GPUC_NO_CACHE", "1")
    data = kv_model()
    models = []
    for one in (True, False):
        monkeypatch.setattr(sdpa_decode, "ONE_DISPATCH", one)
        bundle = gpuc.compile(data)
        assert [d.label.split()[0] for d in read_bundle(bundle).dispatches] == ["SDPA_DECODE"] * (3 if one else 4)
        models.append(gpuc.load(bundle))
    with models[0] as m1, models[1] as m2:
        for pos in (0, 21, 70, 0):
            xs = kv_inputs(pos, seed=pos)
            for a, b in zip(m1.run(xs), m2.run(xs)):
                np.testing.assert_allclose(a, b, rtol=2e-6, atol=1e-6)
