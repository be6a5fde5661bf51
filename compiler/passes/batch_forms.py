"""The machinery of the batch-native rewrite (passes/batching.py has the rules and the pass): the
merged and prepended forms of a tensor, a node's Plan, and Rewrite, which checks every node first and
edits the graph only when all can take the items."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from gpuc.compiler.ir import Graph, Node

MAX_TILED_CONST_BYTES = 64 << 20     # a constant made per item (tiled N times) stays below this


class Refuse(Exception):
    """This graph cannot be made batch-native (the message says which op and why)."""


def merged(shape, n: int) -> tuple:
    shape = tuple(shape)
    return (n * shape[0],) + shape[1:] if shape else (n,)


@dataclass
class Plan:
    """How one node can run: `merged_ok` (unchanged on the merged form), `prep` (edits that make it
    run on the prepended form; None: it cannot), `rank` (prepended: runtime inputs padded with 1s to
    this rank, for broadcasting ops), `any_form` (a reshape: reads either form, writes merged),
    `merged_prep` / `merged_out` (edits for the merged form, and the form its outputs then have)."""
    merged_ok: bool
    prep: Callable | None = None
    rank: int | None = None
    any_form: bool = False
    merged_prep: Callable | None = None
    merged_out: str = "m"


class Rewrite:
    """The planned rewrite of one graph: checks run first over every node (Refuse), the edits run only
    when all passed (`apply`)."""

    def __init__(self, graph: Graph, n: int):
        self.graph, self.n = graph, n
        self.edits = []             # thunks, run in order by apply()
        self.form: dict[int, str] = {}       # runtime tensor -> "m" (merged) or "p" (prepended)
        self.views: dict[int, list] = {}     # id(node) -> [(input k, view shape)] read through a RESHAPE
        self.out_views: dict[int, list] = {}     # id(node) -> [output k]: a graph output written prepended
        self.shared: set[int] = set()        # runtime tensors computed from constants only: one copy for all items

    # -- queries on the batch-1 graph ----------------------------------------------------------
    def runtime(self, tid: int) -> bool:
        """A per-item tensor (an input, variable or anything computed from them)."""
        return tid >= 0 and tid not in self.shared and (self.graph.t(tid).is_variable or not self.graph.t(tid).is_const)

    def shape(self, tid: int) -> tuple:
        return tuple(self.graph.t(tid).shape)

    def const(self, node: Node, k: int, what: str) -> np.ndarray:
        if k >= len(node.inputs) or node.inputs[k] < 0 or not self.graph.t(node.inputs[k]).is_const:
            raise Refuse(f"{node.label()}: its {what} (input {k}) is not a constant")
        return np.asarray(self.graph.t(node.inputs[k]).data)

    # -- edits -----------------------------------------------------------------------------------
    def set_input_const(self, node: Node, k: int, value, dtype=None) -> None:
        g = self.graph
        old = g.t(node.inputs[k]) if k < len(node.inputs) and node.inputs[k] >= 0 else None
        arr = np.asarray(value, dtype or (old.dtype if old is not None else np.int32))

        def edit():
            tid = g.add_const(f"{old.name if old is not None else node.op}/batched", arr)
            while len(node.inputs) <= k:
                node.inputs.append(-1)
            node.inputs[k] = tid
        self.edits.append(edit)

    def tile_consts(self, node: Node) -> None:
        """Every constant input of `node` becomes per item: (N, *shape), N copies."""
        g, n = self.graph, self.n
        for k, tid in enumerate(node.inputs):
            if tid < 0 or self.runtime(tid):
                continue
            t = g.t(tid)
            if t.data is None:
                raise Refuse(f"{node.label()}: input {t.name!r}, computed from constants only, would be needed per item")
            if t.nbytes * n > MAX_TILED_CONST_BYTES:
                raise Refuse(f"{node.label()}: constant {t.name!r} would be copied per item ({t.nbytes * n} bytes)")

            def edit(k=k, t=t):
                tid = g.add_const(f"{t.name}/per_item", np.broadcast_to(t.data, (n,) + tuple(t.shape)))
                g.t(tid).quant = t.quant
                node.inputs[k] = tid
            self.edits.append(edit)

    def set_attr(self, node: Node, key: str, value) -> None:
        self.edits.append(lambda: node.attrs.__setitem__(key, value))

    def become_reshape(self, node: Node) -> None:
        """RESHAPE / SQUEEZE / EXPAND_DIMS: a RESHAPE to the merged output shape."""
        target = merged(self.shape(node.outputs[0]), self.n)

        def edit():
            view = self.graph.reshape_node(node.inputs[0], node.outputs[0], target)
            node.op, node.inputs, node.attrs = view.op, view.inputs, view.attrs
        self.edits.append(edit)

    # -- planning ----------------------------------------------------------------------------------
    def place(self, node: Node, plan: Plan) -> None:
        """Choose the node's form, record the views its inputs need and its outputs' form."""
        n = self.n
        ins = [(k, t) for k, t in enumerate(node.inputs) if self.runtime(t)]
        if plan.any_form:
            self.become_reshape(node)
            form = "m"
        elif plan.prep is not None and (not plan.merged_ok or any(self.form.get(t) == "p" for _, t in ins)):
            plan.prep(self, node)
            form = "p"
            for k, t in ins:
                s = self.shape(t)
                pad = (1,) * max(0, (plan.rank if plan.rank is not None else len(s)) - len(s))
                if pad or self.form.get(t, "m") != "p":
                    self.views.setdefault(id(node), []).append((k, (n,) + pad + s))
        elif plan.merged_ok:
            if plan.merged_prep is not None:
                plan.merged_prep(self, node)
            form = plan.merged_out
            for k, t in ins:
                if self.form.get(t, "m") != "m":
                    self.views.setdefault(id(node), []).append((k, merged(self.shape(t), n)))
        else:
            raise Refuse(f"{node.label()}: cannot run on batched items")
        for k, t in enumerate(node.outputs):
            if t >= 0:
                self.form[t] = form
                if form == "p" and t in self.graph.outputs:
                    self.out_views.setdefault(id(node), []).append(k)

    # -- apply -------------------------------------------------------------------------------------
    def apply(self) -> None:
        g, n = self.graph, self.n
        runtime = [t for t in g.tensors if (t.is_variable or not t.is_const) and t.id not in self.shared]
        g.unbatched = set(self.shared)
        for e in self.edits:
            e()
        nodes = []
        for node in g.nodes:
            for k, shape in self.views.get(id(node), []):
                v = self._tensor(node.inputs[k], shape, "items")
                nodes.append(g.reshape_node(node.inputs[k], v, shape))
                node.inputs[k] = v
            nodes.append(node)
            for k in self.out_views.get(id(node), []):
                t = node.outputs[k]
                v = self._tensor(t, (n,) + tuple(g.t(t).shape), "items")
                node.outputs[k] = v
                nodes.append(g.reshape_node(v, t, merged(g.t(t).shape, n)))
        g.nodes = nodes
        for t in runtime:
            if t.is_variable:              # state is per item: N copies of the initial value
                for attr in ("data", "initial"):
                    v = getattr(t, attr)
                    if v is not None:
                        v = np.asarray(v).reshape(t.shape or (1,))
                        setattr(t, attr, np.ascontiguousarray(np.concatenate([v] * n, axis=0)))
            p = self.form.get(t.id, "m") == "p" and t.id not in g.outputs
            t.shape = (n,) + tuple(t.shape) if p else merged(t.shape, n)
            t.shape_signature = None

    def _tensor(self, tid: int, shape, suffix: str) -> int:
        t = self.graph.t(tid)
        return self.graph.add_tensor(f"{t.name}/{suffix}", shape, t.dtype, quant=t.quant)
