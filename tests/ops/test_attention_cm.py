"""The cooperative-matrix attention (ops/attention_cm.py, shaders/attention_cm.comp) through its emulated
path on lavapipe (CompileOptions.coopmat_emulate: the same staging, softmax and output code with the
16 x 16 products done per invocation): attention of fp16 bundles takes it, with or without bias and mask
operands, and matches LiteRT within fp16's tolerance; odd head sizes and fp32 bundles keep their kernel."""
import numpy as np
import pytest

pytest.importorskip("vulkan")
pytest.importorskip("ai_edge_litert")

import gpuc  # noqa: E402
from gpuc.runtime import bundle as B  # noqa: E402
from helpers.attention_models import attention_model  # noqa: E402
from helpers.fusion import close_to_litert  # noqa: E402

RNG = np.random.default_rng(21)


@pytest.fixture(autouse=True)
def _one_pass(compile_options):
    """These small grids would split their key tiles (ops/attention.py key_split), which has no tensor-core
    form: keep one pass, as a grid of many workgroups has."""
    compile_options(attention_split=1)


def _variants(bundle):
    """{dispatch label: [variant names]} of the ATTENTION dispatches."""
    b = B.read_bundle(bundle)
    out = {}
    for i, d in enumerate(b.dispatches):
        if d.label.startswith("ATTENTION"):
            out[d.label] = sorted({v.name for v in b.variants if v.dispatch == i})
    return out


CASES = [
    dict(b=2, h=3, n=40, m=37, d=32),                          # rows and keys past a block / tile
    dict(b=1, h=2, n=70, m=45, d=64, k_form="transpose"),      # K^T through a transpose, 2 row blocks
    dict(q_form="heads", n=9, d=16, k_form="transpose"),       # Q, K, V sliced out of one qkv tensor
    dict(q_form="heads", split="strided", out_form="merge", d=16),   # heads merged back on output
    dict(b=1, h=1, n=17, m=65, d=128, dv=48, scale="beta"),    # wide heads (2 subgroups), DV != D
    dict(b=1, h=2, n=1, m=40, d=32),                           # one query row
    dict(b=2, h=3, n=40, m=37, d=32, mask="heads"),            # a constant [h, n, m] bias
    dict(b=2, h=2, n=20, m=19, d=16, mask="runtime"),          # a runtime [b, h, n, m] bias
    dict(b=1, h=2, n=17, m=50, d=32, mask="keys"),             # a [m] bias, one per key
    dict(b=2, h=2, n=49, m=49, d=32, mask="swin"),             # Swin's relative-position bias, then its window mask
    dict(b=1, h=2, n=33, m=33, d=16, mask="neg_inf"),          # causal -inf: rows of one live key, NaN-free
    dict(b=2, h=1, n=20, m=35, d=32, mask="sub"),              # SUB of a runtime [1, 1, 1, m] input
]


@pytest.mark.parametrize("kw", CASES, ids=[str(i) for i in range(len(CASES))])
def test_fp16_attention_takes_the_tensor_core_kernel(kw):
    model, shapes = attention_model(**kw)
    xs = [RNG.normal(0, 1.5, s).astype(np.float32) for s in shapes]
    bundle = gpuc.compile(model, cache=False, precision="fp16", coopmat_emulate=True)
    assert list(_variants(bundle).values()) == [["coopmat"]]
    with gpuc.load(bundle) as m:                      # (lavapipe meets the emulated variant's requirements)
        names = [m.bundle.shaders[d.shader].name for d in m.bundle.dispatches if d.label.startswith("ATTENTION")]
        assert names == ["attention_cm+coopmat"]
        outs = m.run(xs)
    close_to_litert(outs, model, xs, tol=2e-2)


@pytest.mark.parametrize("kw", [CASES[0], CASES[1], CASES[4], dict(b=1, h=2, n=20, m=100, d=32),
                                dict(b=1, h=2, n=20, m=100, d=32, mask="heads")],
                         ids=["rows-keys", "transpose", "wide", "long", "long-bias"])
