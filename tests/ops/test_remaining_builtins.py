"""The last builtins LiteRT's CPU interpreter runs (issue 28), against LiteRT with random inputs:
WHERE (compiler/ops/where.py: coordinates of nonzero elements, rows trimmed per run) and UNIQUE
(compiler/ops/unique.py: first-occurrence order, idx int32 / int64, length trimmed per run)."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("vulkan")

import gpuc  # noqa: E402
from helpers.builder import ModelBuilder  # noqa: E402
from helpers.litert import run_litert  # noqa: E402


def _same(out, ref):
    assert out.shape == ref.shape and out.dtype == ref.dtype, (out.shape, ref.shape, out.dtype, ref.dtype)
    assert np.array_equal(out, ref, equal_nan=out.dtype.kind == "f"), (out, ref)


def _where_model(dtype, shape):
    mb = ModelBuilder()
    x = mb.input("x", shape, dtype)
    y = mb.tensor("y", [1, len(shape)], "int64")
    mb.op("WHERE", [x], [y])
    mb.output(y)
    return mb.finish()


def _values(rng, shape, dtype, p):
    mask = rng.random(shape) < p
    if dtype == "bool":
        return mask
    if dtype == "float32":
        v = rng.standard_normal(shape).astype(np.float32)
        v.reshape(-1)[:2] = [np.nan, -0.0] if v.size > 2 else v.reshape(-1)[:2]   # NaN counts, -0 does not
        return np.where(mask | np.isnan(v), v, np.float32(0))
    return (mask * rng.integers(1, 100, shape)).astype(dtype)


@pytest.mark.parametrize("dtype,shape", [("bool", [3, 4]), ("float32", [7]), ("int32", [2, 600]),
                                         ("uint32", [5, 2]), ("int8", [2, 3, 5]), ("uint8", [9]),
                                         ("int64", [4, 1, 3])])
def test_where_against_litert(dtype, shape):
    rng = np.random.default_rng(len(dtype) * 7 + len(shape))
    model = _where_model(dtype, shape)
    with gpuc.load(gpuc.compile(model)) as m:
        for p in (0.0, 0.3, 1.0):
            x = _values(rng, shape, dtype, p)
            out = m.run([x])[0]
            if not np.count_nonzero(x):           # LiteRT resizes to [0, rank] (its python API cannot read it)
                assert out.shape == (0, len(shape)) and out.dtype == np.int64
                continue
            _same(out, run_litert(model, [x])[0])


def test_where_refusals():
    with pytest.raises(gpuc.errors.GpucError, match="WHERE.*int16"):
        gpuc.compile(_where_model("int16", [4]))
    mb = ModelBuilder()                                   # the coordinates feed another op: not trimmable
    x = mb.input("x", [4], "bool")
    y, z = mb.tensor("y", [1, 1], "int64"), mb.tensor("z", [1, 1], "int64")
    mb.op("WHERE", [x], [y])
    mb.op("NEG", [y], [z])
    mb.output(z)
    with pytest.raises(gpuc.errors.GpucError, match="WHERE.*another op reads"):
        gpuc.compile(mb.finish())
