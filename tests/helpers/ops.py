"""One-op models and their checks against LiteRT: `one_op` builds a single-op model from arrays
(runtime inputs) and `Const(...)` operands; `check` runs it on LiteRT and on gpuc and compares
(`assert_matches`: float32 within rtol 1e-4 and atol 1e-5 * max(1, max|ref|), integer and bool
exactly); `check_rejected` wants LiteRT to fail and gpuc to report the op unsupported;
`assert_close` compares outputs with declared shapes and dtypes."""
from __future__ import annotations

import numpy as np
import pytest

import gpuc
from gpuc.errors import UnsupportedError
from helpers.builder import ModelBuilder
from helpers.litert import run_litert


class Const:
    """Marks an operand that is a constant of the model (not a runtime input)."""

    def __init__(self, value):
        self.value = np.asarray(value)


def one_op(op: str, operands, out_dtype: str, out_shape=None, **options):
    """A single-op model.  operands: arrays (runtime inputs) or Const(...).  The output shape
    defaults to the numpy broadcast of the operand shapes.  Returns (model bytes, runtime inputs)."""
    mb = ModelBuilder()
    ids, feeds = [], []
    for i, v in enumerate(operands):
        if isinstance(v, Const):
            ids.append(mb.const(f"c{i}", v.value))
        else:
            v = np.array(v)                   # (keeps 0-d arrays 0-d, unlike ascontiguousarray)
            ids.append(mb.input(f"x{i}", v.shape, v.dtype.name))
            feeds.append(v)
    shapes = [(v.value if isinstance(v, Const) else np.asarray(v)).shape for v in operands]
    y = mb.tensor("y", np.broadcast_shapes(*shapes) if out_shape is None else out_shape, out_dtype)
    mb.op(op, ids, [y], **options)
    mb.output(y)
    return mb.finish(), feeds


def assert_matches(outs, refs):
    assert len(outs) == len(refs)
    for i, (o, r) in enumerate(zip(outs, refs)):
        assert o.dtype == r.dtype, f"output {i}: dtype {o.dtype}, LiteRT {r.dtype}"
        assert o.shape == r.shape, f"output {i}: shape {o.shape}, LiteRT {r.shape}"
        if r.dtype.kind == "f":
            finite = np.abs(r[np.isfinite(r)])
            np.testing.assert_allclose(o, r, rtol=1e-4, atol=1e-5 * max(1.0, float(finite.max(initial=0.0))),
                                       err_msg=f"output {i}")
        else:
            np.testing.assert_array_equal(o, r, err_msg=f"output {i}")


def check(gpu, model: bytes, feeds):
    """Run on LiteRT and on gpuc; compare."""
    refs = run_litert(model, [f.copy() for f in feeds])
    assert_matches(gpu.run(model, [f.copy() for f in feeds]), refs)
    return refs


def check_rejected(model: bytes, feeds, match: str):
    """LiteRT fails on the model, and gpuc reports it unsupported at compile time."""
    with pytest.raises(Exception):
        run_litert(model, feeds)
    with pytest.raises(UnsupportedError, match=match):
        gpuc.compile(model)


def assert_close(outs, refs, shapes, dtypes):
    assert len(outs) == len(refs) == len(shapes)
    for i, (o, r, shape, dt) in enumerate(zip(outs, refs, shapes, dtypes)):
        assert isinstance(o, np.ndarray), f"output {i}"
        assert o.dtype == np.dtype(dt), f"output {i}: dtype {o.dtype}, expected {dt}"
        assert o.shape == tuple(shape) == r.shape, f"output {i}: shape {o.shape}, expected {tuple(shape)}"
        np.testing.assert_allclose(o, r, rtol=1e-4, atol=1e-5 * max(1.0, float(np.abs(r).max(initial=0.0))),
                                   err_msg=f"output {i}")
