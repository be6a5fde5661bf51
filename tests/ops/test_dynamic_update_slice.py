"""DYNAMIC_UPDATE_SLICE on the GPU (compiler/ops/dynamic_update_slice.py) against LiteRT: random
shapes and dtypes, start indices at run time and constant, out of range (LiteRT clamps them), int64
starts, and the copy-then-update form beside the in-place one (a KV cache threaded as state:
tests/runtime/test_signatures.py)."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("vulkan")

import gpuc  # noqa: E402
from gpuc.errors import GpucError  # noqa: E402
from helpers.builder import ModelBuilder  # noqa: E402
from helpers.litert import run_litert  # noqa: E402


def _model(shape, ushape, dtype, idx_dtype="int32", const_start=None, reread=False):
    mb = ModelBuilder()
    x = mb.input("x", shape, dtype)
    u = mb.input("u", ushape, dtype)
    s = (mb.const("s", np.asarray(const_start, idx_dtype)) if const_start is not None
         else mb.input("s", [len(shape)], idx_dtype))
    y = mb.tensor("y", shape, dtype)
    mb.op("DYNAMIC_UPDATE_SLICE", [x, u, s], [y])
    mb.output(y)
    if reread:                      # the operand is read again after the update: no in-place
        z = mb.tensor("z", shape, dtype)
        mb.op("ADD" if dtype != "int64" else "MAXIMUM", [x, y], [z])
        mb.output(z)
    return mb.finish()


def _data(rng, shape, dtype):
    if dtype.startswith("int"):
        return rng.integers(-1000, 1000, shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


CASES = [  # (operand shape, update shape, dtype, index dtype)
    ([1, 16, 2, 8], [1, 3, 2, 8], "float32", "int32"),
    ([5, 7], [2, 3], "int32", "int32"),
    ([4, 6, 3], [4, 2, 1], "float32", "int64"),
    ([3, 5], [1, 2], "int64", "int32"),
    ([9], [9], "float32", "int32"),
]


@pytest.mark.parametrize("case", range(len(CASES)))
def test_random_against_litert(case):
    shape, ushape, dtype, idt = CASES[case]
    rng = np.random.default_rng(case)
    model = _model(shape, ushape, dtype, idt)
    with gpuc.load(gpuc.compile(model)) as m:
        for trial in range(4):          # in range, negative, past the end, far past (clamped)
            x, u = _data(rng, shape, dtype), _data(rng, ushape, dtype)
            s = rng.integers(-3, np.array(shape) + 3).astype(idt)
            if trial == 3:
                s = np.array([-(1 << 40) if idt == "int64" else -(1 << 30)] + [1 << 30] * (len(shape) - 1), idt)
            ref = run_litert(model, [x, u, s])[0]
            out = m.run([x, u, s])[0]
            assert np.array_equal(out, ref), (shape, ushape, s)


def test_constant_start_and_reread_operand():
    rng = np.random.default_rng(7)
    model = _model([6, 4], [2, 4], "float32", const_start=[5, -2], reread=True)
    x, u = _data(rng, [6, 4], "float32"), _data(rng, [2, 4], "float32")
    ref = run_litert(model, [x, u])
    out = gpuc.load(gpuc.compile(model)).run([x, u])
    for a, b in zip(out, ref):
        assert np.array_equal(a, b)


def test_bad_update_shape_is_refused():
    model = _model([4, 4], [5, 1], "float32")
    with pytest.raises(GpucError, match="DYNAMIC_UPDATE_SLICE.*larger than the operand"):
        gpuc.compile(model)
