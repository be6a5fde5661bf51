"""Scatter, segment and sparse builtins on the GPU against LiteRT (issue 28): SEGMENT_SUM,
UNSORTED_SEGMENT_SUM / MAX / MIN / PROD (compiler/ops/segment.py), with random data, duplicate and
empty segments, negative ids (skipped), out-of-range ids (the run fails as LiteRT's invoke does) and
SEGMENT_SUM's per-run output length."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("vulkan")

import gpuc  # noqa: E402
from gpuc.errors import GpucError, RunError  # noqa: E402
from helpers.builder import ModelBuilder  # noqa: E402
from helpers.litert import run_litert  # noqa: E402

UNSORTED = ["UNSORTED_SEGMENT_SUM", "UNSORTED_SEGMENT_MAX", "UNSORTED_SEGMENT_MIN", "UNSORTED_SEGMENT_PROD"]


def _data(rng, shape, dtype):
    if dtype == "int32":
        return rng.integers(-9, 9, shape).astype(dtype)
    return (rng.standard_normal(shape) * 3).astype(dtype)


def _segment_model(op, dshape, ishape, dtype, nseg):
    mb = ModelBuilder()
    x, s = mb.input("x", dshape, dtype), mb.input("s", ishape, "int32")
    ins = [x, s] + ([mb.const("n", np.array([nseg], np.int32))] if op != "SEGMENT_SUM" else [])
    y = mb.tensor("y", [nseg] + list(dshape[len(ishape):]), dtype)
    mb.op(op, ins, [y])
    mb.output(y)
    return mb.finish()


def _same(out, ref):
    assert out.shape == ref.shape and out.dtype == ref.dtype
    assert np.array_equal(out, ref, equal_nan=out.dtype.kind == "f"), (out, ref)


@pytest.mark.parametrize("op", UNSORTED)
def test_unsorted_segment_against_litert(op):
    rng = np.random.default_rng(len(op))
    for dshape, ishape, nseg, dtype in (([12, 3], [12], 6, "float32"), ([4, 5, 2], [4, 5], 7, "int32")):
        model = _segment_model(op, dshape, ishape, dtype, nseg)
        with gpuc.load(gpuc.compile(model)) as m:
            for trial in range(3):       # random ids (duplicates, empty segments, negative ids skipped)
                x = _data(rng, dshape, dtype)
                s = rng.integers(-2 if trial else 0, nseg - 1 if trial < 2 else nseg, ishape).astype(np.int32)
                _same(m.run([x, s])[0], run_litert(model, [x, s])[0])
            bad = np.zeros(ishape, np.int32)
            bad.reshape(-1)[-1] = nseg                   # LiteRT: max id < num_segments, else the invoke fails
            with pytest.raises(RuntimeError):
                run_litert(model, [x, bad])
            with pytest.raises(RunError, match=f"{op}.*'s'.*index {nseg}"):
                m.run([x, bad])


def test_segment_sum_per_run_length():
    rng = np.random.default_rng(3)
    for dtype in ("float32", "int32"):
        model = _segment_model("SEGMENT_SUM", [9, 2], [9], dtype, 9)
        with gpuc.load(gpuc.compile(model)) as m:
            for trial in range(4):       # sorted ids from 0, steps of 0 / 1: 1 .. 9 segments
                steps = rng.integers(0, 2, 8) if trial < 3 else np.ones(8, np.int64) * (trial == 3)
                s = np.concatenate([[0], np.cumsum(steps)]).astype(np.int32)
                x = _data(rng, [9, 2], dtype)
                _same(m.run([x, s])[0], run_litert(model, [x, s])[0])
            for bad in ([1] * 9, [0, 0, 2, 2, 2, 3, 3, 3, 3], [0, 1, 0, 0, 0, 0, 0, 0, 0]):
                bad = np.array(bad, np.int32)
                with pytest.raises(RuntimeError):
                    run_litert(model, [x, bad])
                with pytest.raises(RunError, match="SEGMENT_SUM"):
                    m.run([x, bad])


def test_segment_float_nan_and_identities():
    """NaN inputs: std::max / min keep the accumulator (NaN never wins), sums and products carry it."""
    x = np.array([[np.nan, 1.0], [2.0, np.nan], [-np.inf, 5.0]], np.float32)
    s = np.array([1, 1, 3], np.int32)
    for op in UNSORTED:
        model = _segment_model(op, [3, 2], [3], "float32", 5)
        with gpuc.load(gpuc.compile(model)) as m:
            _same(m.run([x, s])[0], run_litert(model, [x, s])[0])


def test_segment_refusals():
    mb = ModelBuilder()
    x, s, n = mb.input("x", [4], "float32"), mb.input("s", [4], "int32"), mb.input("n", [1], "int32")
    y = mb.tensor("y", [4], "float32")
    mb.op("UNSORTED_SEGMENT_SUM", [x, s, n], [y])
    mb.output(y)
    with pytest.raises(GpucError, match="UNSORTED_SEGMENT_SUM.*num_segments 'n' is computed at run time"):
        gpuc.compile(mb.finish())


def _scatter_model(ishape, ushape, shape, dtype):
    mb = ModelBuilder()
    i, u = mb.input("i", ishape, "int32"), mb.input("u", ushape, dtype)
    y = mb.tensor("y", shape, dtype)
    mb.op("SCATTER_ND", [i, u, mb.const("shape", np.array(shape, np.int32))], [y])
    mb.output(y)
    return mb.finish()


@pytest.mark.parametrize("case", range(3))
def test_scatter_nd_against_litert(case):
    """Duplicates accumulate in index order: float sums bit-exact with LiteRT's loop."""
    ishape, ushape, shape, dtype = [([40, 1], [40], [6], "float32"), ([5, 3, 2], [5, 3, 4], [3, 2, 4], "float32"),
                                    ([7, 2], [7], [3, 3], "int32")][case]
    rng = np.random.default_rng(case)
    model = _scatter_model(ishape, ushape, shape, dtype)
    k = ishape[-1]
    with gpuc.load(gpuc.compile(model)) as m:
        for _ in range(3):
            i = np.stack([rng.integers(0, shape[d], ishape[:-1]) for d in range(k)], -1).astype(np.int32)
            u = _data(rng, ushape, dtype) * (np.float32(1e3) ** rng.integers(-1, 2, ushape) if dtype == "float32" else 1)
            u = u.astype(dtype)
            _same(m.run([i, u])[0], run_litert(model, [i, u])[0])
        for v in (-1, shape[k - 1]):           # out of range (LiteRT fails the invoke)
            bad = i.copy()
            bad.reshape(-1, k)[2, k - 1] = v
            with pytest.raises(RuntimeError):
                run_litert(model, [bad, u])
            with pytest.raises(RunError, match=f"SCATTER_ND.*'i'.*index {v}"):
                m.run([bad, u])


