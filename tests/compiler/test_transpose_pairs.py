"""compose_transposes: TRANSPOSE(TRANSPOSE(x)) reads x with the composed permutation (a view when it is
the identity); the first TRANSPOSE goes when nothing else reads it; results match LiteRT exactly."""
import numpy as np
import pytest

pytest.importorskip("vulkan")

from helpers.builder import ModelBuilder  # noqa: E402
from helpers.data import rnd  # noqa: E402
from helpers.fusion import run_counted  # noqa: E402
from helpers.litert import run_litert  # noqa: E402

I32 = np.int32


def pair(p1, p2, extra_reader=False, expose_middle=False):
    mb = ModelBuilder()
    x = mb.input("x", (1, 3, 4, 5))
    s1 = tuple((1, 3, 4, 5)[i] for i in p1)
    t1 = mb.tensor("t1", s1)
    mb.op("TRANSPOSE", [x, mb.const("p1", np.array(p1, I32))], [t1])
    t2 = mb.tensor("t2", tuple(s1[i] for i in p2))
    mb.op("TRANSPOSE", [t1, mb.const("p2", np.array(p2, I32))], [t2])
    y = mb.tensor("y", tuple(s1[i] for i in p2))
    mb.op("RELU", [t2], [y])
    mb.output(y)
    if extra_reader:
        z = mb.tensor("z", s1)
        mb.op("TANH", [t1], [z])
        mb.output(z)
    if expose_middle:
        mb.output(t1)
    return mb.finish()


@pytest.mark.parametrize("p1,p2,dispatches", [((0, 3, 1, 2), (0, 2, 3, 1), 1),    # NHWC -> NCHW -> NHWC: a view
                                              ((0, 3, 1, 2), (0, 1, 3, 2), 2),    # composed into one TRANSPOSE
                                              ((3, 2, 1, 0), (3, 2, 1, 0), 1)])
def test_pair_composes(p1, p2, dispatches):
    model = pair(p1, p2)
    x = rnd((1, 3, 4, 5), 1, -2, 2)
    outs, n = run_counted(model, [x])
    assert n == dispatches
    np.testing.assert_array_equal(outs[0], run_litert(model, [x])[0])
    _, n_off = run_counted(model, [x], disable_passes=["compose_transposes"])
    assert n_off == dispatches + 1 or (dispatches == 2 and n_off == 2)    # (fold_movement also makes one copy)


@pytest.mark.parametrize("kw", [dict(extra_reader=True), dict(expose_middle=True)])
def test_first_transpose_stays_where_something_else_reads_it(kw):
    model = pair((0, 3, 1, 2), (0, 2, 3, 1), **kw)
    x = rnd((1, 3, 4, 5), 2, -2, 2)
    outs, n = run_counted(model, [x])
    for o, r in zip(outs, run_litert(model, [x])):
        np.testing.assert_allclose(o, r, rtol=1e-6, atol=1e-6)
    _, n_off = run_counted(model, [x], disable_passes=["compose_transposes"])
    assert n == n_off - 1          # the second TRANSPOSE became a view; the first stays


def matmul_model(t_lhs=False, t_rhs=False, t_out=False, adj_y=False):
    mb = ModelBuilder()
    a = mb.input("a", (2, 4, 3) if t_lhs else (2, 3, 4))
    b = mb.input("b", (2, 5, 4) if t_rhs != adj_y else (2, 4, 5))
    for flag, name, shape in ((t_lhs, "a", (2, 3, 4)), (t_rhs, "b", (2, 4, 5) if not adj_y else (2, 5, 4))):
        if flag:
            t = mb.tensor(f"{name}T", shape)
            mb.op("TRANSPOSE", [a if name == "a" else b, mb.const(f"p{name}", np.array([0, 2, 1], I32))], [t])
            if name == "a":
                a = t
            else:
                b = t
    y = mb.tensor("y", (2, 3, 5))
    mb.op("BATCH_MATMUL", [a, b], [y], adj_y=adj_y)
    if t_out:
        z = mb.tensor("z", (2, 5, 3))
        mb.op("TRANSPOSE", [y, mb.const("po", np.array([0, 2, 1], I32))], [z])
        y = z
    mb.output(y)
    return mb.finish()


@pytest.mark.parametrize("kw", [dict(t_lhs=True), dict(t_rhs=True), dict(t_rhs=True, adj_y=True), dict(t_out=True),
                                dict(t_lhs=True, t_rhs=True, t_out=True)])
def test_transposes_fold_into_matmul_flags(kw):
    model = matmul_model(**kw)
    a = rnd((2, 4, 3) if kw.get("t_lhs") else (2, 3, 4), 5, -1, 1)
    b = rnd((2, 5, 4) if kw.get("t_rhs", False) != kw.get("adj_y", False) else (2, 4, 5), 6, -1, 1)
    outs, n = run_counted(model, [a, b])
    assert n == 1
    r = run_litert(model, [a, b])[0]
    np.testing.assert_allclose(outs[0], r, rtol=1e-6, atol=1e-6)
    assert run_counted(model, [a, b], disable_passes=["transpose_into_matmul"])[1] > 1


def residual_model(op="ADD", extra_reader=False, broadcast=False):
    """ADD(x_nchw, TRANSPOSE(relu_nhwc)) -> TRANSPOSE back to NHWC, as NCHW converters write a residual."""
    mb = ModelBuilder()
    a = mb.input("a", (1, 3, 1, 1) if broadcast else (1, 3, 4, 5))      # NCHW
    h = mb.input("h", (1, 4, 5, 3))                                       # NHWC
    r = mb.tensor("r", (1, 4, 5, 3))
    mb.op("RELU", [h], [r])
    t = mb.tensor("t", (1, 3, 4, 5))
    mb.op("TRANSPOSE", [r, mb.const("p1", np.array([0, 3, 1, 2], I32))], [t])
    s = mb.tensor("s", (1, 3, 4, 5))
    mb.op(op, [a, t], [s])
    y = mb.tensor("y", (1, 4, 5, 3))
    mb.op("TRANSPOSE", [s, mb.const("p2", np.array([0, 2, 3, 1], I32))], [y])
    mb.output(y)
    if extra_reader:
        mb.output(t)
    return mb.finish()


@pytest.mark.parametrize("op", ["ADD", "SUB", "MUL"])
def test_transpose_sinks_through_a_residual(op):
    model = residual_model(op)
    a, h = rnd((1, 3, 4, 5), 7, -2, 2), rnd((1, 4, 5, 3), 8, -2, 2)
    outs, n = run_counted(model, [a, h])
    np.testing.assert_allclose(outs[0], run_litert(model, [a, h])[0], rtol=1e-6, atol=1e-6)
    _, n_off = run_counted(model, [a, h], disable_passes=["sink_transposes"])
    assert n < n_off


@pytest.mark.parametrize("kw", [dict(extra_reader=True), dict(broadcast=True)])
def test_transpose_does_not_sink(kw):
    model = residual_model(**kw)
    a = rnd((1, 3, 1, 1) if kw.get("broadcast") else (1, 3, 4, 5), 7, -2, 2)
    h = rnd((1, 4, 5, 3), 8, -2, 2)
    outs, n = run_counted(model, [a, h])
    for o, r in zip(outs, run_litert(model, [a, h])):
        np.testing.assert_allclose(o, r, rtol=1e-6, atol=1e-6)
    assert n == run_counted(model, [a, h], disable_passes=["sink_transposes"])[1]
