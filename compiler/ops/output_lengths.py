"""Outputs whose length LiteRT sets at run time (a data-dependent size): the lowering computes into
the largest size and declares which scalar tensor holds the run's length along an axis; the bundle
records it (bundle.fbs OutputSize) and the runtime trims what run() returns (runtime/output_sizes.py).

How the runtime finds the length (`rule`, runtime/output_sizes.py RULES), always from the run's inputs
or its returned outputs, without another read-back:
  "" (default): the value of `length`, an int32 scalar model input (NMS max_output_size, TOPK k);
  "last_plus_one": the last element of `length`, a 1-D int32 model input, + 1 (SEGMENT_SUM's ids);
  "max_plus_one": the largest element of `length`, an int32 / int64 model output, + 1 (UNIQUE's idx);
  "rows": the rows of the output itself before the first whose first element is negative (the
    kernel pads it with -1: WHERE's coordinates).
The outputs must be model outputs that no other op reads (an op would see the padded tensor, not
LiteRT's resized one).
"""
from __future__ import annotations


def declare_length(node, graph, positions: list, length: int, axis: int = 0, check_only: bool = False,
                   rule: str = ""):
    """Output `positions` of `node` have, along `axis`, the length that `rule` finds from tensor
    `length`.  Returns None, or (check_only) the reason gpuc cannot run that."""
    lt = graph.t(length)
    if rule == "last_plus_one" and (length not in graph.inputs or lt.dtype != "int32" or len(lt.shape) != 1):
        return (f"the size of its output comes from the values of {lt.name!r}, which are computed inside the "
                "model: gpuc takes such a size only from a model input")
    if rule in ("max_plus_one", "rows") and (length not in graph.outputs or length in
                                             {i for n in graph.nodes for i in n.inputs}):
        return (f"the size of its outputs comes from the values of {lt.name!r}, which another op reads or the "
                "model does not output: gpuc takes such a size only from a model output")
    if rule not in ("", "last_plus_one", "max_plus_one", "rows"):
        raise ValueError(f"unknown output length rule {rule!r}")
    if not rule and (length not in graph.inputs or lt.dtype != "int32" or len(lt.shape) > 1 or
                     (lt.shape and lt.shape[0] != 1)):
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
        lengths[node.outputs[p]] = (axis, length, rule) if rule else (axis, length)
    return None
