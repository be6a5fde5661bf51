"""Outputs whose length LiteRT sets per run (bundle.fbs OutputSize): the bundle computes them at their
largest size, and run() returns them trimmed along their axis to the run's value of their length
tensor, an int32 scalar model input (NON_MAX_SUPPRESSION_V4 / V5's max_output_size, TOPK_V2's k, given
at run time).  A value outside [0, the computed size] fails the run, as LiteRT's invoke fails (a
negative size) or gpuc cannot hold it, naming the output.  DeviceTensors (keep_on_device) cannot be
trimmed: such a run is refused.
"""
from __future__ import annotations

import numpy as np

from gpuc.errors import GpucError
from gpuc.runtime import iospec


def run_lengths(model, inputs) -> list:
    """[(output position, axis, length)] of this run, checked against the outputs' computed sizes."""
    b = model.bundle
    vals = iospec.ordered(model.inputs, inputs)
    res = []
    for o in b.output_sizes:
        v = vals[b.inputs.index(o.length)]
        v = v.numpy() if hasattr(v, "numpy") and not isinstance(v, np.ndarray) else v
        n = int(np.asarray(v).reshape(-1)[0])
        spec = model.outputs[o.output]
        cap = int(spec.shape[o.axis])
        if not 0 <= n <= cap:
            name = model.inputs[b.inputs.index(o.length)].name
            raise GpucError(f"output {spec.name!r}: its length along axis {o.axis} is input {name!r} = {n}, "
                            f"outside [0, {cap}] (the size this bundle computes it at)")
        res.append((o.output, o.axis, n))
    return res


class TrimmedHandle:
    """A RunHandle whose wait() returns the outputs trimmed to the run's lengths."""

    def __init__(self, handle, lengths):
        self._h, self._lengths = handle, lengths

    def wait(self, mode: str = "passive"):
        return trim(self._h.wait(mode), self._lengths)

    def __getattr__(self, name):
        return getattr(self._h, name)


def trim(outs, lengths):
    outs = list(outs)
    for pos, axis, n in lengths:
        idx = [slice(None)] * outs[pos].ndim
        idx[axis] = slice(0, n)
        outs[pos] = np.ascontiguousarray(outs[pos][tuple(idx)])
    return outs


def wrap(model, inputs, keep_on_device: bool, submit):
    """submit() the run when the bundle has trimmed outputs (their lengths checked first)."""
    if not model.bundle.output_sizes:
        return submit()
    if keep_on_device:
        names = [model.outputs[o.output].name for o in model.bundle.output_sizes]
        raise GpucError(f"keep_on_device: outputs {names} have a length known only per run (LiteRT resizes them); "
                        "gpuc returns them as arrays only")
    lengths = run_lengths(model, inputs)
    return TrimmedHandle(submit(), lengths)
