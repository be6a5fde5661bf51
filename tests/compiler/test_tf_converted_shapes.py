"""Declared-dynamic inputs as TensorFlow's converter writes them (issue 34): tf.signal.stft -> abs ->
tensordot, tf.signal.frame with pad_end, a tf.reshape driven by tf.shape.  The models are committed
(tests/data/gen_dynamic_shape_models.py made them with tensorflow-cpu); the converter wrote [1, 1]
style shapes downstream of the -1 and the shape arithmetic into the graph.  Each compiles to the GPU
alone and matches LiteRT (resized to the same shape) within 1e-5 of the largest output magnitude."""
from pathlib import Path

import numpy as np
import pytest

import gpuc
from gpuc.compiler import normalize_options
from gpuc.compiler.passes.rfft import dft_matrices
from gpuc.compiler.prepare import prepare
from gpuc.errors import GpucError
from gpuc.runtime.bundle import read_bundle
from helpers.litert import run_litert
from helpers.ops import assert_matches

DATA = Path(__file__).resolve().parents[1] / "data"

# model, input name, shape given with --input-shape (None: the file's own shape)
CASES = [
    ("tf_stft_mel", "audio", None),            # [-1, 4000] at [1, 4000]
    ("tf_stft_mel", "audio", (3, 4000)),
    ("tf_frame_pad", "signal", None),          # [-1, 1000]
    ("tf_frame_pad", "signal", (2, 1000)),
    ("tf_shape_reshape", "x", None),           # [-1, 256]
    ("tf_shape_reshape", "x", (3, 256)),
    ("tf_shape_reshape_len", "x", (1, 64)),    # [1, -1]; the file's [1, 1] does not divide by 4
    ("tf_shape_reshape_len", "x", (1, 200)),
]
FILE_SHAPES = {"tf_stft_mel": (1, 4000), "tf_frame_pad": (1, 1000), "tf_shape_reshape": (1, 256)}


def model(name: str) -> bytes:
    return (DATA / f"{name}.tflite").read_bytes()


def input_shape(name: str, given):
    return given if given is not None else FILE_SHAPES[name]


@pytest.mark.parametrize("name,inp,given", CASES, ids=[f"{c[0]}-{c[2] or 'file'}" for c in CASES])
def test_matches_litert(gpu, name, inp, given):
    m = model(name)
    bundle = gpuc.compile(m, cache=False, input_shapes={inp: given} if given else None)
    stats = read_bundle(bundle).stats
    assert stats["cpu_nodes"] == 0 and stats["host_round_trips"] == 0, stats
    x = np.random.default_rng(34).standard_normal(input_shape(name, given)).astype(np.float32)
    ref = run_litert(m, [x.copy()])                # resized to x's shape where it differs from the file's
    ld = gpuc.load(bytes(bundle), device=gpu.device)
    try:
        out = ld.run([x])
    finally:
        ld.close()
    assert_matches(out, ref)
    for o, r in zip(out, ref):
        assert np.abs(o.astype(np.float64) - r).max() <= 1e-5 * np.abs(r).max()


def test_shape_arithmetic_folds():
    """SHAPE, SPLIT_V, the scalar arithmetic, PACK, CONCATENATION, RANGE, GATHER of the shape vector and
    int32 REDUCE_PROD all fold; RFFT2D and COMPLEX_ABS become matrix products; no shape is the file's [1, 1]."""
    p = prepare(model("tf_stft_mel"))
    ops = {n.op for n in p.graph.nodes}
    assert not ops & {"SHAPE", "SPLIT_V", "RANGE", "PACK", "REDUCE_PROD", "FLOOR_DIV", "RFFT2D", "COMPLEX_ABS"}, ops
    assert not p.front.cpu
    g = p.graph
    assert [g.t(o).shape for o in g.outputs] == [(1, 4), (1, 30, 16)]       # 30 frames of 256 by 128 in 4000
    p = prepare(model("tf_frame_pad"), normalize_options({"input_shapes": {"signal": (3, 1000)}}))
    assert [p.graph.t(o).shape for o in p.graph.outputs] == [(3, 21)]        # ceil(1000 / 48) frames


def test_bad_shape_named():
    """At the file's own shape [1, 1] the reshape to [1, 1 // 4, 4] cannot hold the element (LiteRT fails
    there too): one error naming the op and the shape."""
    with pytest.raises(GpucError, match=r"RESHAPE \(operator #\d+\).*own input shapes \('x' \[1, 1\]\).*--input-shape"):
        prepare(model("tf_shape_reshape_len"))
    with pytest.raises(GpucError, match="changes dimension 1"):
        prepare(model("tf_stft_mel"), normalize_options({"input_shapes": {"audio": (1, 3000)}}))


@pytest.mark.parametrize("rows,cols,fl", [(1, 256, (1, 256)), (1, 200, (1, 256)), (3, 20, (4, 16)), (5, 9, (2, 7))])
def test_dft_matrices(rows, cols, fl):
    """The DFT matrices against numpy's rfft2, with the input cropped or zero-padded to fft_length."""
    x = np.random.default_rng(rows * cols).standard_normal((rows, cols))
    re, im = dft_matrices(rows, cols, *fl)
    want = np.fft.rfft2(x[:fl[0], :fl[1]], s=fl).reshape(-1)
    got = (re.astype(np.float64) @ x.reshape(-1)) + 1j * (im.astype(np.float64) @ x.reshape(-1))
    assert np.abs(got - want).max() <= 1e-5 * np.abs(want).max()


def test_rfft_pass_disabled_runs_on_cpu():
    """Without rfft_as_matmul the transform is a named CPU op (numpy's FFT)."""
    p = prepare(model("tf_stft_mel"), normalize_options({"disable_passes": ["rfft_as_matmul"]}), warn=False)
    assert sorted(n.op for n in p.graph.nodes if id(n) in p.front.cpu) == ["COMPLEX_ABS", "RFFT2D"]
