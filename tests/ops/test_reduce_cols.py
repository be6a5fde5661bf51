"""The column layout of sums and means over outer axes (shaders/reduce.comp COLS, ops/reduce.py COLS_VARIANT, a
`measured` candidate): COLS_W consecutive outputs per workgroup, slices of the reduced elements per invocation,
partials combined in slice order.  Made the first choice here (not measured, the subgroup variant off), against
LiteRT: NHWC spatial means of
short and long windows, channel counts below and above a workgroup's columns, keep_dims, a sum, the fused
squeeze-excite prologue (x * sigmoid(x) then the mean), --precision fp16; and where it is offered."""
import dataclasses
import os

import numpy as np
import pytest

pytest.importorskip("vulkan")

import gpuc  # noqa: E402
from gpuc.compiler.ir import GPU  # noqa: E402
from gpuc.compiler.ops import reduce as reduce_mod  # noqa: E402
from gpuc.compiler.prepare import prepare  # noqa: E402
from helpers.reduce_models import reduce_model  # noqa: E402
from helpers.litert import run_litert  # noqa: E402

RNG = np.random.default_rng(52)


def offered(model) -> list:
    ks = [k for k in prepare(model, warn=False).program if k.kind == GPU and k.template == "reduce"]
    return [[v.name for v in k.variants] for k in ks]


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
@pytest.mark.parametrize("op,shape,axes,keep,swish", [
    ("MEAN", (2, 17, 19, 120), [1, 2], True, False),      # long window (323 >= WG_MIN), 120 channels: 4 workgroups
    ("MEAN", (3, 9, 7, 20), [1, 2], False, False),        # short window, 20 channels (16 columns)
    ("SUM", (2, 30, 11, 5), [1, 2], True, False),         # 5 channels: columns cross items
    ("MEAN", (2, 16, 18, 40), [1, 2], True, True),        # the squeeze-excite prologue
    ("MEAN", (4, 70, 33), [1], False, False),             # rank 3, the middle axis
])
def test_cols_match_litert(monkeypatch, op, shape, axes, keep, swish, precision):
    if precision == "fp16" and os.environ.get("GPUC_DISABLE_FP16"):
        pytest.skip("fp16 storage disabled")
    model = reduce_model(op, shape, axes, keep, swish)
    assert all("cols" in names for names in offered(model))
    monkeypatch.setattr(reduce_mod, "COLS_VARIANT", dataclasses.replace(reduce_mod.COLS_VARIANT, measured=False))
    monkeypatch.setenv("GPUC_VARIANTS", "subgroup=off,cols=force")
    x = RNG.normal(0.5, 2, shape).astype(np.float32)
    with gpuc.load(gpuc.compile(model, cache=False, precision=precision)) as m:
        out = m.run([x])[0]
    ref = run_litert(model, [x])[0]
    tol = 1e-5 if precision == "fp32" else 2e-3
    np.testing.assert_allclose(out, ref, rtol=tol, atol=tol * float(np.abs(ref).max()))


@pytest.mark.parametrize("op,shape,axes", [("REDUCE_MAX", (2, 17, 19, 12), [1, 2]),   # NaN folding: not a sum
                                           ("MEAN", (2, 17, 300), [2])])              # innermost axis reduced
def test_not_offered(op, shape, axes):
    assert all("cols" not in names for names in offered(reduce_model(op, shape, axes, True)))


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
@pytest.mark.parametrize("op,shape,axes,keep", [
    ("MEAN", (2, 17, 19, 120), [1, 2], True),       # long window, 120 channels: 8 workgroups of 16 outputs
    ("MEAN", (3, 9, 7, 20), [1, 2], False),         # short window, 20 channels: groups of 4 cross items
    ("SUM", (2, 30, 11, 4), [1, 2], True),          # 4 channels
    ("MEAN", (4, 70, 36), [1], False),              # rank 3, the middle axis
    ("MEAN", (2, 5, 6, 7, 8), [1, 3], True),        # reduced axes apart
])
def test_cols4_match_litert(monkeypatch, op, shape, axes, keep, precision):
    """The 4-output form (shaders/reduce.comp COLS4, ops/reduce.py COLS4_VARIANT) made the first choice."""
    if precision == "fp16" and os.environ.get("GPUC_DISABLE_FP16"):
        pytest.skip("fp16 storage disabled")
    model = reduce_model(op, shape, axes, keep)
    assert all("cols4" in names for names in offered(model))
    monkeypatch.setattr(reduce_mod, "COLS4_VARIANT", dataclasses.replace(reduce_mod.COLS4_VARIANT, measured=False))
    monkeypatch.setenv("GPUC_VARIANTS", "subgroup=off,cols=off,cols4=force")
    x = RNG.normal(0.5, 2, shape).astype(np.float32)
    with gpuc.load(gpuc.compile(model, cache=False, precision=precision)) as m:
        names = {m.bundle.shaders[d.shader].name for d in m.bundle.dispatches if d.label.startswith(op)}
        out = m.run([x])[0]
    assert names == {"reduce+cols4"}
    ref = run_litert(model, [x])[0]
    tol = 1e-5 if precision == "fp32" else 2e-3
    np.testing.assert_allclose(out, ref, rtol=tol, atol=tol * float(np.abs(ref).max()))


@pytest.mark.parametrize("shape,swish", [((2, 17, 19, 10), False), ((2, 16, 18, 40), True)])
def test_cols4_not_offered(shape, swish):
    """Not for channel counts off a multiple of 4, nor over a fused prologue (decided on the final kernel)."""
    model = reduce_model("MEAN", shape, [1, 2], True, swish)
    if not swish:
        assert all("cols4" not in names for names in offered(model))
        return
    from gpuc.runtime.bundle import read_bundle
    names = {v.name for v in read_bundle(gpuc.compile(model, cache=False)).variants}
    assert "cols" in names and "cols4" not in names
