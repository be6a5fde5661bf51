"""fuse_attention (passes/attention.py, ops/attention.py, shaders/attention.comp): attention chains as
converters write them become one ATTENTION dispatch matching LiteRT within 1e-5 of max|ref| (fp32);
near-misses keep their ops and still match."""
import numpy as np
import pytest

pytest.importorskip("vulkan")

from gpuc.compiler.frontend.importer import load_tflite  # noqa: E402
from gpuc.compiler.passes import run_passes  # noqa: E402
from helpers.attention_models import attention_model  # noqa: E402
from helpers.builder import ModelBuilder  # noqa: E402
from helpers.fusion import close_to_litert as _close  # noqa: E402
from helpers.fusion import run_counted as run  # noqa: E402
from helpers.litert import run_litert  # noqa: E402

RNG = np.random.default_rng(15)


def close_to_litert(outs, model, inputs, tol=1e-5):
    _close(outs, model, inputs, tol=tol, nonfinite_equal=True)


def ops_after_passes(model, disabled=()):
    g = load_tflite(model).main
    run_passes(g, disabled=disabled)
    return [n.op for n in g.nodes]


def inputs_for(shapes, mask_kind=None):
    xs = [RNG.normal(0, 1.5, s).astype(np.float32) for s in shapes]
    if mask_kind in ("swin", "runtime"):
        xs[-1] = np.where(RNG.random(shapes[-1]) < 0.3, -100.0, RNG.normal(0, 1, shapes[-1])).astype(np.float32)
    return xs


VARIANTS = [
    dict(),                                                   # adj_y, MUL after
    dict(k_form="transpose"),                                 # K^T by an explicit TRANSPOSE
    dict(k_form="given", scale="div"),                        # K^T given, DIV by sqrt(d)
    dict(scale="after_first", mask="heads"),                  # MUL(c, s), constant [h, n, m] bias
    dict(scale="q", k_form="transpose"),                      # scale applied to Q before the product
    dict(scale="qk", mask="keys"),                            # both operands scaled, [m] bias
    dict(scale="beta"),                                       # scale as the SOFTMAX beta
    dict(scale=None, mask="runtime"),                         # no scale, runtime [b, h, n, m] mask as ADD(mask, s)
    dict(mask="sub"),                                         # SUB of a runtime [1, 1, 1, m] tensor
    dict(b=4, h=2, n=7, d=16, mask="swin"),                   # Swin: bias, RESHAPE, [nW, 1, n, m] window mask
    dict(b=3, h=2, n=6, m=9, d=4, mask="neg_inf"),            # -inf causal mask (m > n: nothing fully masked)
    dict(flat=True, k_form="transpose", mask="heads"),        # litert-torch's 3-D products with RESHAPEs
    dict(v_form="adj_y"),                                     # V transposed through the second adj_y
    dict(q_form="heads", n=9, d=8, k_form="transpose"),       # Q, K, V sliced out of one qkv tensor
    dict(q_form="heads", split="strided", out_form="merge"),  # ... by STRIDED_SLICE, heads merged after
    dict(q_form="heads", split="split", scale="q"),           # ... by SPLIT
    dict(q_form="heads", split="unpack", mask="heads"),       # ... by UNPACK
    dict(out_form="merge", mask="heads"),                     # the heads merged back after the product
    dict(b=1, h=1, n=1, m=1, d=5),                            # one query, one key
    dict(b=1, h=2, n=1, m=40, d=32),                          # decode-like: one query row
    dict(b=1, h=2, n=70, m=45, d=80, dv=96),                  # tiles not multiples of anything
    dict(b=1, h=2, n=33, m=100, d=96, k_form="transpose"),
    dict(b=1, h=1, n=50, m=77, d=128, mask="keys"),
    dict(b=1, h=1, n=17, m=33, d=200, dv=300),                # D in chunks, V in chunks
]


@pytest.mark.parametrize("split", [1, 3])
@pytest.mark.parametrize("kw", VARIANTS, ids=[str(i) for i in range(len(VARIANTS))])
def test_variant_is_one_dispatch_and_matches_litert(kw, split):
    """One dispatch (split = 1); with the key tiles split 3 ways across workgroups (at most one part a
    tile), a merge dispatch more where there are several tiles, the same results."""
    model, shapes = attention_model(**kw)
    ops = ops_after_passes(model)
    assert ops.count("ATTENTION") == 1
    assert not {"SOFTMAX", "BATCH_MATMUL"} & set(ops)
    if kw.get("q_form") == "heads" or kw.get("k_form") == "transpose" or kw.get("out_form") == "merge":
        assert ops == ["ATTENTION"]         # head split, K's transpose, head merge: read / written through
    xs = inputs_for(shapes, kw.get("mask"))
    outs, n = run(model, xs, attention_split=split)
    base = 1 + sum(op != "ATTENTION" for op in ops)
    assert n == base if split == 1 else n in (base, base + 1)
    close_to_litert(outs, model, xs)
    if split == 1:
        off, n_off = run(model, xs, disable_passes=["fuse_attention"])
        assert n_off > n
        close_to_litert(off, model, xs)


