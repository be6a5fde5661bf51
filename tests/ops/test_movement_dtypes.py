"""Every dtype LiteRT's builtin kernels take for a data-movement op runs on the GPU (no CPU node) and
matches LiteRT exactly: bool, int8, uint8, int16, int32, int64, float16, float32.  A dtype LiteRT
rejects for an op is a compile error naming the op, never an answer.

Shapes are small and odd, so 1- and 2-byte tensors end inside a 32-bit word, and regions of
CONCATENATION / PACK / SPLIT start and end inside words."""
from __future__ import annotations

import numpy as np
import pytest

import gpuc
from gpuc.errors import UnsupportedError
from gpuc.runtime.bundle import read_bundle
from helpers.builder import ModelBuilder
from helpers.litert import run_litert

pytest.importorskip("vulkan")

ALL = ("bool", "int8", "uint8", "int16", "int32", "int64", "float16", "float32")


def values(shape, dtype, seed):
    g = np.random.default_rng(seed)
    if dtype == "bool":
        return g.integers(0, 2, shape).astype(bool)
    if dtype in ("float16", "float32"):
        return g.uniform(-100, 100, shape).astype(dtype)
    info = np.iinfo(dtype)
    return g.integers(info.min, info.max, shape, endpoint=True, dtype=dtype)


class M:
    """A one-op model under construction: runtime inputs of `dtype`, constants, outputs."""

    def __init__(self, dtype):
        self.mb, self.dtype, self.feeds = ModelBuilder(), dtype, []

    def x(self, shape, dtype=None, data=None):
        dtype = dtype or self.dtype
        self.feeds.append(values(shape, dtype, len(self.feeds)) if data is None else np.asarray(data, dtype))
        return self.mb.input(f"x{len(self.feeds)}", shape, dtype)

    def c(self, v, dtype="int32"):
        return self.mb.const(f"c{len(self.mb.tensors)}", np.asarray(v, dtype))

    def op(self, op, ins, out_shapes, version=1, **opts):
        outs = [self.mb.tensor(f"y{i}", s, self.dtype) for i, s in enumerate(out_shapes)]
        self.mb.op(op, ins, outs, version, **opts)
        for o in outs:
            self.mb.output(o)
        return self.mb.finish(), self.feeds


def _gather(d):
    m = M(d)
    return m.op("GATHER", [m.x([4, 3]), m.c([3, 0, 3, 1, 2])], [[5, 3]], axis=0)


def _gather_axis1(d):
    m = M(d)
    return m.op("GATHER", [m.x([2, 5]), m.c([4, 0, 1])], [[2, 3]], axis=1)


def _gather_runtime64(d):
    """Indices computed at run time, int64 (bound as word pairs)."""
    m = M(d)
    return m.op("GATHER", [m.x([5, 3]), m.x([4], "int64", [4, 0, 2, 4])], [[4, 3]], axis=0)


def _fill(d):
    """FILL of a value known at run time (LiteRT's Python API takes no 0-d input: a [1] input RESHAPEd)."""
    m = M(d)
    s = m.mb.tensor("s", [], d)
    m.mb.op("RESHAPE", [m.x([1]), m.c([], "int32")], [s])
    return m.op("FILL", [m.c([3, 5]), s], [[3, 5]])


