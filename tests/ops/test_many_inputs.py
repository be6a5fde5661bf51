"""CONCATENATION and PACK take any number of inputs, as TFLite does (a real speaker-embedding model
concatenates 160 LSTM steps).  fold_movement makes each one GATHER_COPY dispatch: up to 7 inputs
each bound on its own, more read through one binding of the whole arena (ops/gather_copy.py)."""
import numpy as np
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
@pytest.mark.parametrize("n", [1, 2, 99, 100, 160, 1000])
def test_many_inputs_match_litert(gpu, op, n):
    model, xs = many(op, n)
    bundle = gpuc.compile(model)
    assert len(read_bundle(bundle).dispatches) == 1
    m = gpuc.load(bundle, device=gpu.device)
    try:
        assert_matches(m.run(xs), run_litert(model, xs))
    finally:
        m.close()


@pytest.mark.parametrize("n", [8, 300])
def test_many_inputs_fp16_and_axis0(gpu, n):
    """--precision fp16 (inputs float32, the arena view's dtype follows each source's storage) and
    concatenation along axis 0 after a copy of each input (the sources are intermediates)."""
    mb = ModelBuilder()
    xs = [mb.input(f"x{i}", [2, 3]) for i in range(n)]
    ts = []
    for i, x in enumerate(xs):
        t = mb.tensor(f"t{i}", [2, 3])
        mb.op("RELU", [x], [t])
        ts.append(t)
    y = mb.tensor("y", [2 * n, 3])
    mb.op("CONCATENATION", ts, [y], axis=0)
    mb.output(y)
    model = mb.finish()
    feeds = [rnd((2, 3), i) for i in range(n)]
    ref = run_litert(model, feeds)
    for precision in ("fp32", "fp16"):
        bundle = gpuc.compile(model, precision=precision)
        assert len(read_bundle(bundle).dispatches) == n + 1
        m = gpuc.load(bundle, device=gpu.device)
        try:
            out = m.run(feeds)
        finally:
            m.close()
        tol = dict(rtol=0, atol=0) if precision == "fp32" else dict(rtol=1e-3, atol=1e-3)
        np.testing.assert_allclose(out[0], ref[0], **tol)


def test_many_inputs_with_activation(gpu):
    """CONCATENATION of 160 inputs with a fused RELU6: still one dispatch (LiteRT, which refuses a
    fused activation on float CONCATENATION, runs the same with RELU6 as its own op)."""
    models = []
    for explicit in (False, True):
        mb = ModelBuilder()
        xs = [mb.input(f"x{i}", [1, 4]) for i in range(160)]
        y = mb.tensor("y", [1, 640])
        mb.op("CONCATENATION", xs, [y], axis=1, fused_activation_function="NONE" if explicit else "RELU6")
        if explicit:
            z = mb.tensor("z", [1, 640])
            mb.op("RELU6", [y], [z])
            y = z
        mb.output(y)
        models.append(mb.finish())
    feeds = [rnd((1, 4), i) * 8 for i in range(160)]
    bundle = gpuc.compile(models[0])
    assert len(read_bundle(bundle).dispatches) == 1
    m = gpuc.load(bundle, device=gpu.device)
    try:
        assert_matches(m.run(feeds), run_litert(models[1], feeds))
    finally:
        m.close()