@pytest.mark.parametrize("kw", [dict(b=1, h=2, n=70, m=45, d=80, dv=96), dict(b=1, h=1, n=50, m=77, d=128, mask="keys"),
                                dict(b=3, h=2, n=6, m=90, d=4, mask="neg_inf")])
def test_few_workgroups_split_the_keys(kw):
    """A grid of few workgroups over several key tiles (ops/attention.py key_split) splits them: two
    dispatches, results as LiteRT's, -inf masks included."""
    model, shapes = attention_model(**kw)
    xs = inputs_for(shapes, kw.get("mask"))
    outs, n = run(model, xs)
    assert n == 2
    close_to_litert(outs, model, xs)


@pytest.mark.parametrize("kw,split_dispatches", [(dict(mask="heads"), 1),          # (one key tile: no split)
                                                  (dict(b=1, h=2, n=70, d=64, k_form="transpose"), 2)])
def test_fp16_storage(kw, split_dispatches):
    model, shapes = attention_model(**kw)
    xs = inputs_for(shapes)
    for split in (1, 4):
        outs, n = run(model, xs, precision="fp16", attention_split=split)
        assert n == (1 if split == 1 else split_dispatches)
        close_to_litert(outs, model, xs, tol=2e-2)


NEAR_MISSES = {
    "scores are also an output": dict(expose="scores"),
    "probabilities are also an output": dict(expose="probs"),
    "scaled scores are also an output": dict(expose="scaled", mask="heads"),
}


@pytest.mark.parametrize("name", list(NEAR_MISSES))
def test_intermediate_used_elsewhere_is_not_fused(name):
    model, shapes = attention_model(**NEAR_MISSES[name])
    ops = ops_after_passes(model)
    assert "ATTENTION" not in ops and "SOFTMAX" in ops
    xs = inputs_for(shapes)
    close_to_litert(run(model, xs)[0], model, xs)


def test_softmax_not_over_the_key_axis_is_not_fused():
    """Softmax over the query axis (TRANSPOSE, SOFTMAX, TRANSPOSE): not attention."""
    mb = ModelBuilder()
    q, k, v = mb.input("q", [2, 5, 4]), mb.input("k", [2, 5, 4]), mb.input("v", [2, 5, 3])
    s = mb.tensor("s", [2, 5, 5])
    mb.op("BATCH_MATMUL", [q, k], [s], adj_x=False, adj_y=True)
    perm = mb.const("perm", np.array([0, 2, 1], np.int32))
    st, pt, p = mb.tensor("st", [2, 5, 5]), mb.tensor("pt", [2, 5, 5]), mb.tensor("p", [2, 5, 5])
    mb.op("TRANSPOSE", [s, perm], [st])
    mb.op("SOFTMAX", [st], [pt], beta=1.0)
    mb.op("TRANSPOSE", [pt, perm], [p])
    o = mb.tensor("o", [2, 5, 3])
    mb.op("BATCH_MATMUL", [p, v], [o], adj_x=False, adj_y=False)
    mb.output(o)
    model = mb.finish()
    assert "ATTENTION" not in ops_after_passes(model)
    xs = [RNG.normal(0, 1, s).astype(np.float32) for s in ([2, 5, 4], [2, 5, 4], [2, 5, 3])]
    close_to_litert(run(model, xs)[0], model, xs)


def test_non_scalar_scale_and_broadcast_scores_are_not_fused():
    """A MUL by a per-key tensor is not a scale; an ADD that broadcasts the scores is not a bias."""
    for kind in ("vector_mul", "broadcast_add"):
        mb = ModelBuilder()
        q, k, v = mb.input("q", [1, 5, 4]), mb.input("k", [1, 6, 4]), mb.input("v", [1, 6, 3])
        s = mb.tensor("s", [1, 5, 6])
        mb.op("BATCH_MATMUL", [q, k], [s], adj_x=False, adj_y=True)
        if kind == "vector_mul":
            x = mb.tensor("x", [1, 5, 6])
            mb.op("MUL", [s, mb.const("c", RNG.normal(0, 1, (6,)).astype(np.float32))], [x])
            o_shape, p_shape, v_in = [1, 5, 3], [1, 5, 6], v
        else:
            x = mb.tensor("x", [2, 5, 6])
            mb.op("ADD", [s, mb.const("c", RNG.normal(0, 1, (2, 5, 6)).astype(np.float32))], [x])
            o_shape, p_shape = [2, 5, 3], [2, 5, 6]
            v_in = v
        p = mb.tensor("p", p_shape)
        mb.op("SOFTMAX", [x], [p], beta=1.0)
        o = mb.tensor("o", o_shape)
        mb.op("BATCH_MATMUL", [p, v_in], [o], adj_x=False, adj_y=False)
        mb.output(o)
        model = mb.finish()
        assert "ATTENTION" not in ops_after_passes(model), kind
        xs = [RNG.normal(0, 1, s).astype(np.float32) for s in ([1, 5, 4], [1, 6, 4], [1, 6, 3])]
        close_to_litert(run(model, xs)[0], model, xs)


