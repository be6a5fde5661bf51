"""Rotary position embeddings (compiler/ops/rope.py): the chain litert-torch writes (SLICE into halves,
x1*c - x2*s, x2*c + x1*s, CONCATENATION) becomes one ROPE dispatch reading x where it lies (a slice of
a fused QKV projection included), checked against LiteRT, which runs the chain.  Forms it does not
take (an intermediate read elsewhere, another sign) keep the chain and still match."""
from __future__ import annotations

import numpy as np
import pytest

from gpuc.compiler.frontend.importer import load_tflite
from helpers.builder import ModelBuilder

pytest.importorskip("vulkan")

import gpuc  # noqa: E402
from gpuc.compiler import prepare as P  # noqa: E402
from gpuc.runtime.bundle import read_bundle  # noqa: E402
from helpers.litert import run_litert  # noqa: E402
from helpers.llm_graphs import NAME, const, op, sdpa_decomposition  # noqa: E402






def model(T=3, H=4, D=16, W=None, begin=0, cs_shape=None, cs_const=False, swap=False, sign="SUB",
          expose=False, cache=0, heads_first=False, sdpa=False) -> bytes:
    """x = RESHAPE(SLICE(qkv, last axis [begin, begin + H*D)), [1, T, H, D]) (W: qkv's width; None: x
    is the input itself), rotated by c and s of shape cs_shape (inputs, or constants); cache > 0: the
    result written by DYNAMIC_UPDATE_SLICE into a [1, cache, H, D] input at run-time start indices.
    heads_first (T = 1, as litert-torch's decode): x is [1, H, 1, D], RESHAPEd to [1, 1, H, D] after the
    rotation; sdpa: the result is the q of an odml.scaled_dot_product_attention composite."""
    b = ModelBuilder()
    h = D // 2
    xs = [1, H, T, D] if heads_first else [1, T, H, D]
    half = xs[:-1] + [h]
    cs_shape = list(cs_shape or [1, T, 1, h])
    if W is None:
        x = b.input("x", xs)
    else:
        qkv = b.input("qkv", [1, T, W])
        s = op(b, "SLICE", [qkv, const(b, np.int32([0, 0, begin])), const(b, np.int32([1, T, H * D]))], [1, T, H * D])
        x = op(b, "RESHAPE", [s, const(b, np.int32(xs))], xs, new_shape=xs)
    r = np.random.default_rng(1)
    if cs_const:
        ang = r.uniform(-3, 3, cs_shape).astype(np.float32)
        c, s = const(b, np.cos(ang)), const(b, np.sin(ang))
    else:
        c, s = b.input("cos", cs_shape), b.input("sin", cs_shape)
    x1 = op(b, "SLICE", [x, const(b, np.int32([0, 0, 0, 0])), const(b, np.int32(half))], half)
    x2 = op(b, "SLICE", [x, const(b, np.int32([0, 0, 0, h])), const(b, np.int32([-1, -1, -1, h]))], half)

    def mul(a, k):
        return op(b, "MUL", [k, a] if swap else [a, k], half)
    a = mul(x1, c)
    o1 = op(b, sign, [a, mul(x2, s)], half)
    o2 = op(b, "ADD", [mul(x1, s), mul(x2, c)] if swap else [mul(x2, c), mul(x1, s)], half)
    y = op(b, "CONCATENATION", [o1, o2], xs, axis=3)
    if heads_first:
        y = op(b, "RESHAPE", [y, const(b, np.int32([1, T, H, D]))], [1, T, H, D], new_shape=[1, T, H, D])
    if sdpa:
        return _with_attention(b, y, H, D)
    if cache:
        kv, start = b.input("kv", [1, cache, H, D]), b.input("start", [4], "int32")
        y = op(b, "DYNAMIC_UPDATE_SLICE", [kv, y, start], [1, cache, H, D])
    b.output(y)
    if expose:
        b.output(a)
    return b.finish()


