"""CONCATENATION and PACK take any number of inputs, as TFLite does (a real speaker-embedding model
concatenates 160 LSTM steps).  Each input is one copy dispatch today."""
import pytest

import gpuc
from gpuc.runtime.bundle import read_bundle
from helpers.builder import ModelBuilder
from helpers.data import rnd
from helpers.litert import run_litert
from helpers.ops import assert_matches

pytest.importorskip("vulkan")


def many(op, n, shape=(2, 3), axis=1):
    mb = ModelBuilder()
    xs = [mb.input(f"x{i}", list(shape)) for i in range(n)]
    if op == "CONCATENATION":
        out = list(shape)
        out[axis] *= n
    else:
        out = list(shape[:axis]) + [n] + list(shape[axis:])
    y = mb.tensor("y", out)
    mb.op(op, xs, [y], axis=axis, **({"values_count": n} if op == "PACK" else {}))
    mb.output(y)
    return mb.finish(), [rnd(shape, i) for i in range(n)]


@pytest.mark.parametrize("op", ["CONCATENATION", "PACK"])
@pytest.mark.parametrize("n", [1, 2, 99, 100, 160])
def test_many_inputs_match_litert(gpu, op, n):
    model, xs = many(op, n)
    bundle = gpuc.compile(model)
    assert len(read_bundle(bundle).dispatches) <= n
    m = gpuc.load(bundle, device=gpu.device)
    try:
        assert_matches(m.run(xs), run_litert(model, xs))
    finally:
        m.close()