def test_split_keys_take_the_tensor_core_kernel_for_each_part(kw, compile_options):
    """The key tiles split 3 ways (ops/attention.py key_split): the split dispatch's tensor-core form writes each
    part's [m, l, acc] over its 16-key tiles (parts of attention.comp's split and of this one cover the keys
    alike, whatever the tiles), attention_merge.comp sums them; as LiteRT within fp16's tolerance."""
    compile_options(attention_split=3)
    model, shapes = attention_model(**kw)
    xs = [RNG.normal(0, 1.5, s).astype(np.float32) for s in shapes]
    bundle = gpuc.compile(model, cache=False, precision="fp16", coopmat_emulate=True)
    with gpuc.load(bundle) as m:
        names = [m.bundle.shaders[d.shader].name for d in m.bundle.dispatches if d.label.startswith("ATTENTION")]
        assert names == ["attention_cm+coopmat", "attention_merge"]
        outs = m.run(xs)
    close_to_litert(outs, model, xs, tol=2e-2)


@pytest.mark.parametrize("kw, precision", [(dict(d=24), "fp16"), (dict(d=32), "fp32"), (dict(mask="heads", d=32), "fp32")])
def test_other_attention_keeps_its_kernel(kw, precision):
    model, _ = attention_model(**kw)
    bundle = gpuc.compile(model, cache=False, precision=precision, coopmat_emulate=True)
    assert list(_variants(bundle).values()) == [[]]


def test_vector_reads_where_rows_are_whole_vectors():
    """Q4 / K4 / V4 (4 channels a load) only for an operand whose channels are contiguous and whose row stride,
    offset and view-term strides are whole multiples of 4 elements."""
    from gpuc.compiler.ops.attention_cm import vector_reads
    base = dict(Q_SR=32, Q_SC=1, Q_OFF=0, Q_T=[1, 3, 1280], K_SJ=32, K_SC=1, K_OFF=64, K_T=[1, 3, 1184],
                V_SJ=16, V_SC=1, V_OFF=0, V_T=[0])
    assert vector_reads(base) == {"Q4": 1, "K4": 1, "V4": 1}
    assert vector_reads(dict(base, K_SC=37)) == {"Q4": 1, "V4": 1}             # channels a row apart
    assert vector_reads(dict(base, V_OFF=2)) == {"Q4": 1, "K4": 1}             # a row off a 4-vector
    assert vector_reads(dict(base, Q_T=[1, 3, 1282])) == {"K4": 1, "V4": 1}    # an item off one
    assert vector_reads(dict(base, Q_SR=34, K_SJ=object(), V_SJ=6)) == {}      # odd strides, a dynamic one


def test_scalar_reads_match(monkeypatch):
    """The one-channel loads (operands not laid out for vectors) give the same results as the vector ones."""
    from gpuc.compiler.ops import attention_cm
    model, shapes = attention_model(**CASES[9])
    xs = [RNG.normal(0, 1.5, s).astype(np.float32) for s in shapes]
    outs, seen = [], []
    real = attention_cm.cm_kernel
    monkeypatch.setattr(attention_cm, "cm_kernel", lambda k, e=False: seen.append(real(k, e)) or seen[-1])
    for vec in (True, False):
        if not vec:
            monkeypatch.setattr(attention_cm, "vector_reads", lambda d: {})
        bundle = gpuc.compile(model, cache=False, precision="fp16", coopmat_emulate=True)
        with gpuc.load(bundle) as m:
            outs.append(m.run(xs)[0])
    assert seen[0].vec4 == ("q", "k", "v") and seen[-1].vec4 == ()
    np.testing.assert_array_equal(outs[0], outs[1])
    close_to_litert([outs[1]], model, xs, tol=2e-2)