def _s2d_model(ishape, shape, vshape, dtype, idt="int32"):
    mb = ModelBuilder()
    i, v, d = mb.input("i", ishape, idt), mb.input("v", vshape, dtype), mb.input("d", [], dtype)
    y = mb.tensor("y", shape, dtype)
    mb.op("SPARSE_TO_DENSE", [i, mb.const("shape", np.array(shape, idt)), v, d], [y])
    mb.output(y)
    return mb.finish()


@pytest.mark.parametrize("case", range(3))
def test_sparse_to_dense_against_litert(case):
    """The last of duplicate indices wins; 2-D, 1-D and int64 indices."""
    ishape, shape, vshape, dtype, idt = [([6, 2], [3, 4], [6], "float32", "int32"), ([5], [7], [5], "int32", "int32"),
                                         ([4, 3], [2, 3, 2], [4], "float32", "int64")][case]
    rng = np.random.default_rng(10 + case)
    model = _s2d_model(ishape, shape, vshape, dtype, idt)
    k = ishape[1] if len(ishape) == 2 else 1
    with gpuc.load(gpuc.compile(model)) as m:
        for _ in range(3):
            i = np.stack([rng.integers(0, shape[d], ishape[0]) for d in range(k)], -1).reshape(ishape).astype(idt)
            v, d = _data(rng, vshape, dtype), _data(rng, [], dtype)
            _same(m.run([i, v, d])[0], run_litert(model, [i, v, d])[0])
        bad = i.copy()
        bad.reshape(-1)[-1] = -3
        with pytest.raises(RuntimeError):
            run_litert(model, [bad, v, d])
        with pytest.raises(RunError, match="SPARSE_TO_DENSE.*index -3"):
            m.run([bad, v, d])


