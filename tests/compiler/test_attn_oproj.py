"""A decode attention read only by an int8 FC (the o-projection, through a RESHAPE): the FC's gemm_q8 combines
SDPA_DECODE's flash-decoding partials as it reads its row (pass fold_attention_combine, gemm_q8 ATTN), so the
step has no sdpa_decode_combine dispatch.  Checked against LiteRT's default CPU path (the decomposition, then
XNNPACK's dynamic-range FC) and against gpuc with the combine kept: GQA, several key chunks with the chunks
past the position skipped (-inf and finfo.min masks), a residual ADD folded into the FC; an attention output
read elsewhere too keeps the combine."""
from __future__ import annotations

import numpy as np
import pytest
from flatbuffers import flexbuffers

from helpers.builder import ModelBuilder, with_subgraphs

pytest.importorskip("vulkan")

import gpuc  # noqa: E402
from gpuc.runtime.bundle import read_bundle  # noqa: E402
from helpers.llm_graphs import NAME, sdpa_decomposition  # noqa: E402
from test_q8_fusion import litert_default  # noqa: E402


def model(H, KH, D, KV, N, also_out=False) -> bytes:
    """q, k, v, mask -> SDPA composite [1, 1, H, D] -> RESHAPE [1, 1, H * D] -> int8 FC [N] + r (ADD)."""
    rng = np.random.default_rng(3)
    mb = ModelBuilder()
    ins = [mb.input("q", [1, 1, H, D]), mb.input("k", [1, KV, KH, D]), mb.input("v", [1, KV, KH, D]),
           mb.input("mask", [1, 1, 1, KV]), mb.input("r", [1, 1, N])]
    y = mb.tensor("y", [1, 1, H, D])
    mb.operators.append({"opcode_index": mb.opcode("STABLEHLO_COMPOSITE"), "inputs": np.asarray(ins[:4], np.int32),
                         "outputs": np.asarray([y], np.int32),
                         "builtin_options2": ("StableHLOCompositeOptions",
                                              {"name": NAME, "decomposition_subgraph_index": 1,
                                               "composite_attributes": np.frombuffer(flexbuffers.Dumps(
                                                   {"scale": float(np.float32(D ** -0.5))}), np.uint8)})})
    row = mb.tensor("row", [1, 1, H * D])
    mb.op("RESHAPE", [y, mb.const("shape", np.array([1, 1, H * D], np.int32))], [row])
    w = rng.normal(0, (H * D) ** -0.5, (N, H * D)).astype(np.float32)
    s = (np.abs(w).max(1) / 127).astype(np.float32)
    q = np.clip(np.round(w / s[:, None]), -127, 127).astype(np.int8)
    o = mb.tensor("o", [1, 1, N])
    mb.op("FULLY_CONNECTED", [row, mb.const("w", q, quant=(s, 0, 0)), -1], [o], keep_num_dims=True)
    out = mb.tensor("out", [1, 1, N])
    mb.op("ADD", [o, ins[4]], [out])
    mb.output(out)
    if also_out:
        mb.output(y)
    return with_subgraphs(mb, sdpa_decomposition(H, KH, D, KV, 1, (1, 1, 1, KV), D ** -0.25))


def _inputs(H, KH, D, KV, N, valid, neg):
    r = np.random.default_rng(5)
    mask = np.zeros((1, 1, 1, KV), np.float32)
    mask[..., valid:] = neg
    return [r.standard_normal([1, 1, H, D]).astype(np.float32), r.standard_normal([1, KV, KH, D]).astype(np.float32),
            r.standard_normal([1, KV, KH, D]).astype(np.float32), mask, r.standard_normal([1, 1, N]).astype(np.float32)]


def _run(bundle, xs):
    with gpuc.load(bundle) as mod:
        return mod.run(xs)


@pytest.mark.parametrize("H,KH,D,KV,N,valid,neg", [
    (4, 2, 16, 100, 24, 60, np.finfo(np.float32).min),   # GQA, 4 chunks, the last 2 past the position
    (6, 3, 20, 200, 40, 150, -np.inf),                   # 7 chunks, -inf mask, D not a power of 2
    (2, 1, 64, 70, 8, 70, 0.0)])                         # every key live
def test_o_projection_combines_the_partials(H, KH, D, KV, N, valid, neg):
    data, xs = model(H, KH, D, KV, N), _inputs(H, KH, D, KV, N, valid, neg)
    bundle = gpuc.compile(data)
    labels = [d.label for d in read_bundle(bundle).dispatches]
    names = {s.name.split("+")[0] for s in read_bundle(bundle).shaders}
    assert "sdpa_decode_split" in names and "sdpa_decode_combine" not in names, names
    assert len(labels) == 2, labels              # the split, the FC with its residual ADD
    got = _run(bundle, xs)[0]
    ref = litert_default(data, xs)[0]
    kept = gpuc.compile(data, disable_passes=["fold_attention_combine"])
    assert "sdpa_decode_combine" in {s.name.split("+")[0] for s in read_bundle(kept).shaders}
    plain = _run(kept, xs)[0]
    scale = np.abs(ref).max()
    assert np.abs(got - ref).max() <= 1e-4 * scale
    assert np.abs(got - plain).max() <= 1e-4 * scale


def test_attention_read_elsewhere_keeps_the_combine():
    H, KH, D, KV, N = 4, 2, 16, 100, 24
    data, xs = model(H, KH, D, KV, N, also_out=True), _inputs(H, KH, D, KV, N, 60, -np.inf)
    bundle = gpuc.compile(data)
    assert "sdpa_decode_combine" in {s.name.split("+")[0] for s in read_bundle(bundle).shaders}
    got, ref = _run(bundle, xs), litert_default(data, xs)
    for g, r in zip(got, ref):
        assert np.abs(g - r).max() <= 1e-4 * np.abs(r).max()
