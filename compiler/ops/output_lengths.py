"""Outputs whose length LiteRT sets at run time (a data-dependent size): the lowering computes into
the largest size and declares which scalar tensor holds the run's length along an axis; the bundle
records it (bundle.fbs OutputSize) and the runtime trims what run() returns (runtime/output_sizes.py).

The length tensor must be a model input (an int32 scalar): the runtime reads its value from the run's
inputs, without a read-back.  The outputs must be model outputs that no other op reads (an op would
see the padded tensor, not LiteRT's resized one).
"""
from __future__ import annotations


def declare_length(node, graph, positions: list, length: int, axis: int = 0, check_only: bool = False):
    """Output `positions` of `node` have, along `axis`, the length held by tensor `length`.  Returns
    None, or (check_only) the reason gpuc cannot run that."""
    lt = graph.t(length)
    if length not in graph.inputs or lt.dtype != "int32" or len(lt.shape) > 1 or \
            (lt.shape and lt.shape[0] != 1):
        return (f"the size of its outputs comes from {lt.name!r}, which is computed inside the model: gpuc "
                "takes a run-time size only from a model input (an int32 scalar)")
    readers = {i for n in graph.nodes if n is not node for i in n.inputs}
    for p in positions:
        o = node.outputs[p]
        t = graph.t(o)
        if o not in graph.outputs or o in readers:
            return (f"output {t.name!r} has a run-time size (from {lt.name!r}) and another op reads it: gpuc "
                    "takes such an output only as a model output")
    if check_only:
        return None
    lengths = graph.__dict__.setdefault("output_lengths", {})
    for p in positions:
        lengths[node.outputs[p]] = (axis, length)
    return None