def _bucketize_model(shape, dtype, bounds):
    mb = ModelBuilder()
    x = mb.input("x", shape, dtype)
    y = mb.tensor("y", shape, "int32")
    mb.op("BUCKETIZE", [x], [y], boundaries=[float(b) for b in bounds])
    mb.output(y)
    return mb.finish()


@pytest.mark.parametrize("dtype", ["float32", "int32", "int64", "float64"])
def test_bucketize_against_litert(dtype):
    """float32 / int32 on the GPU, int64 / float64 on the CPU; duplicates, NaN, empty boundaries."""
    rng = np.random.default_rng(5)
    for bounds in ([-2.5, -1.0, 0.0, 0.0, 1.5, 3.0, 1e9], []):
        model = _bucketize_model([5, 7], dtype, bounds)
        x = (rng.standard_normal((5, 7)) * 3)
        x = np.round(x) if dtype[:3] == "int" else x
        x = x.astype(dtype)
        if dtype[:5] == "float":
            x[0, :3] = [np.nan, np.inf, -np.inf]
        with gpuc.load(gpuc.compile(model)) as m:
            _same(m.run([x])[0], run_litert(model, [x])[0])
    with pytest.raises(GpucError, match="BUCKETIZE.*not sorted"):
        gpuc.compile(_bucketize_model([3], "float32", [1.0, 0.0]))


@pytest.mark.parametrize("op", ["UNSORTED_SEGMENT_SUM", "UNSORTED_SEGMENT_MAX", "SEGMENT_SUM"])
def test_many_ids_in_chunks(op):
    """70,000 ids: one dispatch a chunk of ids (step_chunks), each resuming from the output the one before wrote,
    bit for bit LiteRT's fold; a bad id in the last chunk still fails the run. One dispatch was wrong on lavapipe
    past ~32,768 ids (llvmpipe ends a shader's loops after 65,535 passes)."""
    rng = np.random.default_rng(len(op))
    n, nseg = 70000, 5
    model = _segment_model(op, [n], [n], "float32", nseg if op != "SEGMENT_SUM" else n)
    x = _data(rng, [n], "float32")
    s = np.sort(rng.integers(0, nseg, n)).astype(np.int32) if op == "SEGMENT_SUM" else \
        rng.integers(-1, nseg, n).astype(np.int32)
    s[0] = 0
    with gpuc.load(gpuc.compile(model)) as m:
        _same(m.run([x, s])[0], run_litert(model, [x, s])[0])
        bad = s.copy()
        bad[-1] = n + 7
        with pytest.raises(RunError, match=f"{op}.*'s'"):
            m.run([x, bad])


@pytest.mark.parametrize("op", ["SCATTER_ND", "SPARSE_TO_DENSE"])
def test_many_index_rows_in_chunks(op):
    """70,000 index rows into 4 outputs: duplicates summed in row order (SCATTER_ND), the last row wins
    (SPARSE_TO_DENSE), across chunks of rows."""
    rng = np.random.default_rng(4)
    n = 70000
    i = rng.integers(0, 4, (n, 1)).astype(np.int32)
    v = rng.integers(-3, 4, n).astype(np.float32) * np.float32(1.1)
    if op == "SCATTER_ND":
        model, feeds = _scatter_model([n, 1], [n], [4], "float32"), [i, v]
    else:
        model, feeds = _s2d_model([n], [4], [n], "float32"), [i[:, 0], v, np.array(0.5, np.float32)]
    with gpuc.load(gpuc.compile(model)) as m:
        _same(m.run(feeds)[0], run_litert(model, feeds)[0])


def test_chunks_share_their_kernels_check():
    """The check of a chunked fold covers every chunk (status.split): each chunk gets the status row's length."""
    from gpuc.compiler import status
    from gpuc.compiler.codegen.kernel import Kernel
    from gpuc.compiler.ir import Graph
    g = Graph("g", [], [], [], [])
    k = Kernel("segment_reduce", [("out_", g.add_tensor("y", [4], "float32"))], 4, {})
    g.checks.append(status.Check("SEGMENT_SUM", 0, "s", [4], 0, [k]))
    chunks = [Kernel("segment_reduce", list(k.bindings), 4, {"CHUNKED": 1}) for _ in range(3)]
    assert status.split(g, k, chunks) is chunks and g.checks[0].kernels == chunks
    g.status = g.add_tensor(status.STATUS_NAME, [1, status.WORDS], "uint32")
    status.finish(g, list(chunks))
    assert all(c.defines["STATUS_ROW"] == status.WORDS for c in chunks)