def test_quantized_or_integer_chains_are_not_fused():
    """A fake-quantized (int8) model keeps its ops: its tensors carry quantization."""
    g = load_tflite(attention_model()[0]).main
    from gpuc.compiler.ir import Quant
    s = next(n for n in g.nodes if n.op == "SOFTMAX")
    g.t(s.inputs[0]).quant = Quant(np.array([0.1], np.float32), np.array([0]))
    run_passes(g, disabled=["simulate_quantization"])
    assert "ATTENTION" not in [n.op for n in g.nodes]
    g = load_tflite(attention_model()[0]).main
    g.t(g.inputs[2]).dtype = "int32"              # V not float
    run_passes(g)
    assert "ATTENTION" not in [n.op for n in g.nodes]


def test_disable_pass_keeps_the_chain():
    model, _ = attention_model(mask="heads")
    ops = ops_after_passes(model, disabled=["fuse_attention"])
    assert "ATTENTION" not in ops and ops.count("BATCH_MATMUL") == 2 and "SOFTMAX" in ops


@pytest.mark.parametrize("split", [1, 4])
def test_nan_inf_as_the_unfused_ops(split):
    """Non-finite scores as the unfused program (BATCH_MATMUL, ADD, SOFTMAX, BATCH_MATMUL) gives them:
    a NaN or +inf score makes its row NaN, -inf scores weigh 0 (also when a whole first tile of keys
    is -inf), a row of -inf only is NaN, a NaN in V reaches its column; with the key tiles split
    across workgroups too (a part of -inf scores only weighs 0 in the merge).  LiteRT agrees except where
    its ADD turns +-inf into +-FLT_MAX (a row masked to -inf everywhere gives uniform weights there,
    a +inf score a one-hot row): those rows are compared with the unfused program only."""
    model, shapes = attention_model(b=1, h=2, n=6, m=40, d=8, scale=None, mask="runtime")
    q, k, v, mask = inputs_for(shapes)
    mask[0, 0, 1, :] = -np.inf                     # a whole row masked
    mask[0, 0, 2, :35] = -np.inf                   # only the last tile's keys count
    mask[0, 1, 3, 7] = np.nan
    mask[0, 1, 4, 20] = np.inf
    q[0, 1, 5, 0] = np.inf                         # scores of +-inf from the product
    v[0, 1, 10, 2] = np.nan
    xs = [q, k, v, mask]
    outs, n = run(model, xs, attention_split=split)
    assert n == (1 if split == 1 else 2)             # (split: 2 tiles of 32 keys, one a part; then the merge)
    off, _ = run(model, xs, disable_passes=["fuse_attention"])
    np.testing.assert_array_equal(np.isnan(outs[0]), np.isnan(off[0]))
    assert np.isnan(outs[0][0, 0, 1]).all() and np.isnan(outs[0][0, 1, 3]).all() and np.isnan(outs[0][0, 1, 4]).all()
    assert np.isfinite(outs[0][0, 0, 2]).all() and np.isnan(outs[0][0, 1, :, 2]).all()
    fin = np.isfinite(off[0])
    np.testing.assert_allclose(outs[0][fin], off[0][fin], rtol=0, atol=1e-5 * float(np.abs(off[0][fin]).max()))
    ref = run_litert(model, xs)[0]
    rows = np.ones(ref.shape[:-1], bool)
    rows[0, 0, 1] = rows[0, 1, 4] = rows[0, 1, 5] = False
    np.testing.assert_array_equal(np.isnan(outs[0][rows]), np.isnan(ref[rows]))
    fin = np.isfinite(ref[rows])
    np.testing.assert_allclose(outs[0][rows][fin], ref[rows][fin], rtol=0,
                               atol=1e-5 * float(np.abs(ref[rows][fin]).max()))


def test_long_keys_and_wide_heads_stay_unfused():
    """Where the H100 measured attention.comp slower (>= 512 keys with a head wider than 64), the chain
    stays unfused; 512 keys at head dim 64 and 511 keys at head dim 80 fuse, and so do the shapes
    attention_wide.comp takes (>= 64 query rows: LLM prefill) at any head dim up to 256."""
    from gpuc.compiler.passes.attention import worthwhile
    assert worthwhile(2, 511, 80, 80) and worthwhile(2, 512, 64, 64) and not worthwhile(2, 512, 80, 80)
    assert worthwhile(512, 1024, 128, 128) and worthwhile(64, 512, 256, 200) and not worthwhile(64, 512, 257, 64)
    for n, m, d, fused in ((2, 520, 80, False), (2, 520, 64, True), (2, 40, 80, True), (64, 520, 128, True),
                           (64, 520, 320, False)):
        model, _ = attention_model(b=1, h=1, n=n, m=m, d=d)
        assert ("ATTENTION" in ops_after_passes(model)) == fused, (n, m, d)
