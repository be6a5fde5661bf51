"""fuse_layer_norm (passes/layer_norm.py, ops/layer_norm.py, shaders/layer_norm.comp): LayerNorm chains
as converters write them become one dispatch that matches LiteRT's op-by-op fp32 chain; near-misses
stay unfused (or fuse only the part that is a LayerNorm) and still match."""
import numpy as np
import pytest

pytest.importorskip("vulkan")

from gpuc.compiler.frontend.importer import load_tflite  # noqa: E402
from gpuc.compiler.passes import run_passes  # noqa: E402
from helpers.builder import ModelBuilder  # noqa: E402
from helpers.fusion import close_to_litert as _close  # noqa: E402
from helpers.fusion import run_counted as run  # noqa: E402
from helpers.litert import run_litert  # noqa: E402
from helpers.models import ln_model  # noqa: E402

RNG = np.random.default_rng(15)


def close_to_litert(outs, model, inputs, rtol=1e-5):
    _close(outs, model, inputs, tol=rtol, rtol=rtol, floor=1.0)


def ops_after_passes(model):
    g = load_tflite(model).main
    run_passes(g)
    return [n.op for n in g.nodes]


VARIANTS = [
    dict(),
    dict(keep_dims=False),
    dict(var="mul", eps="vec1"),
    dict(var="square", eps="bcast", keep_dims=False),
    dict(var="pow", inv="pow"),
    dict(inv="sqrt_div"),
    dict(out="xinv", keep_dims=False, gamma=False, beta=False),     # litert-torch (hf_mobilevit)
    dict(out="xinv", eps="bcast"),
    dict(out="keras"),
    dict(out="keras", keep_dims=False, eps="vec1", var="mul"),
    dict(gamma=False),
    dict(beta=False),
    dict(axes=(2,)),                    # a positive axis
    dict(shape=(1, 6, 7), axes=(0, 2), keep_dims=False, out="xinv"),    # litert-torch reduces the batch axis too
    dict(shape=(2, 3, 4, 5), axes=(-2, -1)),                           # two trailing axes
    dict(shape=(2, 3, 4, 5), axes=(2, 3), keep_dims=False, var="mul", gamma_shape=(5,)),
    dict(shape=(5, 64)),
    dict(shape=(1, 4, 768), keep_dims=False),
    dict(shape=(3, 3000), out="keras"),
    dict(shape=(2, 2, 2, 7)),
    dict(x_view=True, keep_dims=False),         # the chain reads x through a RESHAPE
    dict(x_view=True, out="xinv"),
]


@pytest.mark.parametrize("kw", VARIANTS, ids=[str(i) for i in range(len(VARIANTS))])
def test_variant_is_one_dispatch_and_matches_litert(kw):
    model = ln_model(**kw)
    assert ops_after_passes(model) == ["LAYER_NORM"]
    x = RNG.normal(0.5, 3, kw.get("shape", (2, 3, 8))).astype(np.float32)
    outs, n = run(model, [x])
    assert n == 1
    close_to_litert(outs, model, [x])
    off, n_off = run(model, [x], disable_passes=["fuse_layer_norm"])
    assert n_off > 1
    np.testing.assert_allclose(outs[0], off[0], rtol=1e-5, atol=1e-5 * float(np.abs(off[0]).max()))


NEAR_MISSES = {
    "mean over a non-last axis": dict(axes=(1,)),
    "mean is also an output": dict(second_use="mean"),
    "var is also an output": dict(second_use="var", keep_dims=False),
    "gamma varies over rows": dict(gamma_shape=(3, 8)),
}


@pytest.mark.parametrize("name", list(NEAR_MISSES))
def test_near_misses_do_not_fuse_the_whole_chain_and_match(name):
    kw = NEAR_MISSES[name]
    model = ln_model(**kw)
    got = ops_after_passes(model)
    if name == "gamma varies over rows":
        assert got.count("LAYER_NORM") == 1 and len(got) > 1     # (x - mean) * inv fuses, * gamma + beta do not
    else:
        assert "LAYER_NORM" not in got
    x = RNG.normal(0, 2, kw.get("shape", (2, 3, 8))).astype(np.float32)
    outs, _ = run(model, [x])
    close_to_litert(outs, model, [x], rtol=1e-4)


def test_e_x2_minus_mean2_is_not_matched():
    """var = E[x^2] - E[x]^2 is another formula (cancellation): left to the elementwise passes."""
    mb = ModelBuilder()
    x = mb.input("x", [2, 8])
    ax = mb.const("ax", np.array([-1], np.int32))
    t = [mb.tensor(f"t{i}", s) for i, s in enumerate([[2, 1], [2, 8], [2, 1], [2, 1], [2, 1], [2, 1], [2, 1],
                                                      [2, 8], [2, 8]])]
    mb.op("MEAN", [x, ax], [t[0]], keep_dims=True)
    mb.op("SQUARE", [x], [t[1]])
    mb.op("MEAN", [t[1], ax], [t[2]], keep_dims=True)
    mb.op("SQUARE", [t[0]], [t[3]])
    mb.op("SUB", [t[2], t[3]], [t[4]])
    mb.op("ADD", [t[4], mb.const("eps", np.array(1e-5, np.float32))], [t[5]])
    mb.op("RSQRT", [t[5]], [t[6]])
    mb.op("SUB", [x, t[0]], [t[7]])
    mb.op("MUL", [t[7], t[6]], [t[8]])
    mb.output(t[8])
    model = mb.finish()
    assert "LAYER_NORM" not in ops_after_passes(model)
    xv = RNG.normal(0, 1, (2, 8)).astype(np.float32)
    close_to_litert(run(model, [xv])[0], model, [xv], rtol=1e-4)


@pytest.mark.parametrize("kw", [dict(), dict(shape=(2, 768), out="keras")])
def test_fp16_storage(kw):
    model = ln_model(**kw)
    x = RNG.normal(0, 2, kw.get("shape", (2, 3, 8))).astype(np.float32)
    outs, n = run(model, [x], precision="fp16")
    assert n == 1
    close_to_litert(outs, model, [x], rtol=2e-2)


@pytest.mark.parametrize("shape", [(3, 7), (3, 300)])
def test_nan_or_inf_in_one_row_makes_that_row_nan(shape):
    model = ln_model(shape=shape, axes=(-1,))
    x = RNG.normal(0, 1, shape).astype(np.float32)
    x[0, 3] = np.nan
    x[1, 5] = np.inf
    outs, _ = run(model, [x])
    ref = run_litert(model, [x])[0]
    assert np.isnan(outs[0][:2]).all() and np.isnan(ref[:2]).all()
    close_to_litert(outs, model, [x])
