"""Long reductions in parts (ops/reduce.py _in_parts, shaders/reduce.comp PARTS): a SUM, MEAN or PROD of more than
PART_MAX elements an output runs as PARTS workgroups an output, then a second reduce over the partials.  One
workgroup looping over every element gave wrong sums on lavapipe (llvmpipe ends a shader's loops after 65,535
passes in all): against LiteRT, with several outputs, a reduced axis that is not innermost, keep_dims, a mean, a
product, and the fused prologue (x * sigmoid(x), then the mean)."""
import numpy as np
import pytest

pytest.importorskip("vulkan")

import gpuc  # noqa: E402
from gpuc.compiler.ops import reduce as reduce_mod  # noqa: E402
from gpuc.runtime.bundle import read_bundle  # noqa: E402
from helpers.litert import run_litert  # noqa: E402
from helpers.reduce_models import reduce_model  # noqa: E402

RNG = np.random.default_rng(61)
LONG = reduce_mod.PART_MAX * 2 + 37           # three parts, the last one short


def _labels(data: bytes, **kw) -> list:
    b = read_bundle(gpuc.compile(data, cache=False, **kw))
    return [d.label for d in b.dispatches]


@pytest.mark.parametrize("op,shape,axes,keep,swish", [
    ("SUM", (1, LONG), [1], False, False),
    ("MEAN", (LONG, 3), [0], True, False),               # a reduced axis that is not innermost, 3 outputs
    ("MEAN", (2, LONG // 2, 2), [1, 2], False, True),    # two reduced axes, the fused prologue
])
def test_long_reductions_match_litert(gpu, op, shape, axes, keep, swish):
    data = reduce_model(op, shape, axes, keep, swish=swish)
    labels = _labels(data)
    assert len(labels) == 2 and "parts" in labels[0] and "parts" not in labels[1]
    x = np.random.default_rng(len(shape) + len(axes) + swish).normal(0.5, 1, shape).astype(np.float32)
    with gpuc.load(data) as m:
        (got,) = m.run([x])
    (ref,) = run_litert(data, [x])
    assert got.shape == ref.shape
    # LiteRT's float32 sum of ~500,000 terms in sequence is itself ~1e-5 off the exact value (its error grows with
    # the length; the data's own generator per case, so no test order changes them): gpuc's parts near the exact
    # value, LiteRT within the suite's float tolerance
    xd = x.astype(np.float64)
    exact = reduce_model_exact(op, xd * (1 / (1 + np.exp(-xd))) if swish else xd, axes, keep)
    assert np.abs(got - exact).max() <= 2e-6 * max(1.0, np.abs(exact).max())
    assert np.abs(got - ref).max() <= 1e-4 * max(1.0, np.abs(ref).max())


def reduce_model_exact(op, xd, axes, keep):
    return (np.sum if op == "SUM" else np.mean)(xd, axis=tuple(axes), keepdims=keep)


def test_a_long_product_and_a_sum_of_ones_are_exact(gpu):
    """Powers of two and ones: every order of the float32 products and sums gives the same bits."""
    x = np.ones((1, LONG), np.float32)
    x[0, RNG.choice(LONG, 10, replace=False)] = 2.0
    for op, want in (("REDUCE_PROD", 1024.0), ("SUM", LONG + 10.0)):
        data = reduce_model(op, (1, LONG), [1], False)
        with gpuc.load(data) as m:
            (got,) = m.run([x])
        assert float(got.reshape(-1)[0]) == want


def test_short_reductions_and_max_keep_one_dispatch():
    """At most PART_MAX elements an output, and REDUCE_MAX at any length (LiteRT's NaN order does not split): one
    dispatch, as before."""
    assert len(_labels(reduce_model("SUM", (1, reduce_mod.PART_MAX), [1], False))) == 1
    assert len(_labels(reduce_model("REDUCE_MAX", (1, LONG), [1], False))) == 1


def test_fp16_programs_keep_the_partials_float32(gpu):
    """--precision fp16: a part's sum (here ~131,000) passes float16's range, so the partials stay float32."""
    data = reduce_model("MEAN", (1, LONG, 2), [1], False, swish=True)
    x = RNG.normal(0.5, 1, (1, LONG, 2)).astype(np.float32)
    with gpuc.load(gpuc.compile(data, cache=False, precision="fp16")) as m:
        (got,) = m.run([x])
    (ref,) = run_litert(data, [x])
    assert np.abs(got - ref).max() <= 1e-3 * np.abs(ref).max()
