"""In-place execution: an op whose output may overwrite one of its inputs when that input dies there.

Two halves.  `plan_in_place` (a PIPELINE pass, so `--disable-pass plan_in_place` turns it off) knows
op semantics: it records in `graph.in_place` the (output, input) pairs where every output element
is computed from the input element at the same index only, by the invocation that writes it (read
before write): elementwise ops and fused chains on an input of the output's shape and dtype, and
the residual operand of a conv / FC / transpose-conv epilogue (gemm, depthwise and transpose_conv
read res[i] right before they store out[i]).  `share_in_place` (memory_plan.py, called by the arena
planner) knows the schedule: it takes a pair when the one kernel that first writes the output is
the kernel where the input's life ends, that kernel binds the input only where in-place is safe,
and both have the same bytes and storage dtype; the output then lives in the input's bytes.
"""
from __future__ import annotations

from gpuc.compiler.ir import Graph
from gpuc.compiler.ops import TEMPLATES, fact


def safe_bindings(template: str):
    """The bindings of `template` that may alias its output (None: any input of the output's shape;
    (): none) - its template() fact in compiler/ops/."""
    t = TEMPLATES.get(template)
    return () if t is None else t.in_place


def plan_in_place(graph: Graph) -> None:
    keep = set(graph.inputs) | set(graph.outputs) | {t.id for t in graph.tensors if t.is_variable}
    pairs = []
    for n in graph.nodes:
        if len(n.outputs) != 1 or n.outputs[0] < 0 or n.outputs[0] in keep:
            continue
        y = graph.t(n.outputs[0])
        cands = list(n.inputs) if fact(n.op, "in_place") is True else [n.epilogue.residual]
        for i in dict.fromkeys(cands):
            if i is None or i < 0 or i in keep:
                continue
            x = graph.t(i)
            if not x.is_const and not x.is_variable and tuple(x.shape) == tuple(y.shape) and x.dtype == y.dtype:
                pairs.append((y.id, i))
    graph.in_place = pairs