def _with_attention(b, q, H, D, KV=20, KH=2) -> bytes:
    """`q` as the query of litert-torch's decode attention composite (tests/compiler/test_sdpa_decode.py)."""
    from flatbuffers import flexbuffers
    from helpers.builder import with_subgraphs
    ins = [q, b.input("k", [1, KV, KH, D]), b.input("v", [1, KV, KH, D]), b.input("mask", [1, 1, 1, KV])]
    y = b.tensor("y", [1, 1, H, D])
    b.operators.append({"opcode_index": b.opcode("STABLEHLO_COMPOSITE"), "inputs": np.asarray(ins, np.int32),
                        "outputs": np.asarray([y], np.int32),
                        "builtin_options2": ("StableHLOCompositeOptions",
                                             {"name": NAME, "decomposition_subgraph_index": 1,
                                              "composite_attributes": np.frombuffer(flexbuffers.Dumps({}), np.uint8)})})
    b.output(y)
    return with_subgraphs(b, sdpa_decomposition(H, KH, D, KV, 1, (1, 1, 1, KV), D ** -0.25))


def _inputs(data, seed=0, pos=0):
    r = np.random.default_rng(seed)
    g = load_tflite(data).main
    out = []
    for t in g.inputs:
        shape = g.t(t).shape
        out.append(np.int32([0, pos, 0, 0]) if g.t(t).dtype == "int32" else
                   r.uniform(-1, 1, shape).astype(np.float32) if len(out) else
                   r.standard_normal(shape).astype(np.float32))
    return out


def _check(data, fused: bool, dispatches=None, pos=0):
    bundle = gpuc.compile(data)
    rb = read_bundle(bundle)
    assert ("rope" in {s.name for s in rb.shaders}) == fused
    if dispatches is not None:
        assert [d.label.split()[0] for d in rb.dispatches] == ["ROPE"] * dispatches, [d.label for d in rb.dispatches]
    xs = _inputs(data, pos=pos)
    ref = run_litert(data, xs)
    got = gpuc.load(bundle).run(xs)
    for g, r in zip(got, ref):
        np.testing.assert_allclose(g, r, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("kw", [dict(W=112, begin=64, H=2),               # k of a fused QKV: read in place
                                dict(W=160, begin=0),                      # q
                                dict(swap=True, cs_shape=[3, 1, 8]),       # x itself; operands swapped, rank-3 c/s
                                dict(cs_const=True, cs_shape=[1, 3, 4, 8])])   # constant c/s, one per head
def test_rope_chain_is_one_dispatch(kw):
    _check(model(**kw), fused=True, dispatches=1)


@pytest.mark.parametrize("pos", [2, 0, 9])            # (9: clamped to cache - T = 7, as LiteRT)
def test_rope_written_into_the_cache(pos):
    # (not in place here, unlike a signature's state: an operand copy, then the rotation into the cache)
    _check(model(W=112, begin=64, H=2, cache=10), fused=True, dispatches=2, pos=pos)


@pytest.mark.parametrize("pos", [5, 19])
def test_heads_first_rope_written_into_the_cache(pos):
    # litert-torch's decode: x [1, KH, 1, D] of the grouped QKV, RESHAPEd to [1, 1, KH, D] for the cache
    _check(model(T=1, W=112, begin=64, H=2, cs_shape=[1, 1, 8], heads_first=True, cache=20), fused=True,
           dispatches=2, pos=pos)


def test_rope_of_q_computed_inside_the_attention():
    data = model(T=1, W=112, begin=0, H=4, cs_shape=[1, 1, 8], heads_first=True, sdpa=True)
    bundle = gpuc.compile(data)
    rb = read_bundle(bundle)
    assert [d.label.split()[0] for d in rb.dispatches] == ["SDPA_DECODE"] * 2, [d.label for d in rb.dispatches]
    r = np.random.default_rng(4)
    g = load_tflite(data).main
    xs = [r.standard_normal(g.t(t).shape).astype(np.float32) for t in g.inputs]
    xs[-1][..., 13:] = np.finfo(np.float32).min            # (the mask: 13 of 20 keys)
    np.testing.assert_allclose(gpuc.load(bundle).run(xs)[0], run_litert(data, xs)[0], rtol=1e-5, atol=2e-6)


def test_other_forms_keep_the_chain():
    _check(model(W=112, begin=64, H=2, sign="ADD"), fused=False)      # not a rotation
    _check(model(expose=True), fused=False)                           # x1*c is also an output


def test_pass_can_be_disabled():
    data = model(W=112, begin=64, H=2)
    g = P.prepare(load_tflite(data), {"disable_passes": ["fuse_rope"]}).graph
    assert "ROPE" not in {n.op for n in g.nodes}
