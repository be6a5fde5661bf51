"""WHILE and IF against LiteRT: the condition is read back on the host, the body's recorded GPU
segments are resubmitted; loop variables must keep their shapes (else a clear error)."""
import numpy as np
import pytest

pytest.importorskip("vulkan")

import gpuc  # noqa: E402
from gpuc.errors import UnsupportedError  # noqa: E402
from gpuc.runtime import bundle as B  # noqa: E402
from helpers.builder import ModelBuilder, with_subgraphs  # noqa: E402
from helpers.litert import run_litert  # noqa: E402


def while_model(limit=5, shape=(2, 3), ishape=(1,), cpu_body=False, swap=False, grow=False):
    """i = 0; while i < limit: i += 1; x = x * 0.5 + 1 (or a CPU op on int64 / a swap of two vars)."""
    mb = ModelBuilder()
    x = mb.input("x", shape)
    i0 = mb.const("i0", np.zeros(ishape, np.int32))
    w = mb.input("w", shape)
    oi, ox, ow = mb.tensor("oi", ishape, "int32"), mb.tensor("ox", shape), mb.tensor("ow", shape)
    mb.op("WHILE", [i0, x, w], [oi, ox, ow], cond_subgraph_index=1, body_subgraph_index=2)
    y = mb.tensor("y", shape)
    mb.op("ADD", [ox, ow], [y])
    mb.output(y)
    mb.output(oi)

    cb = ModelBuilder()
    ci, cx, cw = cb.input("i", ishape, "int32"), cb.input("x", shape), cb.input("w", shape)
    c = cb.tensor("c", ishape, "bool")
    cb.op("LESS", [ci, cb.const("lim", np.full(ishape, limit, np.int32))], [c])
    cb.output(c)

    bb = ModelBuilder()
    bi, bx, bw = bb.input("i", ishape, "int32"), bb.input("x", shape), bb.input("w", shape)
    ni = bb.tensor("ni", ishape, "int32")
    bb.op("ADD", [bi, bb.const("one", np.ones(ishape, np.int32))], [ni])
    h = bb.tensor("h", shape)
    bb.op("MUL", [bx, bb.const("half", np.full(shape, 0.5, np.float32))], [h])
    nx = bb.tensor("nx", (shape[0] + 1,) + tuple(shape[1:]) if grow else shape)
    if grow:
        bb.op("CONCATENATION", [h, bb.const("row", np.ones((1,) + tuple(shape[1:]), np.float32))], [nx], axis=0)
    elif cpu_body:                                     # float -> int64 -> float round trip on the CPU
        k = bb.tensor("k", shape, "int64")
        bb.op("CAST", [h], [k])
        k2 = bb.tensor("k2", shape, "int64")
        bb.op("ADD", [k, bb.const("c64", np.full(shape, 3, np.int64))], [k2])
        bb.op("CAST", [k2], [nx])
    else:
        bb.op("ADD", [h, bb.const("one_f", np.ones(shape, np.float32))], [nx])
    bb.output(ni)
    if swap:                                           # x, w = w, x * 0.5 + 1
        bb.output(bw)
        bb.output(nx)
    else:
        bb.output(nx)
        bb.output(bw)
    return with_subgraphs(mb, cb, bb)


def if_model(shape=(2, 2), cpu_else=False):
    mb = ModelBuilder()
    c = mb.input("c", (1,), "bool")
    x = mb.input("x", shape)
    y = mb.tensor("y", shape)
    mb.op("IF", [c, x], [y], then_subgraph_index=1, else_subgraph_index=2)
    mb.output(y)
    tb = ModelBuilder()
    tx = tb.input("x", shape)
    ty = tb.tensor("y", shape)
    tb.op("MUL", [tx, tb.const("two", np.full(shape, 2, np.float32))], [ty])
    tb.output(ty)
    eb = ModelBuilder()
    ex = eb.input("x", shape)
    ey = eb.tensor("y", shape)
    if cpu_else:
        k = eb.tensor("k", shape, "int64")
        eb.op("CAST", [ex], [k])
        eb.op("CAST", [k], [ey])
    else:
        eb.op("SUB", [ex, eb.const("one", np.ones(shape, np.float32))], [ey])
    eb.output(ey)
    return with_subgraphs(mb, tb, eb)


def _check(gpu, model, feeds_list):
    m = gpu.load(model)
    try:
        for feeds in feeds_list:
            refs = run_litert(model, feeds)
            outs = m.run(feeds)
            for o, r in zip(outs, refs):
                assert o.dtype == r.dtype and o.shape == r.shape
                np.testing.assert_allclose(o, r, rtol=1e-6, atol=1e-6)
    finally:
        m.close()


def _xw(shape=(2, 3), seed=0):
    rng = np.random.default_rng(seed)
    return [rng.uniform(-3, 3, shape).astype(np.float32), rng.uniform(-3, 3, shape).astype(np.float32)]


@pytest.mark.parametrize("limit", [0, 1, 5])
def test_while_counts(gpu, limit):
    _check(gpu, while_model(limit), [_xw(seed=s) for s in range(2)])


def test_while_scalar_counter(gpu):
    _check(gpu, while_model(3, ishape=()), [_xw()])


def test_while_swaps_loop_variables(gpu):
    _check(gpu, while_model(3, swap=True), [_xw()])


