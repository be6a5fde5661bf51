"""Outputs whose length LiteRT sets per run (bundle.fbs OutputSize): the bundle computes them at their
largest size, and run() returns them trimmed along their axis to the run's value of their length
tensor, an int32 scalar model input (NON_MAX_SUPPRESSION_V4 / V5's max_output_size, TOPK_V2's k, given
at run time).  A value outside [0, the computed size] fails the run, as LiteRT's invoke fails (a
negative size) or gpuc cannot hold it, naming the output.  DeviceTensors (keep_on_device) cannot be
trimmed: such a run is refused.

An OutputSize with a `rule` has a data-dependent length (WHERE, UNIQUE, SEGMENT_SUM: compiler/ops/
output_lengths.py), found once the run is over from the values of its `length` tensor (RULES), a model
input or output: no extra read-back.
"""
from __future__ import annotations

import numpy as np

from gpuc.errors import GpucError
from gpuc.runtime import iospec


def _rows(v, o):
    """Rows of output v (along o.axis) before the first whose first element is negative."""
    v = np.moveaxis(np.asarray(v), o.axis, 0).reshape(np.asarray(v).shape[o.axis], -1)
    bad = np.flatnonzero(v[:, 0] < 0) if v.shape[1] else np.array([], np.int64)
    return int(bad[0]) if bad.size else v.shape[0]


RULES = {       # rule -> (where `length` lies, its dtypes, the length from its values and the output)
    "last_plus_one": ("inputs", ("int32",), lambda v, out, o: int(v.reshape(-1)[-1]) + 1 if v.size else 0),
    "max_plus_one": ("outputs", ("int32", "int64"), lambda v, out, o: int(v.max()) + 1 if v.size else 0),
    "rows": ("outputs", ("int32", "int64"), lambda v, out, o: _rows(out, o)),
}


def rule_reason(b, o, t, n) -> str | None:
    """Why OutputSize `o` (output tensor t, length tensor n) of bundle b is malformed, or None."""
    if o.rule not in RULES:
        return f"unknown rule {o.rule!r}"
    where, dtypes, _ = RULES[o.rule]
    if o.length not in getattr(b, where) or n.dtype not in dtypes or not n.shape:
        return f"its length tensor is not a {'/'.join(dtypes)} model {where[:-1]}"
    if o.rule == "rows" and b.outputs[o.output] != o.length:
        return "a rows rule counts the output itself"
    return None


def _value(v):
    return v.numpy() if hasattr(v, "numpy") and not isinstance(v, np.ndarray) else v


def run_lengths(model, inputs, outs=None) -> list:
    """[(output position, axis, length)] of this run, checked against the outputs' computed sizes:
    those read from inputs (outs None), or those found by a rule (from the run's outputs `outs`)."""
    b = model.bundle
    vals = iospec.ordered(model.inputs, inputs)
    res = []
    for o in b.output_sizes:
        if bool(o.rule) != (outs is not None):
            continue
        if o.rule:
            where, _, fn = RULES[o.rule]
            v = vals[b.inputs.index(o.length)] if where == "inputs" else outs[b.outputs.index(o.length)]
            if o.rule == "max_plus_one" and np.asarray(_value(v)).size and np.asarray(_value(v)).min() < 0:
                raise GpucError(f"output {model.outputs[o.output].name!r}: its op met an input value it cannot "
                                "place as LiteRT does (a float NaN, which LiteRT's std::map orders inconsistently); "
                                "gpuc fails the run")
            n = fn(np.asarray(_value(v)), outs[o.output], o)
        else:
            n = int(np.asarray(_value(vals[b.inputs.index(o.length)])).reshape(-1)[0])
        spec = model.outputs[o.output]
        cap = int(spec.shape[o.axis])
        if not 0 <= n <= cap:
            name = o.length if o.length not in b.inputs else model.inputs[b.inputs.index(o.length)].name
            raise GpucError(f"output {spec.name!r}: its length along axis {o.axis} is input {name!r} = {n}, "
                            f"outside [0, {cap}] (the size this bundle computes it at)")
        res.append((o.output, o.axis, n))
    return res


class TrimmedHandle:
    """A RunHandle whose wait() returns the outputs trimmed to the run's lengths."""

    def __init__(self, handle, lengths, found=None):
        self._h, self._lengths, self._found = handle, lengths, found

    def wait(self, mode: str = "passive"):
        outs = self._h.wait(mode)
        found = self._found(outs) if self._found is not None else []
        return trim(outs, self._lengths + found)

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
    found = None
    if any(o.rule for o in model.bundle.output_sizes):       # found from this run's inputs and outputs
        need = {model.bundle.inputs.index(o.length) for o in model.bundle.output_sizes
                if o.rule and o.length in model.bundle.inputs}
        kept = [np.array(_value(v)) if i in need else None
                for i, v in enumerate(iospec.ordered(model.inputs, inputs))]
        found = lambda outs: run_lengths(model, kept, outs)        # noqa: E731
    return TrimmedHandle(submit(), lengths, found)
