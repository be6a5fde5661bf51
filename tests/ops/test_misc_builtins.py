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


# --- float ops ------------------------------------------------------------------------------------

@pytest.mark.parametrize("case", range(4))
def test_l2_pool_2d(case):
    rng = np.random.default_rng(case)
    n, h, w, c = 1 + case % 2, int(rng.integers(3, 8)), int(rng.integers(3, 8)), int(rng.integers(1, 5))
    kh, kw, sh, sw = (int(v) for v in rng.integers(1, 4, 4))
    pad = ["SAME", "VALID"][case % 2]
    oh, ow = (-(-h // sh), -(-w // sw)) if pad == "SAME" else ((h - kh) // sh + 1, (w - kw) // sw + 1)
    act = ["NONE", "RELU6", "RELU_N1_TO_1", "RELU"][case]
    model = _one_op("L2_POOL_2D", [("x", [n, h, w, c], "float32")], [([n, oh, ow, c], "float32")], padding=pad,
                    stride_h=sh, stride_w=sw, filter_height=kh, filter_width=kw, fused_activation_function=act)
    _check(model, [_data(rng, [n, h, w, c], "float32") * 3], exact=False)


@pytest.mark.parametrize("shape,k,s,pad", [((1, 300, 240, 2), 300, 1, "VALID"), ((1, 400, 130, 1), 300, 100, "SAME")])
def test_l2_pool_tall_windows_in_chunks(shape, k, s, pad):
    """Windows past step_chunks.LOOP_BUDGET loop passes: one dispatch a chunk of window rows, the sums carried in a
    scratch tensor, the last finishing the outputs (LiteRT's order of additions). One dispatch was wrong on
    lavapipe (llvmpipe ends a shader's loops after 65,535 passes)."""
    rng = np.random.default_rng(k)
    n, h, w, c = shape
    oh, ow = (-(-h // s), -(-w // s)) if pad == "SAME" else ((h - k) // s + 1, (w - min(k, w)) // s + 1)
    model = _one_op("L2_POOL_2D", [("x", list(shape), "float32")], [([n, oh, ow, c], "float32")], padding=pad,
                    stride_h=s, stride_w=s, filter_height=k, filter_width=min(k, w))
    x = _data(rng, list(shape), "float32") * 3
    x[:, 250:] *= 10                                   # (late rows that matter)
    _check(model, [x], exact=False)


@pytest.mark.parametrize("radius,bias,alpha,beta", [(2, 1.0, 0.5, 0.75), (0, 2.0, 1.0, 1.0), (5, 0.5, 0.1, 0.5),
                                                    (1, 1e-3, 2.0, 0.3)])
def test_local_response_normalization(radius, bias, alpha, beta):
    rng = np.random.default_rng(radius)
    shape = [2, 3, 2, int(rng.integers(1, 9))]
    model = _one_op("LOCAL_RESPONSE_NORMALIZATION", [("x", shape, "float32")], [(shape, "float32")], radius=radius,
                    bias=bias, alpha=alpha, beta=beta)
    _check(model, [_data(rng, shape, "float32")], exact=False, rtol=2e-5)


@pytest.mark.parametrize("lo,hi,bits", [(-1.0, 1.0, 8), (-6.0, 0.5, 4), (0.0, 3.7, 16), (-0.3, 12.1, 2),
                                        (-127.4, 63.0, 7)])
def test_fake_quant(lo, hi, bits):
    rng = np.random.default_rng(bits)
    x = (rng.standard_normal([3, 257]) * max(abs(lo), hi)).astype(np.float32)
    x[0, :6] = [np.nan, np.inf, -np.inf, lo, hi, 0.0]
    model = _one_op("FAKE_QUANT", [("x", [3, 257], "float32")], [([3, 257], "float32")], min=lo, max=hi,
                    num_bits=bits)
    _check(model, [x])


def test_fake_quant_narrow_range_refused():
    model = _one_op("FAKE_QUANT", [("x", [4], "float32")], [([4], "float32")], min=-1.0, max=1.0, num_bits=8,
                    narrow_range=True)
    with pytest.raises(GpucError, match="FAKE_QUANT.*narrow_range"):
        gpuc.compile(model)


# --- bytes and shapes -----------------------------------------------------------------------------

@pytest.mark.parametrize("src,dst", [("float32", "int32"), ("float32", "uint8"), ("int8", "int32"),
                                     ("int64", "float32"), ("int16", "float16"), ("uint8", "int16"),
                                     ("bool", "int8")])
def test_bitcast(src, dst):
    rng = np.random.default_rng(len(src) * 7 + len(dst))
    a, b = np.dtype(src).itemsize, np.dtype(dst).itemsize
    shape = [2, 3, b // a] if a < b else [3, 5]
    out = shape[:-1] if a < b else shape + ([a // b] if a > b else [])
    model = _one_op("BITCAST", [("x", shape, src)], [(out, dst)])
    x = rng.integers(0, 256, int(np.prod(shape)) * a, dtype=np.uint8).view(src).reshape(shape)
    if src == "bool":
        x = x.view(np.uint8) % 2 == 1
    _check(model, [x])
    folded = _one_op("BITCAST", [("const", x)], [(out, dst)])
    mb_out = gpuc.load(gpuc.compile(folded)).run([])[0]
    assert mb_out.dtype == np.dtype(dst) and mb_out.tobytes() == x.tobytes()


def test_rank_folds_and_broadcast_args():
    rng = np.random.default_rng(5)
    model = _one_op("RANK", [("x", [2, 1, 3], "float32")], [([], "int32")])
    _check(model, [_data(rng, [2, 1, 3], "float32")])
    for a, b, dt in [([2, 1, 3], [4, 1], "int32"), ([0, 1], [3], "int64"), ([], [3, 2], "int32")]:
        n = max(len(a), len(b))
        const = _one_op("BROADCAST_ARGS", [("const", np.array(a, dt)), ("const", np.array(b, dt))], [([n], dt)])
        assert np.array_equal(gpuc.load(gpuc.compile(const)).run([])[0], np.broadcast_shapes(tuple(a), tuple(b)))
        runtime = _one_op("BROADCAST_ARGS", [("a", [len(a)], dt), ("b", [len(b)], dt)], [([n], dt)])
        _check(runtime, [np.array(a, dt), np.array(b, dt)])
    bad = _one_op("BROADCAST_ARGS", [("a", [1], "int32"), ("b", [2], "int32")], [([2], "int32")])
    with gpuc.load(gpuc.compile(bad)) as m, pytest.raises(GpucError, match="BROADCAST_ARGS.*do not broadcast"):
        m.run([np.array([2], "int32"), np.array([3, 3], "int32")])


@pytest.mark.parametrize("case", range(4))
def test_conv_3d_transpose(case):
    rng = np.random.default_rng(case + 40)
    n, ci, co = 1 + case % 2, int(rng.integers(1, 4)), int(rng.integers(1, 4))
    k = [int(v) for v in rng.integers(1, 4, 3)]
    st = [int(v) for v in rng.integers(1, 3, 3)]
    dl = [1, 1, 1] if case < 2 else [int(v) for v in rng.integers(1, 3, 3)]
    pad = ["SAME", "VALID"][case % 2]
    xs = [int(v) for v in rng.integers(1, 4, 3)]
    if pad == "SAME":
        outs = [v * s for v, s in zip(xs, st)]
    else:
        outs = [(v - 1) * s + (kk - 1) * d + 1 for v, s, kk, d in zip(xs, st, k, dl)]
    filt = rng.standard_normal(k + [co, ci]).astype(np.float32)
    ins = [("const", np.array([n] + outs + [co], np.int32)), ("const", filt), ("x", [n] + xs + [ci], "float32")]
    if case != 1:
        ins.append(("const", rng.standard_normal(co).astype(np.float32)))
    model = _one_op("CONV_3D_TRANSPOSE", ins, [([n] + outs + [co], "float32")], padding=pad, stride_d=st[0],
                    stride_h=st[1], stride_w=st[2], dilation_dfactor=dl[0], dilation_hfactor=dl[1],
                    dilation_wfactor=dl[2], fused_activation_function=["NONE", "RELU", "RELU6", "NONE"][case])
    _check(model, [_data(rng, [n] + xs + [ci], "float32")], exact=False, rtol=1e-5, atol=1e-5)


# --- refusals -------------------------------------------------------------------------------------

@pytest.mark.parametrize("op,ins,out,why", [
    ("HASHTABLE_SIZE", [("x", [1], "int32")], ([1], "int64"), "string"),
    ("LSH_PROJECTION", [("const", np.ones((2, 4), np.float32)), ("x", [3, 2], "float32")], ([2], "int32"),
     "neither SPARSE"),                 # (no options: type 0, which LiteRT's Prepare refuses too)
])
def test_refused_ops_name_the_op_and_why(op, ins, out, why):
    model = _one_op(op, ins, [out])
    with pytest.raises(GpucError, match=f"{op}.*{why}"):
        gpuc.compile(model)
