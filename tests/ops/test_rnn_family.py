"""The recurrent builtins against LiteRT (issue 28): RNN, UNIDIRECTIONAL_SEQUENCE_RNN,
BIDIRECTIONAL_SEQUENCE_RNN, BIDIRECTIONAL_SEQUENCE_LSTM and SVDF on the GPU.  Random shapes, weights
and options (every fused activation, time_major, merge_outputs, aux inputs, SVDF rank); the state
(variable tensors) carried across two runs of one loaded model, then reset_state(); refusals."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("vulkan")

import gpuc  # noqa: E402
from gpuc.errors import GpucError  # noqa: E402
from helpers.builder import ModelBuilder  # noqa: E402
from helpers.litert import make_interpreter  # noqa: E402


@pytest.fixture(scope="module")
def device():
    from gpuc.runtime.device import Device
    d = Device()
    yield d
    d.close()


def _w(rng, *shape, scale=0.6):
    return rng.uniform(-scale, scale, shape).astype(np.float32)


def _state(mb, name, shape):
    s = mb.tensor(name, shape)
    mb.tensors[s]["is_variable"] = True
    return s


def _litert_runs(model, feeds):
    """One interpreter invoked once per feed (a list of the model's inputs): every output, per run."""
    it = make_interpreter(model)
    it.allocate_tensors()
    res = []
    for xs in feeds:
        for d, x in zip(it.get_input_details(), xs):
            it.set_tensor(d["index"], x)
        it.invoke()
        res.append([np.array(it.get_tensor(d["index"])) for d in it.get_output_details()])
    return res


def _check_runs(model, shapes, device, seed, tol=2e-5, runs=2):
    """`runs` runs of one loaded model against one LiteRT interpreter (state carried over), then the
    first run again after reset_state()."""
    rng = np.random.default_rng(seed)
    feeds = [[rng.uniform(-1.5, 1.5, s).astype(np.float32) for s in shapes] for _ in range(runs)]
    refs = _litert_runs(model, feeds)
    with gpuc.load(gpuc.compile(model), device=device) as m:
        assert m.has_state
        got = [m.run(f) for f in feeds]
        m.reset_state()
        again = m.run(feeds[0])
    for outs, ref in zip(got + [again], refs + refs[:1]):
        assert len(outs) == len(ref)
        for o, r in zip(outs, ref):
            assert o.shape == r.shape, (o.shape, r.shape)
            err = float(np.abs(o - r).max())
            assert err <= tol * max(1.0, float(np.abs(r).max())), f"max error {err}"
    moved = max(float(np.abs(a - b).max()) for a, b in zip(refs[0], refs[1])) if feeds[0] is not feeds[1] else 0
    return moved


# --- RNN / UNIDIRECTIONAL_SEQUENCE_RNN --------------------------------------------------------------

def rnn_model(b, i, u, act, t=None, time_major=False, seed=0, weights_dtype="float32"):
    """t None: the single-step RNN builtin, else UNIDIRECTIONAL_SEQUENCE_RNN over t steps."""
    rng = np.random.default_rng(seed)
    mb = ModelBuilder()
    xs = (b, i) if t is None else ((t, b, i) if time_major else (b, t, i))
    x = mb.input("x", xs)
    wx = _w(rng, u, i)
    if weights_dtype == "int8":
        wq = mb.const("wx", np.round(wx * 100).astype(np.int8), quant=([0.01], [0]))
    else:
        wq = mb.const("wx", wx)
    ins = [x, wq, mb.const("wh", _w(rng, u, u)), mb.const("b", _w(rng, u)), _state(mb, "h", (b, u))]
    ys = (b, u) if t is None else ((t, b, u) if time_major else (b, t, u))
    y = mb.tensor("y", ys)
    if t is None:
        mb.op("RNN", ins, [y], fused_activation_function=act)
    else:
        mb.op("UNIDIRECTIONAL_SEQUENCE_RNN", ins, [y], fused_activation_function=act, time_major=time_major)
    mb.output(y)
    return mb.finish(), [xs]


@pytest.mark.parametrize("act", range(6))
def test_rnn_step_vs_litert(act, device):
    rng = np.random.default_rng(100 + act)
    b, i, u = (int(v) for v in rng.integers(1, 7, 3))
    model, shapes = rnn_model(b, i, u, act, seed=act)
    moved = _check_runs(model, shapes, device, seed=act)
    assert act == 5 or moved > 0


@pytest.mark.parametrize("act,time_major", [(0, False), (1, True), (2, False), (3, True), (4, False), (4, True),
                                            (5, False)])
def test_sequence_rnn_vs_litert(act, time_major, device):
    rng = np.random.default_rng(200 + act)
    b, t, i, u = (int(v) for v in rng.integers(1, 6, 4))
    model, shapes = rnn_model(b, i, u + 1, act, t=t + 1, time_major=time_major, seed=act)
    _check_runs(model, shapes, device, seed=act)


def test_sequence_rnn_wide(device):
    model, shapes = rnn_model(2, 37, 70, 4, t=5, seed=9)      # units over the workgroup width
    _check_runs(model, shapes, device, seed=9)


@pytest.mark.parametrize("t", [None, 3])
def test_rnn_hybrid_weights_refused(t):
    model, _ = rnn_model(1, 3, 4, 4, t=t, weights_dtype="int8")
    with pytest.raises(GpucError, match="RNN.*hybrid-quantized int8"):
        gpuc.compile(model)


# --- BIDIRECTIONAL_SEQUENCE_RNN ---------------------------------------------------------------------

def bidi_rnn_model(b, t, i, uf, ub, act=4, time_major=False, merge=False, aux=None, aux_weights=False, seed=0):
    """aux: the aux input's feature size (None: no aux input)."""
    rng = np.random.default_rng(seed)
    mb = ModelBuilder()
    seq = lambda f: (t, b, f) if time_major else (b, t, f)  # noqa: E731
    shapes = [seq(i)]
    ins = [mb.input("x", seq(i))]
    for d, u in (("fw", uf), ("bw", ub)):
        ins += [mb.const(f"{d}_w", _w(rng, u, i)), mb.const(f"{d}_r", _w(rng, u, u)), mb.const(f"{d}_b", _w(rng, u)),
                _state(mb, f"{d}_h", (b, u))]
    if aux is None:
        ins += [-1, -1, -1]
    else:
        ins.append(mb.input("aux", seq(aux)))
        shapes.append(seq(aux))
        ins += [mb.const("fw_a", _w(rng, uf, aux)), mb.const("bw_a", _w(rng, ub, aux))] if aux_weights else [-1, -1]
    outs = [mb.tensor("y", seq(uf + ub))] if merge else [mb.tensor("y_fw", seq(uf)), mb.tensor("y_bw", seq(ub))]
    mb.op("BIDIRECTIONAL_SEQUENCE_RNN", ins, outs, fused_activation_function=act, time_major=time_major,
          merge_outputs=merge)
    for o in outs:
        mb.output(o)
    return mb.finish(), shapes


BIDI_RNN = {   # (time_major, merge, aux size (None: none), aux weights, act)
    "plain": (False, False, None, False, 4),
    "merged_relu": (False, True, None, False, 1),
    "time_major_merged": (True, True, None, False, 3),
    "time_major_relu1": (True, False, None, False, 2),
    "aux_cross": (False, False, 3, True, 4),
    "aux_cross_merged_time_major": (True, True, 6, True, 4),
    "aux_no_weights": (False, True, 5, False, 0),
    "aux_no_weights_time_major": (True, False, 5, False, 4),
    "sign_bit": (False, False, None, False, 5),
}


@pytest.mark.parametrize("name", list(BIDI_RNN))
def test_bidirectional_rnn_vs_litert(name, device):
    tm, merge, aux, aw, act = BIDI_RNN[name]
    rng = np.random.default_rng(len(name))
    b, t = (int(v) for v in rng.integers(1, 5, 2))
    model, shapes = bidi_rnn_model(b, t + 1, 5, int(rng.integers(2, 7)), int(rng.integers(2, 7)), act=act,
                                   time_major=tm, merge=merge, aux=aux, aux_weights=aw, seed=len(name))
    _check_runs(model, shapes, device, seed=len(name))


def test_bidirectional_rnn_refusals():
    model, _ = bidi_rnn_model(2, 3, 5, 4, 3, time_major=True, aux=3, aux_weights=True)
    with pytest.raises(GpucError, match="BIDIRECTIONAL_SEQUENCE_RNN.*reads past its end"):
        gpuc.compile(model)
    model, _ = bidi_rnn_model(2, 3, 5, 4, 3, time_major=True, aux=4)
    with pytest.raises(GpucError, match="BIDIRECTIONAL_SEQUENCE_RNN.*must have the input's shape"):
        gpuc.compile(model)


# --- SVDF -------------------------------------------------------------------------------------------

def svdf_model(b, i, u, rank, memory, act=0, bias=True, seed=0):
    rng = np.random.default_rng(seed)
    mb = ModelBuilder()
    f = u * rank
    ins = [mb.input("x", (b, i)), mb.const("wf", _w(rng, f, i)), mb.const("wt", _w(rng, f, memory)),
           mb.const("bias", _w(rng, u)) if bias else -1, _state(mb, "state", (b, f * memory))]
    y = mb.tensor("y", (b, u))
    mb.op("SVDF", ins, [y], rank=rank, fused_activation_function=act)
    mb.output(y)
    return mb.finish(), [(b, i)]


SVDF_CASES = {   # (b, i, u, rank, memory, act, bias)
    "rank1": (2, 5, 4, 1, 3, 0, True),
    "rank2_relu": (1, 3, 3, 2, 4, 1, True),
    "rank3_no_bias_tanh": (3, 4, 2, 3, 5, 4, False),
    "memory1_relu6": (2, 6, 3, 2, 1, 3, True),
    "memory2_relu1": (2, 2, 5, 1, 2, 2, False),
    "wide_sign_bit": (2, 9, 40, 2, 6, 5, True),
}


@pytest.mark.parametrize("name", list(SVDF_CASES))
def test_svdf_vs_litert(name, device):
    b, i, u, rank, mem, act, bias = SVDF_CASES[name]
    model, shapes = svdf_model(b, i, u, rank, mem, act, bias, seed=len(name))
    _check_runs(model, shapes, device, seed=len(name), runs=3)


def test_svdf_bad_rank_refused():
    rng = np.random.default_rng(0)
    mb = ModelBuilder()
    ins = [mb.input("x", (1, 3)), mb.const("wf", _w(rng, 5, 3)), mb.const("wt", _w(rng, 5, 2)), -1,
           _state(mb, "state", (1, 10))]
    y = mb.tensor("y", (1, 2))
    mb.op("SVDF", ins, [y], rank=2)
    mb.output(y)
    with pytest.raises(GpucError, match="SVDF.*rank 2 does not divide the 5 filters"):
        gpuc.compile(mb.finish())


# --- BIDIRECTIONAL_SEQUENCE_LSTM --------------------------------------------------------------------

def _lstm_weights(mb, rng, d, i, c, o, cifg, peephole, proj):
    ins = [-1 if (cifg and g == 0) else mb.const(f"{d}_wx{g}", _w(rng, c, i)) for g in range(4)]
    ins += [-1 if (cifg and g == 0) else mb.const(f"{d}_wh{g}", _w(rng, c, o)) for g in range(4)]
    ins += [-1 if (not peephole or (cifg and g == 0)) else mb.const(f"{d}_p{g}", _w(rng, c)) for g in range(3)]
    ins += [-1 if (cifg and g == 0) else mb.const(f"{d}_b{g}", _w(rng, c)) for g in range(4)]
    ins += [mb.const(f"{d}_pw", _w(rng, o, c)) if proj else -1, mb.const(f"{d}_pb", _w(rng, o)) if proj else -1]
    return ins


def bidi_lstm_model(b, t, i, cf, cb, act=4, time_major=True, merge=False, aux=None, aux_weights=False, cifg=False,
                    peephole=False, proj=False, cell_clip=0.0, proj_clip=0.0, seed=0):
    rng = np.random.default_rng(seed)
    mb = ModelBuilder()
    seq = lambda f: (t, b, f) if time_major else (b, t, f)  # noqa: E731
    of, ob = (cf - 1, cb - 1) if proj else (cf, cb)
    shapes = [seq(i)]
    ins = [mb.input("x", seq(i))]
    ins += _lstm_weights(mb, rng, "fw", i, cf, of, cifg, peephole, proj)
    ins += _lstm_weights(mb, rng, "bw", i, cb, ob, cifg, peephole, proj)
    ins += [_state(mb, "fw_h", (b, of)), _state(mb, "fw_c", (b, cf)), _state(mb, "bw_h", (b, ob)),
            _state(mb, "bw_c", (b, cb))]
    if aux is None:
        ins += [-1] * 9
    else:
        ins.append(mb.input("aux", seq(aux)))
        shapes.append(seq(aux))
        for d, c in (("fw", cf), ("bw", cb)):
            ins += [-1 if (not aux_weights or (cifg and g == 0)) else mb.const(f"{d}_a{g}", _w(rng, c, aux))
                    for g in range(4)]
    outs = [mb.tensor("y", seq(of + ob))] if merge else [mb.tensor("y_fw", seq(of)), mb.tensor("y_bw", seq(ob))]
    mb.op("BIDIRECTIONAL_SEQUENCE_LSTM", ins, outs, fused_activation_function=act, time_major=time_major,
          merge_outputs=merge, cell_clip=cell_clip, proj_clip=proj_clip)
    for o in outs:
        mb.output(o)
    return mb.finish(), shapes


BIDI_LSTM = {
    "time_major": dict(),
    "batch_major_merged": dict(time_major=False, merge=True),
    "cifg_peephole_relu": dict(cifg=True, peephole=True, act=1),
    "projection_clips_merged": dict(proj=True, cell_clip=0.5, proj_clip=0.4, merge=True),
    "aux_cross": dict(aux=3, aux_weights=True),
    "aux_cross_cifg_batch_major": dict(aux=6, aux_weights=True, cifg=True, time_major=False, merge=True),
    "aux_backward_input": dict(aux=4, act=3),
    "aux_backward_input_batch_major": dict(aux=4, time_major=False),
}


@pytest.mark.parametrize("name", list(BIDI_LSTM))
def test_bidirectional_lstm_vs_litert(name, device):
    rng = np.random.default_rng(len(name) + 50)
    b, t = (int(v) for v in rng.integers(1, 4, 2))
    if BIDI_LSTM[name].get("merge") and not BIDI_LSTM[name].get("time_major", True):
        b = 1               # (LiteRT's batch-major merged output past batch 0 varies run to run: see below)
    c = int(rng.integers(3, 7))          # (LiteRT requires one cell size for both directions)
    model, shapes = bidi_lstm_model(b, t + 1, 4, c, c, seed=len(name),
                                    **BIDI_LSTM[name])
    _check_runs(model, shapes, device, seed=len(name), tol=5e-5)


def test_long_sequences_run_in_chunks_of_steps(device):
    """A sequence whose one dispatch would pass an invocation's loops more than step_chunks.LOOP_BUDGET times runs
    as one dispatch a chunk of steps, the state carried between them (one dispatch over it all gave NaN on
    lavapipe): a sequence RNN and both directions of a bidirectional LSTM with aux weights, against LiteRT over
    three runs (state carried across runs, then reset)."""
    from gpuc.runtime.bundle import read_bundle
    for model, shapes in (rnn_model(2, 40, 8, 4, t=1300, seed=21),     # (few units: a recurrence that is not chaotic)
                          bidi_lstm_model(1, 150, 40, 64, 64, aux=8, aux_weights=True, seed=22)):
        labels = [d.label for d in read_bundle(gpuc.compile(model, cache=False)).dispatches]
        assert sum("steps 0.." in lb for lb in labels) >= 1 and sum(": steps" in lb for lb in labels) >= 2
        _check_runs(model, shapes, device, seed=21, tol=5e-5)


def test_bidirectional_lstm_refusals():
    model, _ = bidi_lstm_model(2, 3, 4, 4, 4, act=0)
    with pytest.raises(GpucError, match="BIDIRECTIONAL_SEQUENCE_LSTM.*NONE"):
        gpuc.compile(model)
    model, _ = bidi_lstm_model(2, 3, 4, 4, 5)
    with pytest.raises(GpucError, match="BIDIRECTIONAL_SEQUENCE_LSTM.*backward cell size 5 differs"):
        gpuc.compile(model)
    model, _ = bidi_lstm_model(2, 3, 4, 4, 4, aux=3)
    with pytest.raises(GpucError, match="BIDIRECTIONAL_SEQUENCE_LSTM.*3 features, the input 4"):
        gpuc.compile(model)


def test_bidirectional_lstm_batch_major_merged_batches(device):
    """Batch-major merged outputs with batch > 1: LiteRT's kernel leaves parts of batch rows past the first
    unwritten (its output varies from one interpreter to the next), so the reference is LiteRT's
    unmerged outputs of the same weights, concatenated."""
    kw = dict(time_major=False, cifg=True, seed=4)
    merged, shapes = bidi_lstm_model(3, 4, 4, 5, 5, merge=True, **kw)
    split, _ = bidi_lstm_model(3, 4, 4, 5, 5, merge=False, **kw)
    rng = np.random.default_rng(4)
    feeds = [[rng.uniform(-1.5, 1.5, shapes[0]).astype(np.float32)] for _ in range(2)]
    refs = [np.concatenate(r, -1) for r in _litert_runs(split, feeds)]
    with gpuc.load(gpuc.compile(merged), device=device) as m:
        for f, r in zip(feeds, refs):
            assert float(np.abs(m.run(f)[0] - r).max()) <= 5e-5