CASES = {
    "BROADCAST_TO": lambda d: (m := M(d)).op("BROADCAST_TO", [m.x([1, 3, 1]), m.c([2, 3, 5])], [[2, 3, 5]],
                                            version=2),
    "TILE": lambda d: (m := M(d)).op("TILE", [m.x([2, 3]), m.c([2, 3])], [[4, 9]]),
    "GATHER": _gather,
    "GATHER:axis1": _gather_axis1,
    "GATHER:runtime64": _gather_runtime64,
    "GATHER_ND": lambda d: (m := M(d)).op("GATHER_ND", [m.x([3, 5]), m.c([[2, 1], [0, 4], [1, 3]])], [[3]]),
    "CONCATENATION": lambda d: (m := M(d)).op("CONCATENATION", [m.x([2, 3]), m.x([2, 2]), m.x([2, 1])], [[2, 6]],
                                              axis=1),
    "CONCATENATION:axis0": lambda d: (m := M(d)).op("CONCATENATION", [m.x([1, 3]), m.x([2, 3])], [[3, 3]], axis=0),
    "CONCATENATION:big": lambda d: (m := M(d)).op("CONCATENATION", [m.x([3, 67]), m.x([3, 1]), m.x([3, 130])],
                                                  [[3, 198]], axis=1),
    "PACK": lambda d: (m := M(d)).op("PACK", [m.x([3]), m.x([3]), m.x([3])], [[3, 3]], axis=1, values_count=3),
    "UNPACK": lambda d: (m := M(d)).op("UNPACK", [m.x([3, 5])], [[3]] * 5, axis=1, num=5),
    "SPLIT": lambda d: (m := M(d)).op("SPLIT", [m.c([1]), m.x([2, 9])], [[2, 3]] * 3, num_splits=3),
    "SPLIT_V": lambda d: (m := M(d)).op("SPLIT_V", [m.x([2, 7]), m.c([2, -1, 1]), m.c([1])], [[2, 2], [2, 4], [2, 1]],
                                        num_splits=3),
    "SLICE": lambda d: (m := M(d)).op("SLICE", [m.x([3, 7]), m.c([1, 2]), m.c([2, -1])], [[2, 5]]),
    "STRIDED_SLICE": lambda d: (m := M(d)).op("STRIDED_SLICE", [m.x([3, 7]), m.c([0, 6]), m.c([3, 0]),
                                                                m.c([2, -2])], [[2, 3]]),
    "TRANSPOSE": lambda d: (m := M(d)).op("TRANSPOSE", [m.x([2, 3, 5]), m.c([2, 0, 1])], [[5, 2, 3]]),
    "TRANSPOSE:big": lambda d: (m := M(d)).op("TRANSPOSE", [m.x([9, 53]), m.c([1, 0])], [[53, 9]]),
    "SLICE:big": lambda d: (m := M(d)).op("SLICE", [m.x([301]), m.c([3]), m.c([295])], [[295]]),
    "RESHAPE": lambda d: (m := M(d)).op("RESHAPE", [m.x([3, 5]), m.c([5, 3])], [[5, 3]], new_shape=[5, 3]),
    "SQUEEZE": lambda d: (m := M(d)).op("SQUEEZE", [m.x([1, 3, 1, 5])], [[3, 5]], squeeze_dims=[0, 2]),
    "EXPAND_DIMS": lambda d: (m := M(d)).op("EXPAND_DIMS", [m.x([3, 5]), m.c([1])], [[3, 1, 5]]),
    "PAD": lambda d: (m := M(d)).op("PAD", [m.x([2, 3]), m.c([[1, 0], [2, 1]])], [[3, 6]]),
    "PADV2": lambda d: (m := M(d)).op("PADV2", [m.x([2, 3]), m.c([[1, 1], [0, 3]]),
                                                m.c(values([1], d, 99), d)], [[4, 6]]),
    "MIRROR_PAD": lambda d: (m := M(d)).op("MIRROR_PAD", [m.x([3, 4]), m.c([[1, 2], [2, 1]])], [[6, 7]],
                                           mode="REFLECT"),
    "MIRROR_PAD:symmetric": lambda d: (m := M(d)).op("MIRROR_PAD", [m.x([3, 4]), m.c([[0, 3], [1, 4]])], [[6, 9]],
                                                     mode="SYMMETRIC"),
    "REVERSE_V2": lambda d: (m := M(d)).op("REVERSE_V2", [m.x([3, 5]), m.c([1])], [[3, 5]]),
    "REVERSE_V2:both": lambda d: (m := M(d)).op("REVERSE_V2", [m.x([3, 5]), m.c([0, 1])], [[3, 5]]),
    "SELECT": lambda d: (m := M(d)).op("SELECT", [m.x([3, 5], "bool"), m.x([3, 5]), m.x([3, 5])], [[3, 5]]),
    "SELECT_V2": lambda d: (m := M(d)).op("SELECT_V2", [m.x([3, 1], "bool"), m.x([1, 5]), m.x([3, 5])], [[3, 5]]),
    "SPACE_TO_DEPTH": lambda d: (m := M(d)).op("SPACE_TO_DEPTH", [m.x([1, 4, 2, 3])], [[1, 2, 1, 12]], block_size=2),
    "DEPTH_TO_SPACE": lambda d: (m := M(d)).op("DEPTH_TO_SPACE", [m.x([1, 2, 1, 12])], [[1, 4, 2, 3]], block_size=2),
    "SPACE_TO_BATCH_ND": lambda d: (m := M(d)).op("SPACE_TO_BATCH_ND", [m.x([1, 3, 4, 3]), m.c([2, 2]),
                                                                        m.c([[1, 0], [0, 2]])], [[4, 2, 3, 3]]),
    "BATCH_TO_SPACE_ND": lambda d: (m := M(d)).op("BATCH_TO_SPACE_ND", [m.x([4, 2, 3, 3]), m.c([2, 2]),
                                                                        m.c([[1, 0], [0, 2]])], [[1, 3, 4, 3]]),
    "ZEROS_LIKE": lambda d: (m := M(d)).op("ZEROS_LIKE", [m.x([3, 5])], [[3, 5]]),
    "FILL": _fill,
}

# The dtypes (of ALL) LiteRT's builtin kernels take, where not all of them (probed with the cases above:
# each other dtype fails LiteRT's Prepare or Invoke)
LITERT = {
    "CONCATENATION:big": lambda d: (m := M(d)).op("CONCATENATION", [m.x([3, 67]), m.x([3, 1]), m.x([3, 130])],
                                                  [[3, 198]], axis=1),
    "PACK": ("int8", "uint8", "int16", "int32", "int64", "float32"),
    "UNPACK": ("bool", "int8", "uint8", "int16", "int32", "float16", "float32"),
    "SPLIT": ("int8", "uint8", "int16", "int32", "int64", "float32"),
    "SPLIT_V": ("int8", "uint8", "int16", "int32", "int64", "float32"),
    "SPACE_TO_DEPTH": ("int8", "uint8", "int32", "int64", "float32"),
    "DEPTH_TO_SPACE": ("int8", "uint8", "int32", "int64", "float32"),
    "ZEROS_LIKE": ("int32", "int64", "float32"),
}
# variants of an op's case: a few dtypes (each element width) are enough
VARIANT_DTYPES = ("bool", "int16", "int64", "float16")


