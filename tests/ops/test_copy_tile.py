"""The tiled transpose (shaders/copy_tile.comp, ops/copy_tile.py), a measured candidate of float copy_nd
kernels whose destination and source are contiguous along different dims, made first choice here: the same
values as LiteRT and as copy_nd (fp32: bit for bit; fp16 storage: the copy's own bits), at tile edges, for 3-d
and 4-d transposes (NCHW -> NHWC), and for every batch of a --max-batch bundle (a prefix of its workgroups)."""
import dataclasses
import os

import numpy as np
import pytest

pytest.importorskip("vulkan")

import gpuc  # noqa: E402
from gpuc.compiler.ir import GPU  # noqa: E402
from gpuc.compiler.ops import copy_tile  # noqa: E402
from gpuc.compiler.options import resolve, using  # noqa: E402
from gpuc.compiler.prepare import prepare  # noqa: E402
from helpers.builder import ModelBuilder  # noqa: E402
from helpers.litert import run_litert  # noqa: E402

RNG = np.random.default_rng(5)


def transpose_model(shape, perm, fp16=False):
    mb = ModelBuilder()
    x = mb.input("x", list(shape))
    if fp16:                                # through an op first, so that the copy reads float16 storage
        h = mb.tensor("h", list(shape))
        mb.op("MUL", [x, mb.const("two", np.array(2.0, np.float32))], [h])
        x = h
    y = mb.tensor("y", [shape[p] for p in perm])
    mb.op("TRANSPOSE", [x, mb.const("perm", np.array(perm, np.int32))], [y])
    mb.output(y)
    return mb.finish()


@pytest.fixture
def tiled(monkeypatch):
    """The tiled form a first choice for copies of any size (it is a measured candidate otherwise)."""
    monkeypatch.setattr(copy_tile, "MIN_ELEMENTS", 0)
    monkeypatch.setattr(copy_tile, "TILE_VARIANT", dataclasses.replace(copy_tile.TILE_VARIANT, measured=False))


def _variants(model, **opts):
    with using(resolve(**opts)):
        return [[v.name for v in k.variants] for k in prepare(model, warn=False).program
                if k.kind == GPU and k.template == "copy_nd"]


CASES = [((2, 40, 36), (0, 2, 1)), ((3, 45, 37), (0, 2, 1)), ((2, 12, 10, 9), (0, 2, 3, 1)),
         ((2, 33, 8, 70), (0, 3, 2, 1)), ((1, 16, 2, 7, 3, 7), (0, 2, 4, 3, 5, 1))]


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
@pytest.mark.parametrize("shape,perm", CASES)
def test_tiled_transpose(tiled, shape, perm, precision):
    if precision == "fp16" and os.environ.get("GPUC_DISABLE_FP16"):
        pytest.skip("fp16 storage disabled")
    model = transpose_model(shape, perm, precision == "fp16")
    assert ["tile"] in _variants(model, precision=precision)
    x = RNG.normal(0, 3, shape).astype(np.float32)
    with gpuc.load(gpuc.compile(model, cache=False, precision=precision)) as m:
        assert m.bundle.stats["variants_used"] == {"tile": 1}
        out = m.run([x])[0]
    ref = run_litert(model, [x])[0]
    if precision == "fp32":
        np.testing.assert_array_equal(out, ref)
    else:
        np.testing.assert_allclose(out, ref, rtol=1e-3, atol=1e-3 * float(np.abs(ref).max()))


def test_tiled_equals_copy_bits_under_fp16(tiled, monkeypatch):
    shape, perm = (3, 45, 37), (0, 2, 1)
    model = transpose_model(shape, perm, True)
    x = RNG.normal(0, 3, shape).astype(np.float32)
    with gpuc.load(gpuc.compile(model, cache=False, precision="fp16")) as m:
        assert m.bundle.stats["variants_used"] == {"tile": 1}
        tiled_out = m.run([x])[0]
    monkeypatch.setattr(copy_tile, "MIN_ELEMENTS", 1 << 40)        # no tiled form: copy_nd itself
    assert _variants(model, precision="fp16") == [[]]
    with gpuc.load(gpuc.compile(model, cache=False, precision="fp16")) as m:
        np.testing.assert_array_equal(m.run([x])[0], tiled_out)


def test_tiled_batches(tiled):
    shape, perm = (1, 24, 9, 40), (0, 3, 2, 1)
    model = transpose_model(shape, perm)
    xs = RNG.normal(0, 3, (4,) + shape[1:]).astype(np.float32)
    with gpuc.load(gpuc.compile(model, cache=False, max_batch=4)) as m:
        assert m.bundle.stats["variants_used"] == {"tile": 1}
        for b in (1, 2, 3, 4):
            np.testing.assert_array_equal(m.run([xs[:b]])[0], np.transpose(xs[:b], perm))


def test_where_it_is_offered(monkeypatch):
    monkeypatch.setattr(copy_tile, "MIN_ELEMENTS", 0)
    assert _variants(transpose_model((2, 40, 36), (0, 2, 1))) == [["tile"]]
    assert _variants(transpose_model((2, 40, 3), (0, 2, 1))) == [[]]          # a source run under MIN_SOURCE_RUN
    assert _variants(transpose_model((2, 5, 40), (0, 2, 1))) == [[]]          # the destination's under MIN_SIDE
    assert _variants(transpose_model((2, 64, 8, 7, 8, 7), (0, 2, 4, 3, 5, 1))) == [["tile"]]    # MaxViT's grid
    assert _variants(transpose_model((2, 6, 8, 12), (0, 2, 1, 3))) == [[]]    # channels stay innermost: vec form
    monkeypatch.setattr(copy_tile, "MIN_ELEMENTS", 1 << 16)
    assert _variants(transpose_model((2, 40, 36), (0, 2, 1))) == [[]]         # small: not worth a measurement
