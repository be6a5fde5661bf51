"""Resource variables (VAR_HANDLE / READ_VARIABLE / ASSIGN_VARIABLE) and CALL_ONCE against LiteRT:
state persists across runs of one loaded model, reset_state() re-runs the init subgraph; and the
shared microwakeword streaming model (single run and its 50-step stream)."""
import os

import numpy as np
import pytest

pytest.importorskip("vulkan")

import gpuc  # noqa: E402
from gpuc.errors import UnsupportedError  # noqa: E402
from helpers.builder import ModelBuilder, with_subgraphs  # noqa: E402
from helpers.litert import litert_stream  # noqa: E402
from helpers.repo import ROOT, shared_models_dir  # noqa: E402

MODELS = str(shared_models_dir() or ROOT.parent / "shared" / "models")


def accumulator(init=(1.0, -2.0, 3.0, 0.5), read_twice=False, dtype="float32"):
    """v <- v + x; y = v * 2 (read after the assign), z = old v; init subgraph sets v (CALL_ONCE)."""
    n = len(init)
    mb = ModelBuilder()
    x = mb.input("x", [n], dtype)
    mb.op("CALL_ONCE", [], [], init_subgraph_index=1)
    h = mb.tensor("h", [], "resource")
    mb.op("VAR_HANDLE", [], [h], container="", shared_name="acc")
    old = mb.tensor("old", [n], dtype)
    mb.op("READ_VARIABLE", [h], [old])
    s = mb.tensor("s", [n], dtype)
    mb.op("ADD", [old, x], [s])
    mb.op("ASSIGN_VARIABLE", [h, s], [])
    new = mb.tensor("new", [n], dtype)
    mb.op("READ_VARIABLE", [h], [new])
    y = mb.tensor("y", [n], dtype)
    mb.op("MUL", [new, mb.const("two", np.full([n], 2, dtype))], [y])
    z = mb.tensor("z", [n], dtype)
    mb.op("ADD", [old, mb.const("zero", np.zeros([n], dtype))], [z])
    mb.output(y)
    mb.output(z)
    ib = ModelBuilder()
    h2 = ib.tensor("h", [], "resource")
    ib.op("VAR_HANDLE", [], [h2], container="", shared_name="acc")
    ib.op("ASSIGN_VARIABLE", [h2, ib.const("init", np.asarray(init, dtype))], [])
    if read_twice:
        h3 = ib.tensor("h3", [], "resource")
        ib.op("VAR_HANDLE", [], [h3], container="", shared_name="other")
        ib.op("ASSIGN_VARIABLE", [h3, ib.const("init2", np.asarray(init, dtype))], [])
    return with_subgraphs(mb, ib)


def check_stream(gpu, data, xs):
    """Run `xs` through one loaded model in order: each first output matches LiteRT's stream."""
    ref = litert_stream(data, xs)
    m = gpu.load(data)
    try:
        for x, r in zip(xs, ref):
            np.testing.assert_allclose(m.run([x])[0], r[0], rtol=1e-6)
    finally:
        m.close()


@pytest.mark.parametrize("dtype", ["float32", "int32", "int64"])   # int64: variables on the CPU
def test_accumulator_state_and_reset(gpu, dtype):
    data = accumulator(dtype=dtype)
    rng = np.random.default_rng(0)
    xs = [(rng.uniform(-3, 3, [4]) if dtype == "float32" else rng.integers(-9, 9, [4])).astype(dtype)
          for _ in range(4)]
    ref = litert_stream(data, xs)
    m = gpu.load(data)
    try:
        assert m.has_state
        for _ in range(2):                      # the second pass after reset_state() repeats the first
            for x, r in zip(xs, ref):
                for o, e in zip(m.run([x]), r):
                    np.testing.assert_allclose(o, e, rtol=1e-6)
            m.reset_state()
    finally:
        m.close()


def test_unused_init_variable_and_inspect(gpu):
    """The init subgraph may set variables the main graph never touches."""
    data = accumulator(read_twice=True)
    xs = [np.ones(4, np.float32)] * 2
    check_stream(gpu, data, xs)


def test_read_before_any_assign_is_an_error():
    mb = ModelBuilder()
    x = mb.input("x", [2])
    h = mb.tensor("h", [], "resource")
    mb.op("VAR_HANDLE", [], [h], container="", shared_name="v")
    v = mb.tensor("v", [2])
    mb.op("READ_VARIABLE", [h], [v])
    y = mb.tensor("y", [2])
    mb.op("ADD", [v, x], [y])
    mb.output(y)
    with pytest.raises(UnsupportedError, match="READ_VARIABLE.*reads variable 'v'"):
        gpuc.compile(mb.finish(), cache=False)


def test_variable_shape_conflict_is_an_error():
    mb = ModelBuilder()
    x = mb.input("x", [2])
    h = mb.tensor("h", [], "resource")
    mb.op("VAR_HANDLE", [], [h], container="", shared_name="v")
    mb.op("ASSIGN_VARIABLE", [h, x], [])
    v = mb.tensor("v", [3])
    mb.op("READ_VARIABLE", [h], [v])
    mb.output(v)
    with pytest.raises(UnsupportedError, match="one static shape"):
        gpuc.compile(mb.finish(), cache=False)


def _ref(name):
    return np.load(os.path.join(MODELS, "ref", name))


def _within_one_step(o, refs):
    d = np.min([np.abs(o.astype(np.int64) - r.astype(np.int64)) for r in refs], axis=0)
    return int(d.max())


