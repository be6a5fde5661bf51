"""EMBEDDING_LOOKUP of a constant int8 table (symmetric, per row or per tensor) into float32, LiteRT's hybrid
kernel (out = q * scale[row]): the bundle keeps the table as int8 (packed rows, ops/gemm_q8.py packed_rows),
the gather kernel dequantizes the rows it reads (ops/gather.py, shaders/gather.comp Q8), bit-exact with
LiteRT; a table tied to an int8 FULLY_CONNECTED's weights is stored once."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("vulkan")

import gpuc  # noqa: E402
from gpuc.runtime.bundle import WEIGHTS, read_bundle  # noqa: E402
from helpers.builder import ModelBuilder  # noqa: E402
from helpers.litert import run_litert  # noqa: E402

RNG = np.random.default_rng(2929)


def table(rows, cols, per_row=True):
    q = RNG.integers(-127, 128, (rows,) + tuple(cols)).astype(np.int8)
    if per_row:
        s = RNG.uniform(1e-3, 0.1, rows).astype(np.float32)
        return q, (s, np.zeros(rows, np.int64), 0)
    return q, (np.float32(0.0371), 0)


def lookup_model(rows, cols, n_ids, *, per_row=True, const_ids=None, tied_fc=False):
    q, quant = table(rows, cols, per_row)
    mb = ModelBuilder()
    ids = mb.const("ids", np.asarray(const_ids, np.int32)) if const_ids is not None \
        else mb.input("ids", [n_ids], "int32")
    w = mb.const("table", q, quant=quant)
    e = mb.tensor("e", [n_ids] + list(cols))
    mb.op("EMBEDDING_LOOKUP", [ids, w], [e])
    mb.output(e)
    if tied_fc:                      # the LM head reads the same int8 table (tied embeddings)
        x, y = mb.input("h", [1, cols[0]]), mb.tensor("logits", [1, rows])
        mb.op("FULLY_CONNECTED", [x, w, -1], [y])
        mb.output(y)
    return mb.finish(), q


def weights_bytes(bundle) -> int:
    return sum(t.nbytes for t in read_bundle(bundle).tensors if t.memory == WEIGHTS)


@pytest.mark.parametrize("rows,cols,per_row", [(37, [24], True), (50, [7], True), (9, [3, 5], True),
                                               (16, [40], False)])
def test_int8_table_matches_litert_bit_exact(gpu, rows, cols, per_row):
    n = 11
    model, q = lookup_model(rows, cols, n, per_row=per_row)
    ids = RNG.integers(0, rows, n).astype(np.int32)
    ids[:2] = [0, rows - 1]
    bundle = gpuc.compile(model)
    with gpuc.load(bundle, device=gpu.device) as mod:
        (out,) = mod.run([ids])
    (ref,) = run_litert(model, [ids])
    assert out.dtype == np.float32 and ref.dtype == np.float32
    np.testing.assert_array_equal(out.view(np.uint32), ref.view(np.uint32))
    # the table is stored as int8 (rows padded to 16 bytes), not as a float32 copy 4x its size
    padded = rows * -(-int(np.prod(cols)) // 16) * 16
    assert weights_bytes(bundle) < padded + rows * 4 + 1024


def test_constant_ids(gpu):
    model, _ = lookup_model(20, [32], 4, const_ids=[3, 19, 0, 3])
    bundle = gpuc.compile(model)
    with gpuc.load(bundle, device=gpu.device) as mod:
        (out,) = mod.run([])
    (ref,) = run_litert(model, [])
    np.testing.assert_array_equal(out.view(np.uint32), ref.view(np.uint32))


def test_out_of_range_id_fails_the_run(gpu):
    model, _ = lookup_model(20, [32], 3)
    with gpuc.load(gpuc.compile(model), device=gpu.device) as mod:
        with pytest.raises(gpuc.errors.GpucError, match="EMBEDDING_LOOKUP"):
            mod.run([np.array([1, 20, 2], np.int32)])


def test_tied_lm_head_stores_the_table_once(gpu):
    rows, k = 300, 64
    model, q = lookup_model(rows, [k], 5, tied_fc=True)
    bundle = gpuc.compile(model)
    assert weights_bytes(bundle) < rows * k + rows * 8 + 4096       # one int8 copy (+ scales and row sums)
    ids = np.array([0, 299, 7, 7, 150], np.int32)
    h = RNG.normal(0, 1, (1, k)).astype(np.float32)
    with gpuc.load(bundle, device=gpu.device) as mod:
        out = mod.run([ids, h])
    ref = run_litert(model, [ids, h])
    np.testing.assert_array_equal(out[0].view(np.uint32), ref[0].view(np.uint32))
