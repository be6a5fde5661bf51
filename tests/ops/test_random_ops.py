"""RANDOM_UNIFORM, RANDOM_STANDARD_NORMAL, MULTINOMIAL on the GPU (compiler/ops/random.py) against
LiteRT over consecutive runs (the seeded Philox stream continues across invokes): uniform bit-exact,
normal within 2 ulp (LiteRT's glibc logf / sincosf are not always correctly rounded; gpuc's are),
multinomial indices equal (int32 and int64, non-finite logits); a shape the compiler folds (LiteRT: a
dynamic output), reset_state, seeds (0, 0), refusals (--max-batch among them)."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("vulkan")

import gpuc  # noqa: E402
from gpuc.errors import GpucError  # noqa: E402
from helpers.builder import ModelBuilder  # noqa: E402
from helpers.litert import make_interpreter  # noqa: E402

RUNS = 3


def _model(op, shape, seed, seed2, from_input=False):
    mb = ModelBuilder()
    if from_input:                      # the shape of an input (LiteRT: a dynamic output; gpuc folds SHAPE)
        x = mb.input("x", shape, "float32")
        s = mb.tensor("s", [len(shape)], "int32")
        mb.op("SHAPE", [x], [s], out_type="INT32")
    else:
        s = mb.const("s", np.array(shape, np.int32))
    y = mb.tensor("y", shape, "float32")
    mb.op(op, [s], [y], seed=seed, seed2=seed2)
    mb.output(y)
    return mb.finish()


def _multi_model(b, c, ns, dtype, seed, seed2):
    mb = ModelBuilder()
    x = mb.input("logits", [b, c], "float32")
    n = mb.const("n", np.array(ns, np.int32))
    y = mb.tensor("y", [b, ns], dtype)
    mb.op("MULTINOMIAL", [x, n], [y], seed=seed, seed2=seed2)
    mb.output(y)
    return mb.finish()


def _litert_runs(model, feeds):
    it = make_interpreter(model)
    it.allocate_tensors()
    outs = []
    for xs in feeds:
        for d, x in zip(it.get_input_details(), xs):
            it.set_tensor(d["index"], x)
        it.invoke()
        outs.append(np.array(it.get_tensor(it.get_output_details()[0]["index"])))
    return outs


def _ulps(a, b):
    return np.abs(a.view(np.int32).astype(np.int64) - b.view(np.int32).astype(np.int64))


CASES = [  # (op, shape, seed, seed2, shape from an input)
    ("RANDOM_UNIFORM", [3, 5], 7, -3, False),
    ("RANDOM_UNIFORM", [2, 3, 7], (1 << 40) + 5, -12345, True),   # seeds: their low 32 bits
    ("RANDOM_STANDARD_NORMAL", [4, 9], 1, 2, False),
    ("RANDOM_STANDARD_NORMAL", [7], -5, 0, True),          # odd size: the last pair's second value dropped
    ("RANDOM_STANDARD_NORMAL", [4096], 0, 3, False),
]


@pytest.mark.parametrize("case", range(len(CASES)))
def test_streams_match_litert(case):
    op, shape, seed, seed2, from_input = CASES[case]
    model = _model(op, shape, seed, seed2, from_input)
    feeds = [[np.zeros(shape, np.float32)] if from_input else [] for _ in range(RUNS)]
    ref = _litert_runs(model, feeds)
    with gpuc.load(gpuc.compile(model)) as m:
        got = [m.run(f)[0] for f in feeds]
        m.reset_state()                                     # LiteRT's re-Prepare: the stream restarts
        again = m.run(feeds[0])[0]
    for r, (g, want) in enumerate(zip(got, ref)):
        assert g.shape == want.shape and g.dtype == np.float32
        if op == "RANDOM_UNIFORM":
            np.testing.assert_array_equal(g, want, err_msg=f"run {r}")
        else:
            u = _ulps(g, want)
            assert u.max() <= 2, f"run {r}: {u.max()} ulp"
            if u.size >= 1000:            # (~1.5% of values: glibc 1 ulp off the correctly rounded value)
                assert np.mean(u == 0) > 0.95, f"run {r}: {np.mean(u == 0):.3f} exact"
    assert not np.array_equal(got[0], got[1])
    np.testing.assert_array_equal(again, got[0])


@pytest.mark.parametrize("b,c,ns,dtype", [(2, 5, 7, "int64"), (3, 40, 33, "int32"), (1, 300, 64, "int64")])
def test_multinomial_matches_litert(b, c, ns, dtype):
    rng = np.random.default_rng(b * c)
    model = _multi_model(b, c, ns, dtype, 5, 9)
    feeds = []
    for r in range(RUNS):
        x = (rng.standard_normal((b, c)) * 3).astype(np.float32)
        if r == 1:                            # ties of the CDF: non-finite logits are skipped
            x[0, 0], x[-1, -1] = -np.inf, np.nan
        if r == 2 and b > 1:
            x[1] = -np.inf                    # no finite logit: every index is num_classes
        feeds.append([x])
    ref = _litert_runs(model, feeds)
    with gpuc.load(gpuc.compile(model)) as m:
        for r, f in enumerate(feeds):
            g = m.run(f)[0]
            assert g.dtype == np.dtype(dtype) and g.shape == (b, ns)
            np.testing.assert_array_equal(g, ref[r], err_msg=f"run {r}")


def test_unseeded_draws_its_own_seed():
    model = _model("RANDOM_UNIFORM", [64, 64], 0, 0)
    with gpuc.load(gpuc.compile(model)) as m:
        a, b = m.run([])[0], m.run([])[0]
    assert not np.array_equal(a, b)
    for v in (a, b):                              # uniform on [0, 1)
        assert v.min() >= 0 and v.max() < 1 and abs(v.mean() - 0.5) < 0.02
        assert abs(np.mean(v < 0.25) - 0.25) < 0.03


def test_refusals_name_the_input():
    mb = ModelBuilder()
    s = mb.input("dims", [2], "int32")
    y = mb.tensor("y", [2, 3], "float32")
    mb.op("RANDOM_UNIFORM", [s], [y], seed=1, seed2=1)
    mb.output(y)
    with pytest.raises(GpucError, match="'dims' is known only at run time"):
        gpuc.compile(mb.finish())
    mb = ModelBuilder()
    x = mb.input("logits", [2, 3], "float32")
    n = mb.input("n", [], "int32")
    y = mb.tensor("y", [2, 4], "int64")
    mb.op("MULTINOMIAL", [x, n], [y], seed=1, seed2=1)
    mb.output(y)
    with pytest.raises(GpucError, match="num_samples 'n' is known only at run time"):
        gpuc.compile(mb.finish())


@pytest.mark.parametrize("op", ["RANDOM_UNIFORM", "RANDOM_STANDARD_NORMAL", "MULTINOMIAL"])
def test_max_batch_is_refused(op):
    """--max-batch: the stream is per-node state continuing across invokes; copies of it per item slot
    would draw identical numbers for the items of one run (no LiteRT behaviour): one clear error naming
    the op, whether or not the batch-native pass runs."""
    model = _multi_model(1, 4, 3, "int32", 3, 4) if op == "MULTINOMIAL" else _model(op, [1, 8], 3, 4, True)
    for extra in ({}, {"disable_passes": ["batch_native"]}):
        with pytest.raises(GpucError, match=rf"--max-batch 2: {op} \(operator #\d+\): a random op's seeded "
                                            "stream is per-node state"):
            gpuc.compile(model, max_batch=2, **extra)
