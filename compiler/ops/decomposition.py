"""Reading a STABLEHLO_COMPOSITE's decomposition subgraph for the modules that fuse one
(compiler/ops COMPOSITES, compiler/frontend/composite.py): which node makes a tensor, through
RESHAPEs, the value of a constant operand, and the composite's flexbuffer attributes."""
from __future__ import annotations

import numpy as np

from gpuc.compiler.ir import Graph, Node

NO_ACTIVATION = 0


class Decomposition:
    """The decomposition `s` of composite `n`: its nodes by the tensors they make (each used once)."""

    def __init__(self, n: Node, s: Graph):
        self.n, self.s = n, s
        self.made = {o: m for m in s.nodes for o in m.outputs}
        self.used: set[int] = set()

    def node(self, tid: int, op: str, n_inputs: int | None = None, through_reshape: bool = True) -> Node | None:
        """The `op` node making tensor `tid` (past RESHAPEs whose shape operand is constant), or None."""
        m = self.made.get(tid)
        while through_reshape and m is not None and m.op == "RESHAPE" and m.op != op:
            self.used.add(id(m))
            m = self.made.get(m.inputs[0])
        if m is None or m.op != op or (n_inputs is not None and len(m.inputs) != n_inputs):
            return None
        if m.attrs.get("fused_activation_function", NO_ACTIVATION) != NO_ACTIVATION:
            return None
        self.used.add(id(m))
        return m

    def source(self, tid: int) -> int:
        """`tid` past the RESHAPEs that make it."""
        m = self.made.get(tid)
        while m is not None and m.op == "RESHAPE":
            self.used.add(id(m))
            tid = m.inputs[0]
            m = self.made.get(tid)
        return tid

    def const(self, tid: int) -> np.ndarray | None:
        t = self.s.t(tid) if tid >= 0 else None
        return None if t is None or t.data is None else np.asarray(t.data)

    def scalar(self, tid: int) -> float | None:
        """The float32 value of a constant operand of one element."""
        v = self.const(tid)
        return float(v.reshape(-1)[0]) if v is not None and v.size == 1 and v.dtype == np.float32 else None

    def input(self, tid: int) -> int | None:
        """The decomposition input position of `tid` (past RESHAPEs), or None."""
        tid = self.source(tid)
        return self.s.inputs.index(tid) if tid in self.s.inputs else None

    def all_used(self) -> bool:
        """Every node of the decomposition is one the match read (nothing else computed)."""
        return all(id(m) in self.used for m in self.s.nodes)


def attributes(n: Node) -> dict:
    """The composite's attributes (a flexbuffer map), {} where absent or unreadable."""
    raw = n.attrs.get("composite_attributes")
    if raw is None or len(raw) == 0:
        return {}
    try:
        from flatbuffers import flexbuffers
        v = flexbuffers.Loads(bytes(bytearray(int(b) & 0xFF for b in raw)))
    except Exception:          # (flexbuffers raises bare errors on bad bytes) an unreadable map: no attributes
        return {}
    return v if isinstance(v, dict) else {}
