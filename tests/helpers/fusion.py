"""Shared checks of the fusion-pass tests (layer norm, attention): a model's outputs with its dispatch
count, and a comparison with LiteRT that keeps NaN where LiteRT has NaN."""
from __future__ import annotations

import numpy as np

import gpuc
from gpuc.runtime.bundle import read_bundle
from helpers.litert import run_litert


def run_counted(model, inputs, **opts):
    """(outputs, dispatch count) of `model` compiled with `opts` (no compile cache)."""
    b = gpuc.compile(model, cache=False, **opts)
    with gpuc.load(b) as m:
        return [np.array(o) for o in m.run(inputs)], len(read_bundle(b).dispatches)


def close_to_litert(outs, model, inputs, tol=1e-5, rtol=0.0, floor=1e-30, nonfinite_equal=False):
    """NaN where LiteRT has NaN; finite values within rtol and tol * max(floor, max|ref|); with
    nonfinite_equal, every non-finite reference value exactly."""
    for o, r in zip(outs, run_litert(model, inputs)):
        np.testing.assert_array_equal(np.isnan(o), np.isnan(r))
        fin = np.isfinite(r)
        if nonfinite_equal:
            np.testing.assert_array_equal(o[~fin], r[~fin])
        np.testing.assert_allclose(o[fin], r[fin], rtol=rtol, atol=tol * max(floor, float(np.abs(r[fin]).max())))