def _params():
    for case in CASES:
        op = case.split(":")[0]
        for d in (VARIANT_DTYPES if ":" in case else ALL):
            yield pytest.param(case, d, id=f"{case}-{d}")


@pytest.mark.parametrize("case,dtype", list(_params()))
def test_movement_dtype(gpu, case, dtype):
    op = case.split(":")[0]
    model, feeds = CASES[case](dtype)
    if dtype not in LITERT.get(op, ALL):
        with pytest.raises(Exception):
            run_litert(model, [f.copy() for f in feeds])
        with pytest.raises(UnsupportedError, match=op):
            gpuc.compile(model)
        return
    refs = run_litert(model, [f.copy() for f in feeds])
    bundle = gpuc.compile(model)
    stats = read_bundle(bundle).stats
    assert stats["cpu_nodes"] == 0 and stats["host_round_trips"] == 0, stats.get("cpu_ops")
    m = gpuc.load(bytes(bundle), device=gpu.device)
    try:
        outs = m.run([f.copy() for f in feeds])
    finally:
        m.close()
    assert len(outs) == len(refs)
    for o, r in zip(outs, refs):
        assert o.dtype == r.dtype and o.shape == r.shape, (o.dtype, o.shape, r.dtype, r.shape)
        assert o.tobytes() == r.tobytes(), f"{case} {dtype}:\n{o}\nLiteRT:\n{r}"


@pytest.mark.parametrize("dtype", ALL)
def test_reshape_copy(gpu, dtype):
    """RESHAPE as a copy kernel (reshape_as_view off; by default it is a view, no dispatch)."""
    model, feeds = CASES["RESHAPE"](dtype)
    bundle = gpuc.compile(model, disable_passes=["reshape_as_view"])
    b = read_bundle(bundle)
    assert b.stats["cpu_nodes"] == 0 and [d.label.split()[0] for d in b.dispatches] == ["RESHAPE"]
    m = gpuc.load(bytes(bundle), device=gpu.device)
    try:
        out, = m.run([f.copy() for f in feeds])
    finally:
        m.close()
    ref, = run_litert(model, [f.copy() for f in feeds])
    assert out.dtype == ref.dtype and out.shape == ref.shape and out.tobytes() == ref.tobytes()


def _attention_mask(s=13, heads=4):
    """A DistilBERT-style mask: EQUAL(mask, 0) -> bool [1, s], RESHAPE [1, 1, 1, s], BROADCAST_TO
    [1, heads, s, s], SELECT_V2 between a large negative value and the attention scores."""
    mb = ModelBuilder()
    mask = mb.input("mask", [1, s], "int32")
    scores = mb.input("scores", [1, heads, s, s], "float32")
    b = mb.tensor("is_pad", [1, s], "bool")
    mb.op("EQUAL", [mask, mb.const("zero", np.array(0, np.int32))], [b])
    b4 = mb.tensor("is_pad4", [1, 1, 1, s], "bool")
    mb.op("RESHAPE", [b, mb.const("shape4", np.array([1, 1, 1, s], np.int32))], [b4])
    full = mb.tensor("is_pad_full", [1, heads, s, s], "bool")
    mb.op("BROADCAST_TO", [b4, mb.const("to", np.array([1, heads, s, s], np.int32))], [full], version=2)
    y = mb.tensor("masked", [1, heads, s, s], "float32")
    mb.op("SELECT_V2", [full, mb.const("neg", np.array(-1e9, np.float32)), scores], [y])
    mb.output(y)
    mb.output(full)
    g = np.random.default_rng(5)
    return mb.finish(), [(g.uniform(0, 1, [1, s]) < 0.6).astype(np.int32),
                         g.uniform(-3, 3, [1, heads, s, s]).astype(np.float32)]


def test_bool_mask_broadcast_on_gpu(gpu):
    """The BROADCAST_TO of a bool attention mask runs on the GPU (it was a CPU node: a host round trip
    per run)."""
    model, feeds = _attention_mask()
    bundle = gpuc.compile(model)
    b = read_bundle(bundle)
    assert b.stats["cpu_nodes"] == 0 and b.stats["host_round_trips"] == 0
    assert any(d.label.startswith("BROADCAST_TO") for d in b.dispatches)
    m = gpuc.load(bytes(bundle), device=gpu.device)
    try:
        outs = m.run([f.copy() for f in feeds])
    finally:
        m.close()
    refs = run_litert(model, [f.copy() for f in feeds])
    for o, r in zip(outs, refs):
        assert o.dtype == r.dtype and o.shape == r.shape and o.tobytes() == r.tobytes()
