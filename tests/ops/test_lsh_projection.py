"""LSH_PROJECTION (runtime/cpu_lsh.py, compiler/ops/lsh_projection.py) against LiteRT, randomized: SPARSE
and DENSE, with and without weights, hash functions of 1..32 bits, input dtypes float32 / int32 / int8 /
uint8 / int64 / int16 / bool / float16 and row sizes that take every farmhash Fingerprint64 length path
(4..16, 17..32, 33..64 and >64 bytes per key); through gpuc (a quantized int8 input, a constant-folded
projection) and the refusals LiteRT's Prepare makes."""
from __future__ import annotations

import numpy as np
import pytest

import gpuc
from gpuc.errors import GpucError
from gpuc.runtime import cpu_lsh
from helpers.builder import ModelBuilder
from helpers.litert import run_litert

DTYPES = ("float32", "int32", "int8", "uint8", "int64", "int16", "bool", "float16")
SPARSE, DENSE = 1, 2


def _model(hv, shape, dtype, typ, weights, quant=None):
    mb = ModelBuilder()
    ins = [mb.const("hash", hv), mb.input("x", shape, dtype, quant=quant)]
    if weights:
        ins.append(mb.input("w", [shape[0]], "float32"))
    y = mb.tensor("y", [hv.shape[0] * (hv.shape[1] if typ == DENSE else 1)], "int32")
    mb.op("LSH_PROJECTION", ins, [y], type=typ)
    mb.output(y)
    return mb.finish()


def _data(rng, shape, dtype):
    if dtype == "bool":
        return rng.integers(0, 2, shape).astype(bool)
    if np.dtype(dtype).kind == "f":
        return rng.standard_normal(shape).astype(dtype)
    return rng.integers(-100, 100, shape).astype(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_kernel_matches_litert(dtype):
    """The numpy kernel on 12 random configs per dtype (no compile: LiteRT is the only other party)."""
    rng = np.random.default_rng(sum(map(ord, dtype)))
    item = np.dtype(dtype).itemsize
    for k in range(12):
        inner = [0, 1, 3, 7, 20, 70 // item][k % 6]        # key = 4 + row bytes: every Fingerprint64 path
        shape = [int(rng.integers(1, 6)), inner] if k % 4 else [int(rng.integers(1, 9))]
        bits = [1, 5, 16, 31, 32, int(rng.integers(1, 33))][k % 6]
        hv = rng.standard_normal((int(rng.integers(1, 5)), bits)).astype(np.float32)
        typ, weights = (SPARSE, DENSE)[k % 2], k % 3 != 0
        feeds = [_data(rng, shape, dtype)] + ([rng.standard_normal(shape[0]).astype(np.float32)] if weights else [])
        ref = run_litert(_model(hv, shape, dtype, typ, weights), feeds)[0]
        got = cpu_lsh.lsh_projection({"type": typ}, [hv] + feeds, None)[0]
        assert got.dtype == np.int32
        np.testing.assert_array_equal(got, ref, err_msg=f"{dtype} {shape} hash {list(hv.shape)} type {typ}")


def test_fingerprint64_lengths_are_distinct():
    """The hash itself on every length 0..200: a key's fingerprint changes with each byte (a hash path that
    ignored a byte would fail), and equal keys hash equal."""
    rng = np.random.default_rng(3)
    for n in range(0, 200):
        keys = np.repeat(rng.integers(0, 256, (1, n), dtype=np.uint8), n + 1, axis=0)
        for i in range(n):
            keys[i + 1, i] ^= 1
        h = cpu_lsh.fingerprint64(keys)
        assert len(set(h.tolist())) == n + 1, f"length {n}"
        assert cpu_lsh.fingerprint64(keys[:1])[0] == h[0]


@pytest.mark.parametrize("typ,weights", [(SPARSE, True), (DENSE, False)])
def test_through_gpuc(typ, weights):
    rng = np.random.default_rng(typ)
    hv = rng.standard_normal((3, 9)).astype(np.float32)
    model = _model(hv, [5, 6], "int8", typ, weights, quant=(0.1, 3))
    feeds = [rng.integers(-128, 128, (5, 6)).astype(np.int8)]
    feeds += [rng.standard_normal(5).astype(np.float32)] if weights else []
    ref = run_litert(model, feeds)[0]
    with gpuc.load(gpuc.compile(model)) as m:
        np.testing.assert_array_equal(m.run(feeds)[0], ref)


def test_constant_inputs_fold():
    """Every input constant: the compiler folds the projection with the same kernel (no CPU node)."""
    rng = np.random.default_rng(9)
    hv = rng.standard_normal((4, 6)).astype(np.float32)
    mb = ModelBuilder()
    y = mb.tensor("y", [4], "int32")
    mb.op("LSH_PROJECTION", [mb.const("hash", hv), mb.const("x", rng.standard_normal((3, 2)).astype(np.float32))],
          [y], type=SPARSE)
    a = mb.input("a", [4], "int32")
    z = mb.tensor("z", [4], "int32")
    mb.op("ADD", [y, a], [z])
    mb.output(z)
    model = mb.finish()
    feeds = [np.arange(4, dtype=np.int32)]
    ref = run_litert(model, feeds)[0]
    with gpuc.load(gpuc.compile(model)) as m:
        assert m.bundle.stats.get("cpu_nodes", 0) == 0
        np.testing.assert_array_equal(m.run(feeds)[0], ref)


@pytest.mark.parametrize("what", ["bits", "type", "weights", "hash_dtype"])
def test_refusals(what):
    hv = np.zeros((2, 33 if what == "bits" else 4), np.float32)
    mb = ModelBuilder()
    h = mb.const("hash", hv.astype(np.int32) if what == "hash_dtype" else hv)
    ins = [h, mb.input("x", [3, 2], "float32")]
    if what == "weights":
        ins.append(mb.input("w", [2], "float32"))
    typ = 0 if what == "type" else SPARSE
    y = mb.tensor("y", [2], "int32")
    mb.op("LSH_PROJECTION", ins, [y], type=typ)
    mb.output(y)
    msg = {"bits": "at most 32 bits", "type": "neither SPARSE", "weights": "one per input row",
           "hash_dtype": "float32"}[what]
    with pytest.raises(GpucError, match=msg):
        gpuc.compile(mb.finish())
