"""UNIDIRECTIONAL_SEQUENCE_LSTM against LiteRT: plain, CIFG, peephole, projection, clips, time_major,
cell activations, batch > 1; state persisting across runs of one loaded model and reset_state();
and the shared text_conv1d_lstm model (single run and its 50-step stream)."""
import numpy as np
import pytest

pytest.importorskip("vulkan")

import gpuc  # noqa: E402
from gpuc.errors import UnsupportedError  # noqa: E402
from helpers.litert import litert_runs  # noqa: E402
from helpers.models import lstm_model  # noqa: E402


def assert_close(got, ref, tol=1e-4):
    err = float(np.abs(got - ref).max())
    assert err <= tol * max(1.0, float(np.abs(ref).max())), f"max error {err}"


@pytest.fixture(scope="module")
def device():
    from gpuc.runtime.device import Device
    d = Device()
    yield d
    d.close()


CASES = {
    "plain": dict(),
    "batch1_time1": dict(b=1, t=1),
    "cifg": dict(cifg=True),
    "peephole": dict(peephole=True),
    "cifg_peephole": dict(cifg=True, peephole=True),
    "projection": dict(proj=True, c=8, o=5),
    "projection_nobias_clip": dict(proj=True, proj_bias=False, c=8, o=3, proj_clip=0.3, cell_clip=0.5),
    "cell_clip": dict(cell_clip=0.4),
    "time_major": dict(time_major=True, b=3, t=5),
    "relu": dict(act=1),
    "relu6": dict(act=3),
    "wide": dict(b=2, t=6, i=40, c=70, seed=3),
    "everything": dict(cifg=True, peephole=True, proj=True, c=9, o=4, time_major=True, cell_clip=1.0,
                       proj_clip=0.8),
    # a long sequence in chunks of steps (ops/step_chunks.py: one dispatch over it all gave NaN on lavapipe)
    "long_in_chunks": dict(b=2, t=200, i=40, c=64, seed=4),
}


@pytest.mark.parametrize("name", list(CASES))
def test_lstm_vs_litert_three_runs(name, device):
    data, xshape = lstm_model(**CASES[name])
    rng = np.random.default_rng(7)
    xs = [rng.uniform(-1, 1, xshape).astype(np.float32) for _ in range(3)]
    refs = litert_runs(data, xs)
    with gpuc.load(gpuc.compile(data), device=device) as m:
        assert m.has_state
        for x, ref in zip(xs, refs):                 # state carries over between runs
            assert_close(m.run([x])[0], ref)
        m.reset_state()                              # back to the initial state: the first run again
        assert_close(m.run([xs[0]])[0], refs[0])


def test_state_persists_and_resets(device):
    data, xshape = lstm_model(b=1, t=3, i=4, c=5)
    x = np.random.default_rng(1).uniform(-1, 1, xshape).astype(np.float32)
    with gpuc.load(gpuc.compile(data), device=device) as m:
        first = m.run([x])[0]
        second = m.run([x])[0]
        assert np.abs(first - second).max() > 1e-3           # the state really changed the result
        m.reset_state()
        np.testing.assert_array_equal(m.run([x])[0], first)
        # async runs keep the order of the state updates
        handles = [m.run_async([x]) for _ in range(2)]
        outs = [h.wait() for h in handles]
        np.testing.assert_array_equal(outs[0][0], second)
        m.reset_state()                                      # waits for nothing in flight; idempotent
        m.reset_state()
        np.testing.assert_array_equal(m.run([x])[0], first)


def test_state_arena_not_shared():
    """Variable tensors get arena bytes of their own (whole-program lifetime) and an initial value."""
    from gpuc.runtime.bundle import ARENA, WEIGHTS, read_bundle
    data, _ = lstm_model()
    b = read_bundle(gpuc.compile(data))
    assert len(b.state_init) == 2
    for dst, src in b.state_init:
        d, s = b.tensors[dst], b.tensors[src]
        assert d.memory == ARENA and s.memory == WEIGHTS and d.nbytes == s.nbytes
        for j, t in enumerate(b.tensors):
            if j != dst and t.memory == ARENA:
                assert t.offset + t.nbytes <= d.offset or d.offset + d.nbytes <= t.offset, (t.name, d.name)


def test_nonzero_initial_state(device):
    """A variable tensor's buffer is its initial value (LiteRT refuses such models: its reference is
    the same model without the buffers and the state set through set_tensor before the first invoke)."""
    rng = np.random.default_rng(5)
    h, c = rng.uniform(-0.5, 0.5, (1, 4)).astype(np.float32), rng.uniform(-0.5, 0.5, (1, 4)).astype(np.float32)
    kw = dict(b=1, t=2, i=3, c=4, state=(h, c))
    data, xshape = lstm_model(**kw)
    plain, _ = lstm_model(**kw, state_buffer=False)
    state = {"h_state": h, "c_state": c}
    x = np.random.default_rng(2).uniform(-1, 1, xshape).astype(np.float32)
    refs = litert_runs(plain, [x, x], state)
    zero = litert_runs(plain, [x])[0]
    assert np.abs(zero - refs[0]).max() > 1e-3
    with gpuc.load(gpuc.compile(data), device=device) as m:
        assert_close(m.run([x])[0], refs[0])
        assert_close(m.run([x])[0], refs[1])


@pytest.mark.parametrize("kw,reason", [(dict(layer_norm=True), "layer-normalized"), (dict(act=5), "activation"),
                                       (dict(act=0), "activation")])
def test_unsupported_lstm(kw, reason):
    data, _ = lstm_model(**kw)
    with pytest.raises(UnsupportedError, match=reason):
        gpuc.compile(data)


def test_shared_model_single_and_stream(models_dir, device):
    path = models_dir / "text_conv1d_lstm_tfkeras_f32.tflite"
    ref = models_dir / "ref"
    if not path.is_file():
        pytest.skip("text_conv1d_lstm model not in the shared models")
    name = "text_conv1d_lstm_tfkeras_f32"
    x, y = np.load(ref / f"{name}.in0.npy"), np.load(ref / f"{name}.out0.npy")
    si, so = np.load(ref / f"{name}.stream_in0.npy"), np.load(ref / f"{name}.stream_out0.npy")
    with gpuc.load(gpuc.compile(str(path)), device=device) as m:
        assert np.abs(m.run([x])[0] - y).max() <= 1e-3 * np.abs(y).max()
        m.reset_state()
        got = np.stack([m.run([si[s]])[0] for s in range(len(si))])
        err = float(np.abs(got - so).max())
        assert err <= 1e-3 * np.abs(so).max()
        # this model's state moves the outputs by only ~4e-5 (under the tolerance), so also check
        # that the stateful run is far closer than a stateless one
        stateless = []
        for s in range(len(si)):
            m.reset_state()
            stateless.append(m.run([si[s]])[0])
        gap = float(np.abs(np.stack(stateless) - so).max())
        assert gap > 1e-5 and err < gap / 10, (err, gap)
