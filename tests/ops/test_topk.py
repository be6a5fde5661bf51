"""TOPK_V2 on the GPU against LiteRT: every dtype LiteRT takes, equal values (lower index first), k = 1,
k = n, k = 0, several rows and ranks, a run-time k (outputs trimmed per run), and the op on the GPU."""
from __future__ import annotations

import json

import numpy as np
import pytest

import gpuc
from gpuc.errors import GpucError, UnsupportedError
from helpers.nms import litert, topk_model


def values(shape, dtype, rng):
    """Few distinct values: many exact ties."""
    if dtype == "float32":
        x = np.floor(rng.normal(0, 2, shape)).astype(np.float32)
        x.flat[::7] = -0.0
        return x
    if dtype == "int64":
        return (rng.integers(-4, 4, shape) * (1 << 33) + rng.integers(0, 2, shape)).astype(np.int64)
    info = np.iinfo(dtype)
    return rng.integers(info.min, int(info.max) + 1, shape).astype(dtype) // 37


@pytest.mark.parametrize("dtype", ["float32", "int32", "uint8", "int8", "int64"])
@pytest.mark.parametrize("shape,k", [((9,), 1), ((3, 17), 5), ((2, 3, 8), 8), ((4, 6), 0)])
def test_topk_matches_litert(gpu, dtype, shape, k):
    rng = np.random.default_rng(len(shape) * 10 + k)
    model, x = topk_model(shape, k, dtype), values(shape, dtype, rng)
    ref, out = litert(model, [x]), gpu.run(model, [x])
    for o, r in zip(out, ref):
        assert o.dtype == r.dtype and o.shape == r.shape
        np.testing.assert_array_equal(o, r)


def test_long_rows(gpu):
    rng = np.random.default_rng(5)
    model, x = topk_model((2, 3000), 40), np.round(rng.normal(0, 3, (2, 3000)), 1).astype(np.float32)
    for o, r in zip(gpu.run(model, [x]), litert(model, [x])):
        np.testing.assert_array_equal(o, r)


@pytest.mark.parametrize("dtype", ["float32", "int32", "uint8", "int8", "int64"])
@pytest.mark.parametrize("k", [40, 5128])
def test_rows_in_blocks(gpu, dtype, k):
    """Rows past BLOCKS_FROM: blocks of 256 (the last one 8 long) sorted, then ranked by binary searches; many
    ties across blocks, and k = n (the whole row sorted)."""
    from gpuc.compiler.ops.topk import BLOCKS_FROM, sorted_block
    assert 5128 > BLOCKS_FROM and 5128 % sorted_block(5128) == 8
    rng = np.random.default_rng(k)
    model, x = topk_model((2, 5128), k, dtype), values((2, 5128), dtype, rng)
    for o, r in zip(gpu.run(model, [x]), litert(model, [x])):
        assert o.dtype == r.dtype and o.shape == r.shape
        np.testing.assert_array_equal(o, r)


def test_rows_past_the_loop_limit(gpu):
    """A vocabulary-sized row (151,936): each invocation's loops stay far under llvmpipe's 65,535 passes (the one-
    dispatch ranks were wrong on lavapipe here); a run-time k."""
    rng = np.random.default_rng(9)
    model, x = topk_model((1, 151936), 0, rt_k=True), np.round(rng.normal(0, 3, (1, 151936)), 2).astype(np.float32)
    ins = [x, np.array(50, np.int32)]
    for o, r in zip(gpu.run(model, ins), litert(model, ins)):
        assert o.shape == r.shape == (1, 50)
        np.testing.assert_array_equal(o, r)


def test_runtime_k_trims_outputs(gpu):
    rng = np.random.default_rng(2)
    model, x = topk_model((3, 9), 0, "int32", rt_k=True), values((3, 9), "int32", rng)
    with gpuc.load(gpuc.compile(model, cache=False), device=gpu.device) as m:
        for k in (1, 4, 9):
            ins = [x, np.array(k, np.int32)]
            for o, r in zip(m.run(ins), litert(model, ins)):
                assert o.shape == r.shape == (3, k)
                np.testing.assert_array_equal(o, r)
        with pytest.raises(GpucError, match=r"'values'.*'k' = 10, outside \[0, 9\]"):
            m.run([x, np.array(10, np.int32)])
        with pytest.raises(GpucError, match="keep_on_device"):
            m.run([x, np.array(2, np.int32)], keep_on_device=True)


def test_topk_runs_on_the_gpu(tmp_path):
    from click.testing import CliRunner
    from gpuc.cli import main
    p = tmp_path / "topk.tflite"
    p.write_bytes(topk_model((2, 10), 3))
    info = json.loads(CliRunner().invoke(main, ["inspect", str(p), "--json"]).output)
    assert (info["cpu_nodes"], info["host_round_trips"]) == (0, 0)


def test_k_above_the_axis_is_refused():
    with pytest.raises(UnsupportedError, match=r"TOPK_V2.*k = 7 is not in \[0, 6\]"):
        gpuc.compile(topk_model((2, 6), 7), cache=False)
