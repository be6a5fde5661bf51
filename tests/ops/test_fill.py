"""FILL / ZEROS_LIKE on the GPU (compiler/ops/fill.py) and the compile-time folds of
constant FILL / ZEROS_LIKE, RANGE and DENSIFY (sparse weights) in compiler/passes/fold.py,
against LiteRT."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("vulkan")

import gpuc  # noqa: E402
from helpers.builder import ModelBuilder  # noqa: E402
from helpers.litert import run_litert  # noqa: E402
from helpers.op_support import gpu_reason  # noqa: E402
from helpers.ops import Const, assert_matches, check, one_op  # noqa: E402


def _dispatch_ops(model: bytes) -> list[str]:
    from gpuc.runtime.bundle import read_bundle
    return [d.label for d in read_bundle(gpuc.compile(model)).dispatches]


def _fill_runtime(dims, dtype, value):
    """FILL with constant dims and a value computed at run time (LiteRT's Python API does not take 0-d
    inputs, so the scalar comes from a [1] input through RESHAPE, for bool then GREATER than 0)."""
    mb = ModelBuilder()
    src = "float32" if dtype == "bool" else dtype
    v = mb.input("v", [1], src)
    s = mb.tensor("s", [], src)
    mb.op("RESHAPE", [v, mb.const("shape", np.zeros(0, np.int32))], [s])
    if dtype == "bool":
        b = mb.tensor("b", [], "bool")
        mb.op("GREATER", [s, mb.const("zero", np.array(0.0, np.float32))], [b])
        s = b
    y = mb.tensor("y", dims, dtype)
    mb.op("FILL", [mb.const("dims", np.array(dims, np.int32)), s], [y])
    mb.output(y)
    return mb.finish(), [np.array([value], src)]


@pytest.mark.parametrize("dtype,value", [("float32", -2.5), ("int32", 7), ("bool", 1.0), ("bool", -1.0)])
@pytest.mark.parametrize("dims", [[3], [2, 3, 5], [1, 4, 1, 3]])
def test_fill_runtime_value(gpu, dims, dtype, value):
    """Constant dims, the value known at run time only: one `fill` dispatch."""
    model, feeds = _fill_runtime(dims, dtype, value)
    assert any(label.startswith("FILL") for label in _dispatch_ops(model))
    check(gpu, model, feeds)


@pytest.mark.parametrize("value", [-5 * 2**33 + 7, 12])
def test_fill_runtime_int64(gpu, value):
    """An int64 value fed at run time (a 0-d input: gpuc takes it, LiteRT's Python API does not, so the
    reference is LiteRT's FILL of the same value as a constant)."""
    model, feeds = one_op("FILL", [Const(np.array([2, 3], np.int32)), np.array(value, np.int64)], "int64",
                          out_shape=[2, 3])
    assert any(label.startswith("FILL") for label in _dispatch_ops(model))
    ref_model, _ = one_op("FILL", [Const(np.array([2, 3], np.int32)), Const(np.array(value, np.int64))], "int64",
                          out_shape=[2, 3])
    assert_matches(gpu.run(model, feeds), run_litert(ref_model, []))


def _run_unfolded(gpu, model: bytes, feeds):
    """Compile with constant folding off (so constant FILL / ZEROS_LIKE run as GPU kernels) and run."""
    bundle = gpuc.compile(model, disable_passes=["fold_constants"])
    m = gpuc.load(bytes(bundle), device=gpu.device)
    try:
        return m.run([f.copy() for f in feeds])
    finally:
        m.close()


@pytest.mark.parametrize("dtype,value", [("float32", 1.25), ("int32", -3), ("bool", True),
                                         ("int64", -5 * 2**33 + 7), ("int64", 3)])
@pytest.mark.parametrize("dims", [[2, 3], [7]])
def test_fill_constant(gpu, dims, dtype, value):
    """Constant dims and value: folded at compile time (the output is a copy of a constant); with
    folding off, the GPU kernel writes the same."""
    model, feeds = one_op("FILL", [Const(np.array(dims, np.int64)), Const(np.array(value, dtype))], dtype,
                          out_shape=dims)
    assert not any(label.startswith("FILL") for label in _dispatch_ops(model))
    refs = check(gpu, model, feeds)
    assert_matches(_run_unfolded(gpu, model, feeds), refs)


@pytest.mark.parametrize("op", ["ZEROS_LIKE"])
@pytest.mark.parametrize("dtype", ["float32", "int32", "int64"])
@pytest.mark.parametrize("shape", [(5,), (2, 3, 7), (3, 1, 2, 2)])
def test_zeros_like(gpu, op, dtype, shape):
    x = np.random.default_rng(0).uniform(-3, 3, shape).astype(dtype)
    mb = ModelBuilder()
    xi = mb.input("x", shape, dtype)
    y = mb.tensor("y", shape, dtype)
    mb.op(op, [xi], [y])
    mb.output(y)
    model = mb.finish()
    assert any(label.startswith(op) for label in _dispatch_ops(model))
    check(gpu, model, [x])


def test_zeros_like_bool_rejected():
    """LiteRT's ZEROS_LIKE fails on bool at run time; the GPU registry does not take it either."""
    model, _ = one_op("ZEROS_LIKE", [np.zeros((2, 3), bool)], "bool")
    assert "bool" in (gpu_reason(model) or "")


@pytest.mark.parametrize("op", ["ZEROS_LIKE"])
def test_zeros_like_constant_folds(gpu, op):
    mb = ModelBuilder()
    a = mb.input("a", [2, 3], "float32")
    c = mb.const("c", np.full((2, 3), 4.0, np.float32))
    z = mb.tensor("z", [2, 3])
    y = mb.tensor("y", [2, 3])
    mb.op(op, [c], [z])
    mb.op("ADD", [a, z], [y])
    mb.output(y)
    model = mb.finish()
    assert not any(label.startswith(op) for label in _dispatch_ops(model))
    check(gpu, model, [np.arange(6, dtype=np.float32).reshape(2, 3)])


@pytest.mark.parametrize("start,limit,delta,dtype", [(0, 10, 3, "int32"), (5, -4, -2, "int32"),
                                                      (0.5, 2.0, 0.1, "float32"), (1.0, -1.0, -0.3, "float32"),
                                                      (2, 3, 5, "int32")])
def test_range_folds(gpu, start, limit, delta, dtype):
    from gpuc.compiler.passes.fold import litert_range
    n = litert_range(np.array(start), np.array(limit), np.array(delta), dtype).size
    mb = ModelBuilder()
    x = mb.input("x", [n], dtype)
    r = mb.tensor("r", [n], dtype)
    y = mb.tensor("y", [n], dtype)
    mb.op("RANGE", [mb.const("s", np.array(start, dtype)), mb.const("l", np.array(limit, dtype)),
                    mb.const("d", np.array(delta, dtype))], [r])
    mb.op("ADD", [x, r], [y])
    mb.output(y)
    mb.output(r)
    model = mb.finish()
    assert not any(label.startswith("RANGE") for label in _dispatch_ops(model))
    check(gpu, model, [np.ones(n, dtype)])


def _sparse_fc(values, dense_shape, sparsity):
    """DENSIFY of a sparse constant feeding FULLY_CONNECTED (what the converter emits for sparse weights)."""
    mb = ModelBuilder()
    x = mb.input("x", [2, dense_shape[1]])
    w = mb.tensor("w_sparse", dense_shape, data=np.asarray(values, np.float32))
    mb.tensors[w]["sparsity"] = sparsity
    wd = mb.tensor("w", dense_shape)
    y = mb.tensor("y", [2, dense_shape[0]])
    mb.op("DENSIFY", [w], [wd])
    mb.op("FULLY_CONNECTED", [x, wd, -1], [y])
    mb.output(y)
    return mb.finish()


def _csr(segments, indices):
    return {"format": 1, "array_segments_type": 1, "array_segments": ("Int32Vector", {"values": segments}),
            "array_indices_type": 3, "array_indices": ("Uint8Vector", {"values": indices})}


@pytest.mark.parametrize("case", ["csr", "block", "csr-outer"])
def test_densify_folds(gpu, case):
    if case == "csr":            # [[1 0 0 2] [0 0 0 0] [0 3 0 0]]
        model = _sparse_fc([1, 2, 3], [3, 4], {"traversal_order": [0, 1], "dim_metadata": [
            {"format": 0, "dense_size": 3}, _csr([0, 2, 2, 3], [0, 3, 1])]})
    elif case == "block":        # 2x4 with 1x2 blocks along dim 1: [[0 0 1 2] [3 4 0 0]]
        model = _sparse_fc([1, 2, 3, 4], [2, 4], {"traversal_order": [0, 1, 2], "block_map": [1], "dim_metadata": [
            {"format": 0, "dense_size": 2}, _csr([0, 1, 2], [1, 0]), {"format": 0, "dense_size": 2}]})
    else:                        # both levels sparse
        model = _sparse_fc([5, -1, 2], [4, 3], {"traversal_order": [0, 1], "dim_metadata": [
            _csr([0, 2], [1, 3]), _csr([0, 2, 3], [0, 2, 1])]})
    assert not any(label.startswith("DENSIFY") for label in _dispatch_ops(model))
    x = np.random.default_rng(2).uniform(-1, 1, (2, 3 if case == "csr-outer" else 4)).astype(np.float32)
    refs = run_litert(model, [x.copy()])
    assert_matches(gpu.run(model, [x.copy()]), refs)
