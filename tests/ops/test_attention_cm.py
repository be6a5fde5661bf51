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
