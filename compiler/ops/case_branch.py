"""STABLEHLO_CASE's branch selection (compiler/control_flow.py lowers the op itself: its branch
subgraphs run between jumps, like IF's).

LiteRT (tensorflow/lite/kernels/stablehlo_case.cc): input 0 is the index (int32, one element); the
other inputs are every branch's arguments; an index below 0 or past the last branch selects the last
branch.  Here branch k < n - 1 runs when `index == k` (an EQUAL on the GPU, its one-element flag read
by the host's jump); the last branch runs when no earlier flag is set, so out-of-range indices reach it.
"""
from __future__ import annotations

import numpy as np

from gpuc.compiler.ir import Graph, Node
from gpuc.errors import UnsupportedError

OP = "STABLEHLO_CASE"


def branches(node: Node, n_subgraphs: int) -> list[int]:
    """The branch subgraph indices, checked (UnsupportedError naming the op)."""
    gis = [int(b) for b in (node.attrs.get("branch_subgraph_indices") or [])]
    if not gis:
        raise UnsupportedError(f"{node.label()}: no branch subgraphs (LiteRT needs at least one)")
    bad = [g for g in gis if not 0 < g < n_subgraphs]
    if bad:
        raise UnsupportedError(f"{node.label()}: branch subgraph {bad[0]} is not a subgraph of this model "
                               f"({n_subgraphs} subgraphs)")
    return gis


def branch_flag(node: Node, graph: Graph, k: int) -> tuple[Node, int]:
    """(an EQUAL node computing `index == k`, its bool output) for the jump before branch k."""
    idx = graph.t(node.inputs[0])
    if idx.dtype != "int32" or idx.size != 1:
        raise UnsupportedError(f"{node.label()}: index {idx.name!r} is {idx.dtype} {list(idx.shape)} (LiteRT takes "
                               "one int32 element)")
    kc = graph.add_const(f"{node.label()}/branch{k}", np.array(k, np.int32))
    flag = graph.add_tensor(f"{node.label()}/is_branch{k}", idx.shape, "bool")
    return Node("EQUAL", [node.inputs[0], kc], [flag], index=node.index), flag
