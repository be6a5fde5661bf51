"""Issue 28's smaller builtins against LiteRT, randomized over shapes, dtypes and attributes:
REVERSE_SEQUENCE, MATRIX_DIAG, MATRIX_SET_DIAG, DILATE (shaders/index_map.comp), L2_POOL_2D,
LOCAL_RESPONSE_NORMALIZATION, FAKE_QUANT, BITCAST, RANK, BROADCAST_ARGS, CONV_3D_TRANSPOSE,
REDUCE_WINDOW, and the refusals (strings, hashtables) with their reasons."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("vulkan")

import gpuc  # noqa: E402
from gpuc.errors import GpucError  # noqa: E402
from helpers.builder import ModelBuilder  # noqa: E402
from helpers.litert import run_litert  # noqa: E402


def _data(rng, shape, dtype):
    if dtype == "bool":
        return rng.integers(0, 2, shape).astype(bool)
    if np.dtype(dtype).kind in "iu":
        info = np.iinfo(dtype)
        return rng.integers(max(info.min, -1000), min(info.max, 1000), shape, endpoint=True).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def _check(model, inputs, exact=True, rtol=1e-5, atol=1e-6):
    ref = run_litert(model, inputs)
    with gpuc.load(gpuc.compile(model)) as m:
        out = m.run(inputs)
    for a, b in zip(out, ref):
        assert a.dtype == b.dtype and a.shape == b.shape, (a.dtype, b.dtype, a.shape, b.shape)
        if exact:
            assert np.array_equal(a, b, equal_nan=a.dtype.kind == "f"), (a, b)
        else:
            np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)
    return out


def _one_op(op, ins, outs, **attrs):
    """ins: [(name, shape, dtype) or ("const", array)]; outs: [(shape, dtype)]."""
    mb = ModelBuilder()
    ids = [mb.const(f"c{k}", v[1]) if v[0] == "const" else mb.input(*v) for k, v in enumerate(ins)]
    oids = [mb.tensor(f"y{k}", s, d) for k, (s, d) in enumerate(outs)]
    mb.op(op, ids, oids, **attrs)
    for o in oids:
        mb.output(o)
    return mb.finish()


# --- data movement through index_map ---------------------------------------------------------------

@pytest.mark.parametrize("dtype,ldt", [("float32", "int32"), ("int64", "int64"), ("uint8", "int32"),
                                       ("int16", "int64"), ("int32", "int32")])
def test_reverse_sequence(dtype, ldt):
    rng = np.random.default_rng(len(dtype) + len(ldt))
    shape = [int(v) for v in rng.integers(1, 6, 4)]
    seq, bat = (int(v) for v in rng.choice(4, 2, replace=False))
    model = _one_op("REVERSE_SEQUENCE", [("x", shape, dtype), ("l", [shape[bat]], ldt)], [(shape, dtype)],
                    seq_dim=seq, batch_dim=bat)
    for trial in range(2):
        lens = rng.integers(-1, shape[seq] + 1, shape[bat]).astype(ldt)
        _check(model, [_data(rng, shape, dtype), lens])


def test_reverse_sequence_length_past_the_axis_fails_the_run():
    model = _one_op("REVERSE_SEQUENCE", [("x", [3, 4], "float32"), ("l", [3], "int32")], [([3, 4], "float32")],
                    seq_dim=1, batch_dim=0)
    with gpuc.load(gpuc.compile(model)) as m, pytest.raises(GpucError, match="REVERSE_SEQUENCE.*'l'.*index 5"):
        m.run([np.zeros((3, 4), np.float32), np.array([5, 1, 1], np.int32)])


@pytest.mark.parametrize("dtype", ["float32", "int32", "int64", "int8", "uint8", "int16"])
def test_matrix_diag_and_set_diag(dtype):
    rng = np.random.default_rng(len(dtype))
    b, r, c = [int(v) for v in rng.integers(1, 5, 3)]
    m1 = _one_op("MATRIX_DIAG", [("x", [b, c], dtype)], [([b, c, c], dtype)])
    _check(m1, [_data(rng, [b, c], dtype)])
    m2 = _one_op("MATRIX_SET_DIAG", [("x", [2, b, r, c], dtype), ("d", [2, b, min(r, c)], dtype)],
                 [([2, b, r, c], dtype)])
    _check(m2, [_data(rng, [2, b, r, c], dtype), _data(rng, [2, b, min(r, c)], dtype)])


def test_matrix_set_diag_rank2_and_bool_refused():
    rng = np.random.default_rng(3)
    m2 = _one_op("MATRIX_SET_DIAG", [("x", [5, 3], "float32"), ("d", [3], "float32")], [([5, 3], "float32")])
    _check(m2, [_data(rng, [5, 3], "float32"), _data(rng, [3], "float32")])
    bad = _one_op("MATRIX_DIAG", [("x", [3], "bool")], [([3, 3], "bool")])
    with pytest.raises(GpucError, match="MATRIX_DIAG.*bool"):
        gpuc.compile(bad)


@pytest.mark.parametrize("dtype", ["float32", "int64", "int8", "bool", "float16", "int16"])
def test_dilate(dtype):
    rng = np.random.default_rng(len(dtype) + 10)
    shape = [int(v) for v in rng.integers(1, 4, 3)]
    dl = rng.integers(1, 4, 3).astype(np.int32)
    out = [(s - 1) * d + 1 for s, d in zip(shape, dl)]
    pv = _data(rng, [], dtype)
    const = _one_op("DILATE", [("x", shape, dtype), ("const", dl), ("const", np.asarray(pv))], [(out, dtype)])
    _check(const, [_data(rng, shape, dtype)])
    runtime = _one_op("DILATE", [("x", shape, dtype), ("const", dl), ("p", [], dtype)], [(out, dtype)])
    _check(runtime, [_data(rng, shape, dtype), np.asarray(pv)])
