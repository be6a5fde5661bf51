"""The fused LayerNorm's three row layouts (ops/layer_norm.py): one invocation per row (D < 64), SEG
invocations per row with several rows per workgroup (64 <= D < 2048 over 4096+ rows; the last
workgroup with spare segments), one workgroup per row (D >= 2048); each with the plain shared-memory reductions and with the
`subgroup` variant (where the device has subgroup arithmetic), against LiteRT within 1e-5; a NaN in a
row makes that row NaN and leaves its neighbours in the same workgroup alone."""
import numpy as np
import pytest

pytest.importorskip("vulkan")

import gpuc  # noqa: E402
from gpuc.compiler.ir import GPU  # noqa: E402
from gpuc.compiler.prepare import prepare  # noqa: E402
from gpuc.runtime.bundle import read_bundle  # noqa: E402
from helpers.fusion import close_to_litert  # noqa: E402
from helpers.models import ln_model  # noqa: E402

SHAPES = [(5, 48), (7, 64), (3, 5, 96), (11, 200), (6, 768), (9, 1000), (2, 2048),
          (4097, 64), (1, 4099, 96), (4097, 200), (4096, 1100)]   # (the segmented layout: 4096 rows and
#                                            more; rows of up to 1024 elements read once into registers)


def _run(model, x):
    b = gpuc.compile(model, cache=False)
    with gpuc.load(b) as m:
        return np.array(m.run([x])[0]), len(read_bundle(b).dispatches)


@pytest.mark.parametrize("shape,layout", [((5, 48), 0), ((7, 64), 1), ((4095, 96), 1), ((4096, 96), 2),
                                          ((2, 4096, 2047), 2), ((4096, 2048), 1)])
def test_layout_by_row_size_and_count(shape, layout):
    ks = [k for k in prepare(ln_model(shape=shape, keep_dims=False), warn=False).program if k.kind == GPU]
    assert [k.defines["ROW_PER_GROUP"] for k in ks if k.template == "layer_norm"] == [layout]


@pytest.mark.parametrize("d,per", [(64, 2), (96, 3), (200, 7), (1024, 32), (1100, 0)])
def test_segmented_rows_in_registers_up_to_1024(d, per):
    ks = [k for k in prepare(ln_model(shape=(4096, d), keep_dims=False), warn=False).program if k.kind == GPU]
    assert [k.defines.get("SEG_PER") for k in ks if k.template == "layer_norm"] == [per]


@pytest.mark.parametrize("variants", ["subgroup=off", "subgroup=force"])
@pytest.mark.parametrize("shape", SHAPES, ids=["x".join(map(str, s)) for s in SHAPES])
def test_rows_match_litert(monkeypatch, shape, variants):
    monkeypatch.setenv("GPUC_VARIANTS", variants)
    model = ln_model(shape=shape, keep_dims=False)
    x = np.random.default_rng(sum(shape)).normal(3.0, 2.0, shape).astype(np.float32)
    out, _ = _run(model, x)
    close_to_litert([out], model, [x], tol=1e-5, rtol=1e-5, floor=1.0)


@pytest.mark.parametrize("variants", ["subgroup=off", "subgroup=force"])
def test_nan_row_stays_in_its_row(monkeypatch, variants):
    monkeypatch.setenv("GPUC_VARIANTS", variants)
    shape = (4102, 96)                           # 4 rows per workgroup: rows 0..3 share one
    model = ln_model(shape=shape, keep_dims=False)
    x = np.random.default_rng(1).normal(0.0, 1.0, shape).astype(np.float32)
    x[2, 17] = np.nan
    out, _ = _run(model, x)
    assert np.isnan(out[2]).all()
    assert np.isfinite(np.delete(out, 2, axis=0)).all()
    close_to_litert([out], model, [x], tol=1e-5, rtol=1e-5, floor=1.0)
