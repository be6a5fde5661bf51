"""BATCH_MATMUL (compiler/ops/batch_matmul.py) against LiteRT: adj_x / adj_y, broadcast batch dims of
different ranks (2..5), runtime and constant operands (a constant RHS without batch takes the tiled
gemm path), tile edges."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("vulkan")

import gpuc  # noqa: E402
from helpers.op_support import gpu_reason  # noqa: E402
from helpers.ops import Const, check, one_op  # noqa: E402


def _mm(a_shape, b_shape, adj_x=False, adj_y=False, const_a=False, const_b=False, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.uniform(-1, 1, a_shape).astype(np.float32)
    b = rng.uniform(-1, 1, b_shape).astype(np.float32)
    m = a_shape[-1] if adj_x else a_shape[-2]
    n = b_shape[-2] if adj_y else b_shape[-1]
    batch = list(np.broadcast_shapes(tuple(a_shape[:-2]), tuple(b_shape[:-2])))
    return one_op("BATCH_MATMUL", [Const(a) if const_a else a, Const(b) if const_b else b], "float32",
                  out_shape=batch + [m, n], adj_x=adj_x, adj_y=adj_y)


@pytest.mark.parametrize("adj_x", [False, True])
@pytest.mark.parametrize("adj_y", [False, True])
@pytest.mark.parametrize("const_b", [False, True])
def test_batch_matmul_adjoints(gpu, adj_x, adj_y, const_b):
    a_shape = [2, 5, 3] if adj_x else [2, 3, 5]
    b_shape = [2, 4, 5] if adj_y else [2, 5, 4]
    check(gpu, *_mm(a_shape, b_shape, adj_x, adj_y, const_b=const_b))


@pytest.mark.parametrize("a_shape,b_shape", [
    ([3, 4], [4, 5]),                       # rank 2
    ([2, 1, 3, 4], [3, 4, 5]),              # broadcast both ways, different ranks
    ([3, 4], [2, 4, 5]),                    # rank-2 LHS against a batch
    ([2, 3, 4], [4, 6]),                    # rank-2 RHS
    ([1, 2, 1, 3, 4], [2, 1, 2, 4, 3]),     # rank 5
    ([1, 70, 33], [1, 33, 65]),             # several tiles, ragged edges
    ([4, 1, 9], [4, 9, 1]),                 # M = N = 1
    ([2, 1, 40], [2, 40, 300]),             # matrix-vector: a wide tile along N
    ([3, 2, 17], [1, 17, 130]),
])
def test_batch_matmul_broadcast(gpu, a_shape, b_shape):
    check(gpu, *_mm(a_shape, b_shape, seed=len(a_shape)))


@pytest.mark.parametrize("a_shape,b_shape,adj_y", [([2, 3, 6], [6, 5], False), ([2, 2, 3, 6], [1, 5, 6], True),
                                                   ([70, 40], [40, 130], False), ([3, 6], [2, 6, 5], False)])
def test_batch_matmul_constant_rhs(gpu, a_shape, b_shape, adj_y):
    check(gpu, *_mm(a_shape, b_shape, adj_y=adj_y, const_b=True, seed=3))


def test_batch_matmul_constant_lhs(gpu):
    check(gpu, *_mm([2, 3, 4], [2, 4, 5], adj_x=False, const_a=True, seed=4))
    check(gpu, *_mm([4, 3], [2, 4, 5], adj_x=True, const_a=True, seed=5))


def test_batch_matmul_gemm_path_for_constant_rhs():
    from gpuc.runtime.bundle import read_bundle
    model, _ = _mm([2, 3, 6], [6, 5], const_b=True)
    assert [s.name for s in read_bundle(gpuc.compile(model)).shaders] == ["gemm"]
    model, _ = _mm([2, 3, 6], [2, 6, 5], const_b=True)
    assert [s.name for s in read_bundle(gpuc.compile(model)).shaders] == ["batch_matmul"]


def test_batch_matmul_rank6_rejected():
    model, _ = _mm([1, 1, 1, 1, 2, 3], [1, 1, 1, 1, 3, 2])
    assert "rank" in (gpu_reason(model) or "")


@pytest.mark.parametrize("a_shape,b_shape,adj_x,precision", [([1, 70000], [70000, 3], False, "fp32"),
                                                             ([2, 70000, 2], [2, 70000, 5], True, "fp32"),
                                                             ([1, 70000], [70000, 3], False, "fp16")])
def test_deep_k_in_chunks(a_shape, b_shape, adj_x, precision):
    """K past what a small tile's invocations may loop over in one dispatch (batch_matmul.in_k_chunks): one dispatch
    a chunk of K, the partial sums kept in a float32 tensor (also under fp16), the last applying the epilogue. One
    dispatch was wrong on lavapipe (llvmpipe ends a shader's loops after 65,535 passes)."""
    from gpuc.runtime.bundle import read_bundle
    from helpers.litert import run_litert
    model, feeds = _mm(a_shape, b_shape, adj_x=adj_x, seed=9)
    data = gpuc.compile(model, cache=False, precision=precision)
    assert sum("steps" in d.label for d in read_bundle(data).dispatches) >= 2
    ref = run_litert(model, feeds)[0]
    with gpuc.load(data) as m:
        out = m.run(feeds)[0]
    assert np.abs(out - ref).max() <= (1e-4 if precision == "fp32" else 1e-2) * np.abs(ref).max()