def test_while_body_with_cpu_ops(gpu):
    model = while_model(4, cpu_body=True)
    b = B.read_bundle(gpuc.compile(model, cache=False))
    kinds = {s.kind for s in b.steps}
    assert {B.GPU, B.HOST, B.JUMP, B.JUMP_IF_FALSE} <= kinds
    _check(gpu, model, [_xw(seed=s) for s in range(2)])


def test_while_shape_change_is_an_error():
    with pytest.raises(UnsupportedError, match="static shapes"):
        gpuc.compile(while_model(3, grow=True), cache=False)


@pytest.mark.parametrize("cpu_else", [False, True])
def test_if_both_branches(gpu, cpu_else):
    model = if_model(cpu_else=cpu_else)
    x = np.array([[1.5, -2.25], [3.0, 0.5]], np.float32)
    _check(gpu, model, [[np.array([True]), x], [np.array([False]), x]])


def test_while_runs_async_and_in_place(gpu):
    model = while_model(2)
    m = gpu.load(model)
    try:
        feeds = _xw()
        refs = run_litert(model, feeds)
        h = m.run_async(feeds)
        assert h.done()
        np.testing.assert_allclose(h.wait()[0], refs[0], rtol=1e-6)
        for i, f in enumerate(feeds):
            m.input_view(i)[...] = f
        m.run_in_place()
        np.testing.assert_allclose(m.output_view(0), refs[0], rtol=1e-6)
    finally:
        m.close()


def test_inspect_counts_subgraph_nodes():
    from gpuc.inspect import inspect_bundle, inspect_model
    model = while_model(3, cpu_body=True)
    rep, text = inspect_model(model, "while")
    assert rep["cpu_nodes"] == 3 and rep["gpu_nodes"] >= 3 and rep["host_round_trips"] == 2   # cond + body's CPU run
    assert [n["device"] for n in rep["subgraphs"][0]["nodes"]] == ["ctrl", "gpu"]
    assert [n["device"] for n in rep["subgraphs"][2]["nodes"]].count("cpu") == 3
    brep, _ = inspect_bundle(gpuc.compile(model, cache=False))
    assert (brep["cpu_nodes"], brep["host_round_trips"]) == (3, 2)
    assert {"jump", "jump_if_false", "host", "gpu"} == {s["kind"] for s in brep["program"]}


def test_while_body_updates_a_resource_variable(gpu):
    """v (CALL_ONCE: 1) gains x * 0.5 on each of 3 iterations; the main graph reads v after the loop.
    The variable persists across runs, like LiteRT's."""
    shape = (2, 2)
    mb = ModelBuilder()
    x = mb.input("x", shape)
    mb.op("CALL_ONCE", [], [], init_subgraph_index=3)
    i0 = mb.const("i0", np.zeros([1], np.int32))
    oi, ox = mb.tensor("oi", [1], "int32"), mb.tensor("ox", shape)
    mb.op("WHILE", [i0, x], [oi, ox], cond_subgraph_index=1, body_subgraph_index=2)
    h = mb.tensor("h", [], "resource")
    mb.op("VAR_HANDLE", [], [h], container="", shared_name="acc")
    v = mb.tensor("v", shape)
    mb.op("READ_VARIABLE", [h], [v])
    y = mb.tensor("y", shape)
    mb.op("ADD", [v, ox], [y])
    mb.output(y)
    cb = ModelBuilder()
    ci, _ = cb.input("i", [1], "int32"), cb.input("x", shape)
    c = cb.tensor("c", [1], "bool")
    cb.op("LESS", [ci, cb.const("lim", np.full([1], 3, np.int32))], [c])
    cb.output(c)
    bb = ModelBuilder()
    bi, bx = bb.input("i", [1], "int32"), bb.input("x", shape)
    ni = bb.tensor("ni", [1], "int32")
    bb.op("ADD", [bi, bb.const("one", np.ones([1], np.int32))], [ni])
    bh = bb.tensor("h", [], "resource")
    bb.op("VAR_HANDLE", [], [bh], container="", shared_name="acc")
    old = bb.tensor("old", shape)
    bb.op("READ_VARIABLE", [bh], [old])
    half = bb.tensor("half", shape)
    bb.op("MUL", [bx, bb.const("k", np.full(shape, 0.5, np.float32))], [half])
    new = bb.tensor("new", shape)
    bb.op("ADD", [old, half], [new])
    bb.op("ASSIGN_VARIABLE", [bh, new], [])
    bb.output(ni)
    bb.output(bx)
    ib = ModelBuilder()
    ih = ib.tensor("h", [], "resource")
    ib.op("VAR_HANDLE", [], [ih], container="", shared_name="acc")
    ib.op("ASSIGN_VARIABLE", [ih, ib.const("one", np.ones(shape, np.float32))], [])
    model = with_subgraphs(mb, cb, bb, ib)
    from helpers.litert import litert_stream
    xs = [np.array([[1, 2], [3, 4]], np.float32), np.array([[0.5, -1], [2, 0]], np.float32)]
    refs = litert_stream(model, xs)
    m = gpu.load(model)
    try:
        for _ in range(2):
            for x_, r in zip(xs, refs):
                np.testing.assert_allclose(m.run([x_])[0], r[0], rtol=1e-6)
            m.reset_state()
    finally:
        m.close()
