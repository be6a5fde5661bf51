"""LLM prefill attention as litert-torch writes it (passes/attention.py, shaders/attention.comp): K and V
read from the [1, kv, KH, D] cache through the head transpose and the GQA broadcast (BROADCAST_TO or
TILE: no copy of the cache per query head), the causal mask a GATHER_ND of a constant table by the
positions; key tiles masked for every row of a query block are skipped."""
import numpy as np
import pytest

pytest.importorskip("vulkan")

from gpuc.compiler.frontend.importer import load_tflite  # noqa: E402
from gpuc.compiler.ops import attention  # noqa: E402
from gpuc.compiler.passes import run_passes  # noqa: E402
from helpers.attention_models import attention_model  # noqa: E402
from helpers.fusion import close_to_litert  # noqa: E402
from helpers.fusion import run_counted as run  # noqa: E402
from helpers.litert import run_litert  # noqa: E402
from helpers.prefill_attention import prefill_reference, prefill_sdpa  # noqa: E402

RNG = np.random.default_rng(29)


def inputs(T=40, KV=128, H=4, KH=2, D=16, start=0):
    q = RNG.normal(0, 1.5, (1, T, H, D)).astype(np.float32)
    k, v = (RNG.normal(0, 1.5, (1, KV, KH, D)).astype(np.float32) for _ in range(2))
    return [q, k, v, np.arange(start, start + T, dtype=np.int32)]


SHAPES = {"tiles of 32 keys": dict(T=40, KV=128, D=16),                 # attention.comp
          "tiles of 64 keys": dict(T=80, KV=320, H=6, KH=2, D=64),      # attention_wide.comp
          "head dim 128": dict(T=64, KV=576, H=3, KH=1, D=128)}         # two chunks of D, V in two passes


@pytest.mark.parametrize("gqa,shape", [("broadcast_to", "tiles of 32 keys"), ("tile", "tiles of 32 keys"),
                                       ("broadcast_to", "tiles of 64 keys"), ("tile", "head dim 128")])
def test_gqa_cache_read_in_place_matches_litert(gqa, shape):
    kw = SHAPES[shape]
    model = prefill_sdpa(gqa=gqa, **kw)
    g = load_tflite(model).main
    run_passes(g)
    assert [n.op for n in g.nodes] == ["GATHER_ND", "ATTENTION"]     # no transpose, broadcast or tile copy
    att = g.nodes[1].attrs
    assert attention.wide(att["n"], att["m"], att["d"], att["dv"]) == (shape != "tiles of 32 keys")
    xs = inputs(**kw)
    outs, _ = run(model, xs)
    close_to_litert(outs, model, xs)
    ref = prefill_reference(*xs)                   # the numpy value the H100 check compares with
    assert np.abs(outs[0] - ref).max() <= 1e-5 * np.abs(ref).max()
    xs = inputs(**kw, start=kw["KV"] - kw["T"] - 10)    # a later chunk: the first tiles live, the last masked
    close_to_litert(run(model, xs)[0], model, xs)


@pytest.mark.parametrize("shape", [dict(T=32), dict(T=64, KV=320)], ids=["tiles of 32 keys", "tiles of 64 keys"])
def test_masked_key_tiles_are_skipped(shape):
    """Keys past the last position are masked for every query: their tiles are never read (NaN there
    stays out of the output, where the unfused SOFTMAX-then-product would spread it); -inf masks too."""
    for fill in (np.finfo(np.float32).min, -np.inf):
        model = prefill_sdpa(fill=fill, **shape)
        q, k, v, pos = inputs(**shape)
        k[0, 128:] = np.nan                    # keys 128.. : whole tiles beyond the last position
        v[0, 128:] = np.nan
        out = run(model, [q, k, v, pos])[0][0]
        assert np.isfinite(out).all()
        k[0, 128:] = v[0, 128:] = 0.0
        close_to_litert([out], model, [q, k, v, pos])


WIDE_FORMS = [
    dict(b=1, h=2, n=70, m=300, d=48, dv=40, scale=None, mask="runtime"),   # partial tiles, D / DV < 64
    dict(b=1, h=1, n=64, m=257, d=64, mask="sub", scale="beta"),             # SUB mask, scale as beta
    dict(b=2, h=1, n=100, m=260, d=16, scale="q"),                           # no mask: nothing skipped
    dict(b=1, h=2, n=66, m=256, d=8, k_form="transpose", mask="neg_inf"),    # -inf causal mask
    dict(b=1, h=2, n=70, m=300, d=160, dv=200, mask="runtime", pf=0),  # 3 chunks of D, V 16 keys a pass; no prefetch
    dict(b=1, h=1, n=64, m=520, d=72, dv=96, scale="q"),          # long keys, D / DV past 64: fused (worthwhile)
]


@pytest.mark.parametrize("kw", WIDE_FORMS, ids=[str(i) for i in range(len(WIDE_FORMS))])
def test_wide_kernel_forms_match_litert(kw):
    """attention_wide.comp over the chain forms attention.comp takes (tests/helpers/attention_models.py);
    pf: its PF define (1: loads of the next stage in flight while one is used, kept for the benchmark's A/B
    and run by most forms here, CompileOptions.attention_prefetch; 0: ops/attention.py WIDE_PREFETCH's default,
    and the other tests')."""
    kw = dict(kw)
    pf = bool(kw.pop("pf", 1))
    model, shapes = attention_model(**kw)
    g = load_tflite(model).main
    run_passes(g)
    att = next(n for n in g.nodes if n.op == "ATTENTION").attrs
    assert attention.wide(att["n"], att["m"], att["d"], att["dv"])
    xs = [RNG.normal(0, 1.5, s).astype(np.float32) for s in shapes]
    if kw.get("mask") == "runtime":
        xs[-1] = np.where(RNG.random(shapes[-1]) < 0.3, -100.0, RNG.normal(0, 1, shapes[-1])).astype(np.float32)
        xs[-1][0, 0, :, 64:192] = np.finfo(np.float32).min       # whole tiles masked for every row
        xs[-1][0, 1, 3, :] = -np.inf                              # a row masked everywhere
    out = run(model, xs, attention_prefetch=pf)[0][0]
    if kw.get("mask") == "runtime":     # NaN as the unfused ops (LiteRT's ADD makes -inf -FLT_MAX there)
        assert np.isnan(out[0, 1, 3]).all()
        out[0, 1, 3] = run_litert(model, xs)[0][0, 1, 3]
    close_to_litert([out], model, xs, nonfinite_equal=True)

