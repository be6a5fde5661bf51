"""`--precision fp16` runs and their tolerance: fp16 results within 2e-2 * max|ref| of LiteRT's
float32 kernels (fp16 rounding of stored values only)."""
from __future__ import annotations

import numpy as np

import gpuc
from gpuc.runtime.bundle import read_bundle

TOL16 = 2e-2


def run16(gpu, model, xs, **opts):
    bundle = gpuc.compile(model, precision="fp16", **opts)
    with gpuc.load(bundle, device=gpu.device) as m:
        return m.run(xs), read_bundle(bundle)


def compile_coopmat_emulated(model) -> bytes:
    """A --precision fp16 bundle of `model` whose cooperative-matrix variants emulate the matrix operations
    per invocation (CompileOptions.coopmat_emulate), so a device without the extension runs their
    tiling, staging and epilogue (load it with GPUC_VARIANTS=coopmat=force)."""
    from gpuc.compiler import compile_model
    return compile_model(model, cache=False, precision="fp16", coopmat_emulate=True)


def dtype_of(b, name):
    (t,) = [t for t in b.tensors if t.name == name]
    return t.dtype


def assert_close16(outs, refs):
    for o, r in zip(outs, refs):
        assert o.dtype == np.float32 and np.isfinite(o).all()
        err = float(np.abs(o.astype(np.float64) - r).max())
        assert err <= TOL16 * float(np.abs(r).max()), (err, float(np.abs(r).max()))
