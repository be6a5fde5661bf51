"""fuse_softmax_chain: a softmax written out as REDUCE_MAX, [MAXIMUM guard], SUB, [MUL beta], EXP, SUM, DIV
becomes one SOFTMAX dispatch over its axis, matching LiteRT within 1e-5 of max|ref|; near-misses stay."""
import numpy as np
import pytest

pytest.importorskip("vulkan")

from gpuc.compiler.frontend.importer import load_tflite  # noqa: E402
from gpuc.compiler.passes import run_passes  # noqa: E402
from helpers.builder import ModelBuilder  # noqa: E402
from helpers.data import rnd  # noqa: E402
from helpers.fusion import close_to_litert, run_counted  # noqa: E402

I32 = np.int32
SHAPE = (1, 5, 7, 3)


def chain(axis=2, keep=True, guard=None, beta=None, expose=None, reuse=False):
    mb = ModelBuilder()
    x = mb.input("x", SHAPE)
    keep_shape = tuple(1 if i == axis % 4 else d for i, d in enumerate(SHAPE))
    red_shape = keep_shape if keep else tuple(d for i, d in enumerate(SHAPE) if i != axis % 4)
    ax = mb.const("ax", np.array([axis], I32))
    m = mb.tensor("m", red_shape)
    mb.op("REDUCE_MAX", [x, ax], [m], keep_dims=keep)
    if guard is not None:
        g = mb.tensor("g", red_shape)
        mb.op("MAXIMUM", [m, mb.const("c", np.float32(guard))], [g])
        m = g
    if not keep:
        r = mb.tensor("mr", keep_shape)
        mb.op("RESHAPE", [m, mb.const("ks", np.array(keep_shape, I32))], [r])
        m = r
    d = mb.tensor("d", SHAPE)
    mb.op("SUB", [x, m], [d])
    if beta is not None:
        d2 = mb.tensor("d2", SHAPE)
        mb.op("MUL", [d, mb.const("beta", np.float32(beta))], [d2])
        d = d2
    e = mb.tensor("e", SHAPE)
    mb.op("EXP", [d], [e])
    s = mb.tensor("s", keep_shape)
    mb.op("SUM", [e, ax], [s], keep_dims=True)
    y = mb.tensor("y", SHAPE)
    mb.op("DIV", [e, s], [y])
    mb.output(y)
    if expose == "sum":
        mb.output(s)
    if reuse:
        z = mb.tensor("z", SHAPE)
        mb.op("TANH", [d], [z])
        mb.output(z)
    return mb.finish()


def ops_after_passes(model):
    g = load_tflite(model).main
    run_passes(g, ["fuse_elementwise", "fuse_reduce_prologue", "fuse_gemm_epilogue"])
    return [n.op for n in g.nodes]


FIRES = {
    "last axis": dict(axis=3), "middle axis": dict(axis=2), "axis 1, no keep_dims": dict(axis=1, keep=False),
    "negative axis": dict(axis=-2), "-inf guard": dict(guard=-np.inf, keep=False),
    "FLT_MAX guard": dict(guard=-3.4e38), "beta": dict(beta=0.7),
}
NEAR_MISSES = {
    "guard at 0": dict(guard=0.0), "negative beta": dict(beta=-1.0), "sum also an output": dict(expose="sum"),
    "difference read elsewhere": dict(reuse=True),
}


@pytest.mark.parametrize("name", list(FIRES))
def test_chain_is_one_softmax(name):
    model = chain(**FIRES[name])
    ops = ops_after_passes(model)
    assert ops.count("SOFTMAX") == 1 and "REDUCE_MAX" not in ops and "EXP" not in ops, ops
    x = rnd(SHAPE, 3, -4, 4)
    outs, n = run_counted(model, [x])
    assert n == 1
    close_to_litert(outs, model, [x])


@pytest.mark.parametrize("name", list(NEAR_MISSES))
def test_near_miss_stays(name):
    model = chain(**NEAR_MISSES[name])
    assert "SOFTMAX" not in ops_after_passes(model)
    x = rnd(SHAPE, 4, -4, 4)
    close_to_litert(run_counted(model, [x])[0], model, [x])
