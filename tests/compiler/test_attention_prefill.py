"""LLM prefill attention as litert-torch writes it (passes/attention.py, shaders/attention.comp): K and V
read from the [1, kv, KH, D] cache through the head transpose and the GQA broadcast (BROADCAST_TO or
TILE: no copy of the cache per query head), the causal mask a GATHER_ND of a constant table by the
positions; key tiles masked for every row of a query block are skipped."""
import numpy as np
import pytest

pytest.importorskip("vulkan")

from gpuc.compiler.frontend.importer import load_tflite  # noqa: E402
from gpuc.compiler.passes import run_passes  # noqa: E402
from helpers.builder import ModelBuilder  # noqa: E402
from helpers.fusion import close_to_litert  # noqa: E402
from helpers.fusion import run_counted as run  # noqa: E402

RNG = np.random.default_rng(29)


def prefill_sdpa(T=40, KV=128, H=4, KH=2, D=16, gqa="broadcast_to", fill=np.finfo(np.float32).min):
    """q [1, T, H, D], caches [1, KV, KH, D], positions [T] -> [1, T, H, D] (benchmarks/llm_bench.py's
    decomposition of odml.scaled_dot_product_attention)."""
    mb = ModelBuilder()
    q = mb.input("q", [1, T, H, D])
    k = mb.input("k", [1, KV, KH, D])
    v = mb.input("v", [1, KV, KH, D])
    pos = mb.input("pos", [T], "int32")
    n = [0]

    def t(shape, dtype="float32"):
        n[0] += 1
        return mb.tensor(f"t{n[0]}", shape, dtype)

    def op(name, ins, shape, dtype="float32", **kw):
        y = t(shape, dtype)
        mb.op(name, ins, [y], **kw)
        return y

    def i32(vals):
        n[0] += 1
        return mb.const(f"c{n[0]}", np.array(vals, np.int32))

    def reshape(x, shape, dtype="float32"):
        return op("RESHAPE", [x, i32(shape)], shape, dtype, new_shape=list(shape))

    table = np.where(np.arange(KV)[None, :] <= np.arange(KV)[:, None], 0, fill).astype(np.float32)
    mask = op("GATHER_ND", [mb.const("table", table), reshape(pos, [T, 1], "int32")], [T, KV])
    mask = reshape(mask, [1, 1, T, KV])
    perm, G = i32([0, 2, 1, 3]), H // KH

    def heads(x):
        x5 = reshape(op("TRANSPOSE", [x, perm], [1, KH, KV, D]), [1, KH, 1, KV, D])
        if gqa == "broadcast_to":
            xb = op("BROADCAST_TO", [x5, i32([1, KH, G, KV, D])], [1, KH, G, KV, D], version=2)
        else:
            xb = op("TILE", [x5, i32([1, 1, G, 1, 1])], [1, KH, G, KV, D])
        return reshape(xb, [1, H, KV, D])
    scale = mb.const("scale", np.float32(D ** -0.25))
    kh, vh = heads(k), heads(v)
    qt = op("TRANSPOSE", [op("MUL", [q, scale], [1, T, H, D]), perm], [1, H, T, D])
    kt = op("TRANSPOSE", [op("MUL", [kh, scale], [1, H, KV, D]), i32([0, 1, 3, 2])], [1, H, D, KV])
    s = op("BATCH_MATMUL", [reshape(qt, [H, T, D]), reshape(kt, [H, D, KV])], [H, T, KV])
    p = op("SOFTMAX", [op("ADD", [s, mask], [1, H, T, KV])], [1, H, T, KV], beta=1.0)
    o = op("BATCH_MATMUL", [reshape(p, [H, T, KV]), reshape(vh, [H, KV, D])], [H, T, D])
    mb.output(op("TRANSPOSE", [reshape(o, [1, H, T, D]), perm], [1, T, H, D]))
    return mb.finish()


def inputs(T=40, KV=128, H=4, KH=2, D=16, start=0):
    q = RNG.normal(0, 1.5, (1, T, H, D)).astype(np.float32)
    k, v = (RNG.normal(0, 1.5, (1, KV, KH, D)).astype(np.float32) for _ in range(2))
    return [q, k, v, np.arange(start, start + T, dtype=np.int32)]


@pytest.mark.parametrize("gqa", ["broadcast_to", "tile"])
def test_gqa_cache_read_in_place_matches_litert(gqa):
    model = prefill_sdpa(gqa=gqa)
    g = load_tflite(model).main
    run_passes(g)
    assert [n.op for n in g.nodes] == ["GATHER_ND", "ATTENTION"]     # no transpose, broadcast or tile copy
    xs = inputs()
    outs, _ = run(model, xs)
    close_to_litert(outs, model, xs)
    xs = inputs(start=70)                          # a later chunk: the first tiles live, the last masked
    close_to_litert(run(model, xs)[0], model, xs)


def test_masked_key_tiles_are_skipped():
    """Keys past the last position are masked for every query: their tiles are never read (NaN there
    stays out of the output, where the unfused SOFTMAX-then-product would spread it); -inf masks too."""
    for fill in (np.finfo(np.float32).min, -np.inf):
        model = prefill_sdpa(T=32, fill=fill)
        q, k, v, pos = inputs(T=32)
        k[0, 64:] = np.nan                     # keys 64.. : whole tiles beyond position 31
        v[0, 64:] = np.nan
        out = run(model, [q, k, v, pos])[0][0]
        assert np.isfinite(out).all()
        k[0, 64:] = v[0, 64:] = 0.0
        close_to_litert([out], model, [q, k, v, pos])