@pytest.mark.skipif(not os.path.exists(os.path.join(MODELS, "microwakeword_okay_nabu.tflite")), reason="no shared models")
def test_microwakeword_single_and_stream(gpu):
    path = os.path.join(MODELS, "microwakeword_okay_nabu.tflite")
    m = gpu.load(open(path, "rb").read())
    try:
        assert m.has_state
        (y,) = m.run([_ref("microwakeword_okay_nabu.in0.npy")])
        assert y.dtype == np.uint8
        assert _within_one_step(y, [_ref("microwakeword_okay_nabu.out0.npy"),
                                    _ref("microwakeword_okay_nabu.out0.nodelegate.npy")]) <= 1
        m.reset_state()
        xs = _ref("microwakeword_okay_nabu.stream_in0.npy")
        outs = np.stack([m.run([x])[0] for x in xs])
        refs = [_ref("microwakeword_okay_nabu.stream_out0.npy"), _ref("microwakeword_okay_nabu.stream_out0.nodelegate.npy")]
        assert _within_one_step(outs, refs) <= 1
        m.reset_state()
        again = np.stack([m.run([x])[0] for x in xs])
        assert np.array_equal(outs, again)
    finally:
        m.close()


def test_init_subgraph_computes_its_values(gpu):
    """CALL_ONCE's subgraph computes the initial value (ADD, MUL of constants; a READ of what it
    assigned): evaluated at compile time with the CPU kernels."""
    mb = ModelBuilder()
    x = mb.input("x", [3])
    mb.op("CALL_ONCE", [], [], init_subgraph_index=1)
    h = mb.tensor("h", [], "resource")
    mb.op("VAR_HANDLE", [], [h], container="", shared_name="v")
    old = mb.tensor("old", [3])
    mb.op("READ_VARIABLE", [h], [old])
    s = mb.tensor("s", [3])
    mb.op("ADD", [old, x], [s])
    mb.op("ASSIGN_VARIABLE", [h, s], [])
    mb.output(s)
    ib = ModelBuilder()
    h2 = ib.tensor("h", [], "resource")
    ib.op("VAR_HANDLE", [], [h2], container="", shared_name="v")
    a = ib.tensor("a", [3])
    ib.op("ADD", [ib.const("p", np.array([1, 2, 3], np.float32)), ib.const("q", np.array([0.5, 0.5, 0.5], np.float32))], [a])
    ib.op("ASSIGN_VARIABLE", [h2, a], [])
    r = ib.tensor("r", [3])
    ib.op("READ_VARIABLE", [h2], [r])
    b = ib.tensor("b", [3])
    ib.op("MUL", [r, ib.const("two", np.full([3], 2, np.float32))], [b])
    ib.op("ASSIGN_VARIABLE", [h2, b], [])
    data = with_subgraphs(mb, ib)
    xs = [np.array([0.25, -1, 4], np.float32)] * 3
    check_stream(gpu, data, xs)


@pytest.mark.skipif(not os.path.exists(os.path.join(MODELS, "microwakeword_okay_nabu.tflite")), reason="no shared models")
def test_microwakeword_through_the_cli(tmp_path):
    import subprocess
    import sys
    path = os.path.join(MODELS, "microwakeword_okay_nabu.tflite")
    bundle, npz = tmp_path / "mw.bundle", tmp_path / "o.npz"
    run = lambda *a: subprocess.run([sys.executable, "-m", "gpuc.cli", *map(str, a)],  # noqa: E731
                                    capture_output=True, text=True)
    r = run("compile", path, "-o", bundle)
    assert r.returncode == 0 and "CPU" not in r.stdout + r.stderr, r.stderr
    r = run("run", bundle, "--input", os.path.join(MODELS, "ref", "microwakeword_okay_nabu.in0.npy"), "--output", npz)
    assert r.returncode == 0, r.stderr
    with np.load(npz) as z:
        (y,) = list(z.values())
    assert _within_one_step(y, [_ref("microwakeword_okay_nabu.out0.npy")]) <= 1


@pytest.mark.skipif(not os.path.exists(os.path.join(MODELS, "microwakeword_okay_nabu.tflite")), reason="no shared models")
def test_microwakeword_stream_logits(gpu):
    """The int8 logits (FULLY_CONNECTED before LOGISTIC) over the 50-step stream: a much sharper check
    than the saturated uint8 output.  Simulated int8 arithmetic differs from LiteRT's integer kernels
    by at most one step per op (depthwise rounding), which the state carries into later steps."""
    from gpuc.compiler import DEFAULT_OPTIONS
    from gpuc.compiler import driver
    from gpuc.compiler.frontend.importer import load_tflite
    from gpuc.compiler.passes import run_passes
    from gpuc.compiler.passes.variables import resolve_variables
    from gpuc.compiler.prepare import lower_graph
    model = load_tflite(open(os.path.join(MODELS, "microwakeword_okay_nabu.tflite"), "rb").read())
    g = model.main
    resolve_variables(model, g)
    fc = [n for n in g.nodes if n.op == "FULLY_CONNECTED"][-1]
    g.outputs = [fc.outputs[0]]
    run_passes(g)
    bundle = driver.build_bundle(g, lower_graph(g), "mw", dict(DEFAULT_OPTIONS), "test", {})
    m = gpuc.load(bundle, device=gpu.device)
    try:
        outs = np.stack([m.run([x])[0] for x in _ref("microwakeword_okay_nabu.stream_in0.npy")])
    finally:
        m.close()
    d = np.abs(outs.astype(np.int64) - _ref("microwakeword_okay_nabu.stream_out0.preact.nodelegate.npy").astype(np.int64))
    assert d.max() <= 2 and d.mean() < 0.75, (d.max(), d.mean())
