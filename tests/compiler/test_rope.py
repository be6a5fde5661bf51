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


def _op(b, op, ins, shape, **opts):
    b.n = getattr(b, "n", 0) + 1
    y = b.tensor(f"t{b.n}", list(shape))
    b.op(op, ins, [y], **opts)
    return y


def _c(b, v):
    b.n = getattr(b, "n", 0) + 1
    return b.const(f"c{b.n}", np.asarray(v))


def model(T=3, H=4, D=16, W=None, begin=0, cs_shape=None, cs_const=False, swap=False, sign="SUB",
          expose=False, cache=0) -> bytes:
    """x = RESHAPE(SLICE(qkv, last axis [begin, begin + H*D)), [1, T, H, D]) (W: qkv's width; None: x
    is the input itself), rotated by c and s of shape cs_shape (inputs, or constants); cache > 0: the
    result written by DYNAMIC_UPDATE_SLICE into a [1, cache, H, D] input at run-time start indices."""
    b = ModelBuilder()
    h = D // 2
    half = [1, T, H, h]
    cs_shape = list(cs_shape or [1, T, 1, h])
    if W is None:
        x = b.input("x", [1, T, H, D])
    else:
        qkv = b.input("qkv", [1, T, W])
        s = _op(b, "SLICE", [qkv, _c(b, np.int32([0, 0, begin])), _c(b, np.int32([1, T, H * D]))], [1, T, H * D])
        x = _op(b, "RESHAPE", [s, _c(b, np.int32([1, T, H, D]))], [1, T, H, D], new_shape=[1, T, H, D])
    r = np.random.default_rng(1)
    if cs_const:
        ang = r.uniform(-3, 3, cs_shape).astype(np.float32)
        c, s = _c(b, np.cos(ang)), _c(b, np.sin(ang))
    else:
        c, s = b.input("cos", cs_shape), b.input("sin", cs_shape)
    x1 = _op(b, "SLICE", [x, _c(b, np.int32([0, 0, 0, 0])), _c(b, np.int32(half))], half)
    x2 = _op(b, "SLICE", [x, _c(b, np.int32([0, 0, 0, h])), _c(b, np.int32([-1, -1, -1, h]))], half)

    def mul(a, k):
        return _op(b, "MUL", [k, a] if swap else [a, k], half)
    a = mul(x1, c)
    o1 = _op(b, sign, [a, mul(x2, s)], half)
    o2 = _op(b, "ADD", [mul(x1, s), mul(x2, c)] if swap else [mul(x2, c), mul(x1, s)], half)
    y = _op(b, "CONCATENATION", [o1, o2], [1, T, H, D], axis=3)
    if cache:
        kv, start = b.input("kv", [1, cache, H, D]), b.input("start", [4], "int32")
        y = _op(b, "DYNAMIC_UPDATE_SLICE", [kv, y, start], [1, cache, H, D])
    b.output(y)
    if expose:
        b.output(a)
    return b.finish()


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


def test_other_forms_keep_the_chain():
    _check(model(W=112, begin=64, H=2, sign="ADD"), fused=False)      # not a rotation
    _check(model(expose=True), fused=False)                           # x1*c is also an output


def test_pass_can_be_disabled():
    data = model(W=112, begin=64, H=2)
    g = P.prepare(load_tflite(data), {"disable_passes": ["fuse_rope"]}).graph
    assert "ROPE" not in {n.op for n in g.nodes}
