"""Batch-native programs (`--max-batch N`): the batch-1 graph becomes one graph that computes N items
in every dispatch, so the batch folds into each kernel's grid and GEMM M dimension.

Every runtime (non-constant) tensor gets N items, item-major: item i's value is the i-th slice of
its bytes.  Its batched shape is the *merged* form (N*s0, s1, ...) of its batch-1 shape s (rank kept;
a scalar becomes (N,)), so axis 0 of every tensor carries the items.  Ops for which axis 0 is
batch-like (convolutions, pooling, FC rows, elementwise ops on equal leading dims, softmax over the
last axis, slices and concatenations along other axes, ...) run unchanged on the merged form; each
item's result is the batch-1 result.  Other ops (a transpose that moves axis 0, a reduction or
concatenation over axis 0, a broadcast between different leading dims, a strided slice, ...) run on
the *prepended* form (N, *s), with their axis operands shifted by one (constants that must be per
item are tiled).  Both forms are the same bytes, so each tensor keeps the form its producer wrote,
and a consumer that needs the other form (or, broadcasting, a rank padded with 1s) reads it through
a RESHAPE (a free view: passes/fusion.py reshape_as_view).  An op that can run in both forms takes
the prepended one when an input already has it, so chains of such ops (elementwise chains that
ew_fusion fuses) see no views between them, and the dispatch count stays the batch-1 count.

An op that neither form covers (SPACE_TO_BATCH_ND, a time-major LSTM, control flow, ...) refuses
the rewrite before anything changes: `batch_items` returns the reason, and the bundle replicates the
batch-1 program per item instead (runtime/batch.py).  The rules are per op family in FAMILIES; each
op names its family in its `batch` fact (compiler/ops/).
"""
from __future__ import annotations

import numpy as np

from gpuc.compiler.ir import Graph, Node
from gpuc.compiler.ops.util import norm_axis
from gpuc.compiler.passes.batch_forms import Plan, Refuse, Rewrite, merged


# --- rules: each returns the node's Plan -----------------------------------------------------------

def _axis(node: Node, a: int, rank: int) -> int:
    """norm_axis, an out-of-range axis refusing the rewrite (the op's own check then reports it)."""
    try:
        return norm_axis(a, rank)
    except ValueError as e:
        raise Refuse(f"{node.label()}: {e}") from None


def _only_input0(rw: Rewrite, node: Node) -> None:
    for k, tid in enumerate(node.inputs[1:], 1):
        if rw.runtime(tid):
            raise Refuse(f"{node.label()}: input {k} ({rw.graph.t(tid).name!r}) is computed at run time")


def _no_prep(rw, node):
    return None


def rule_merge(rw: Rewrite, node: Node) -> Plan:
    """Axis 0 is a batch axis of the op (NHWC images, FC rows): the merged form as it is."""
    _only_input0(rw, node)
    if any(len(rw.shape(t)) == 0 for t in node.inputs[:1] + node.outputs if t >= 0):
        raise Refuse(f"{node.label()}: scalar operand")
    return Plan(True)


def rule_unary(rw: Rewrite, node: Node) -> Plan:
    """Unary elementwise ops, variable reads and writes: either form."""
    return Plan(True, _no_prep)


def rule_lstm(rw: Rewrite, node: Node) -> Plan:
    """Batch-major sequences and cells: items on axis 0 of the input and of the (variable) state."""
    if node.attrs.get("time_major"):
        raise Refuse(f"{node.label()}: a time-major sequence (items on axis 1)")
    if any(len(rw.shape(t)) == 0 for t in node.inputs + node.outputs if rw.runtime(t)):
        raise Refuse(f"{node.label()}: scalar operand")
    return Plan(True)


def rule_transpose_conv(rw: Rewrite, node: Node) -> Plan:
    shape = rw.const(node, 0, "output shape")
    for k in (1, 3):
        if k < len(node.inputs) and rw.runtime(node.inputs[k]):
            raise Refuse(f"{node.label()}: input {k} is computed at run time")
    rw.set_input_const(node, 0, merged(shape.reshape(-1).tolist(), rw.n))
    return Plan(True)


def rule_elementwise(rw: Rewrite, node: Node) -> Plan:
    """Broadcasting ops: merged when every runtime operand has the output's rank and leading dim and
    every constant broadcasts along axis 0; prepended (operands padded to the output rank) always."""
    o = rw.shape(node.outputs[0])
    r = len(o)
    ok = r > 0
    for tid in node.inputs:
        if tid < 0:
            continue
        s = rw.shape(tid)
        ok = ok and ((len(s) == r and s[0] == o[0]) if rw.runtime(tid) else (len(s) < r or s[0] == 1))
    return Plan(ok, _no_prep, rank=r)


def rule_reshape(rw: Rewrite, node: Node) -> Plan:
    if len(node.inputs) > 1 and rw.runtime(node.inputs[1]):
        raise Refuse(f"{node.label()}: the new shape is computed at run time")
    return Plan(False, any_form=True)


def rule_transpose(rw: Rewrite, node: Node) -> Plan:
    perm = rw.const(node, 1, "permutation").reshape(-1).astype(np.int64)
    p = [int(v) % max(perm.size, 1) for v in perm]

    def prep(rw, node):
        rw.set_input_const(node, 1, [0] + [v + 1 for v in p])
    return Plan(bool(p) and p[0] == 0, prep)


def _same_lead(rw: Rewrite, node: Node) -> bool:
    lead = {rw.shape(t)[0] if rw.shape(t) else None for t in node.inputs + node.outputs if t >= 0}
    return len(lead) == 1 and None not in lead


def _axis_attr(name: str, rank_of):
    """Ops with an axis attribute (CONCATENATION, PACK, UNPACK): merged unless the axis is 0 or an
    operand is constant; prepended with the axis shifted (constant operands tiled)."""
    def rule(rw: Rewrite, node: Node) -> Plan:
        a = _axis(node, int(node.attrs.get(name, 0) or 0), rank_of(rw, node))
        consts = any(t >= 0 and not rw.runtime(t) for t in node.inputs)

        def prep(rw, node):
            rw.tile_consts(node)
            rw.set_attr(node, name, a + 1)
        return Plan(a != 0 and not consts and _same_lead(rw, node), prep)
    return rule


def _axis_input(k: int, what: str, data_k: int = 0, reduces: bool = False):
    """Ops with a constant axis operand (reductions, SPLIT, SPLIT_V, CUMSUM, ARG_MAX, REVERSE_V2): merged
    unless an axis is 0; prepended with the axes shifted.  reduces: a reduction with keep_dims."""
    def rule(rw: Rewrite, node: Node) -> Plan:
        axes = rw.const(node, k, what)
        for j, tid in enumerate(node.inputs):
            if j not in (k, data_k) and rw.runtime(tid):
                raise Refuse(f"{node.label()}: input {j} is computed at run time")
        rank = len(rw.shape(node.inputs[data_k]))
        norm = [_axis(node, int(a), rank) for a in axes.reshape(-1)]
        c = rw.graph.t(node.inputs[k])

        def prep(rw, node):
            rw.set_input_const(node, k, np.asarray([a + 1 for a in norm]).reshape(axes.shape), c.dtype)
        outs_ok = all(len(rw.shape(t)) > 0 for t in node.outputs if t >= 0)
        if 0 in norm and rank > 1 and rw.shape(node.inputs[data_k])[0] == 1 and reduces and len(set(norm)) > 1:
            # a reduction over a size-1 axis 0 and others: on the merged form axis 0 is the items' axis,
            # so it reduces over the others; without keep_dims its output is then the prepended form
            rest = sorted(set(norm) - {0})

            def merged_prep(rw, node):
                rw.set_input_const(node, k, np.asarray(rest, axes.dtype), c.dtype)
            return Plan(True, prep, merged_prep=merged_prep,
                        merged_out="m" if node.attrs.get("keep_dims") else "p")
        return Plan(0 not in norm and rank > 0 and outs_ok, prep)
    return rule




def rule_slice(rw: Rewrite, node: Node) -> Plan:
    begin = rw.const(node, 1, "begin").reshape(-1).astype(np.int64)
    size = rw.const(node, 2, "size").reshape(-1).astype(np.int64)
    s = rw.shape(node.inputs[0])

    def prep(rw, node):
        rw.set_input_const(node, 1, [0] + begin.tolist())
        rw.set_input_const(node, 2, [-1] + size.tolist())
    ok = bool(begin.size) and begin[0] == 0 and size[0] in (-1, s[0])
    if ok and size[0] != -1:
        rw.set_input_const(node, 2, [-1] + size[1:].tolist())    # (both forms: the whole item axis)
        size = np.asarray([-1] + size[1:].tolist())
    return Plan(ok, prep)


def rule_strided_slice(rw: Rewrite, node: Node) -> Plan:
    vals = [rw.const(node, k, what).reshape(-1).astype(np.int64).tolist()
            for k, what in ((1, "begin"), (2, "end"), (3, "strides"))]

    def prep(rw, node):
        for k, v in zip((1, 2, 3), vals):
            rw.set_input_const(node, k, [0 if k < 3 else 1] + v)
        a = node.attrs
        for m in ("begin_mask", "end_mask"):
            rw.set_attr(node, m, (int(a.get(m, 0) or 0) << 1) | 1)
        for m in ("ellipsis_mask", "new_axis_mask", "shrink_axis_mask"):
            rw.set_attr(node, m, int(a.get(m, 0) or 0) << 1)
    return Plan(False, prep)


def rule_pad(rw: Rewrite, node: Node) -> Plan:
    p = rw.const(node, 1, "paddings").astype(np.int64).reshape(-1, 2)
    if len(node.inputs) > 2 and rw.runtime(node.inputs[2]):
        raise Refuse(f"{node.label()}: its pad value is computed at run time")

    def prep(rw, node):
        rw.set_input_const(node, 1, np.concatenate([np.zeros((1, 2), np.int64), p]))
    return Plan(bool(p.shape[0]) and not p[0].any(), prep)


def rule_tile(rw: Rewrite, node: Node) -> Plan:
    m = rw.const(node, 1, "multiples").reshape(-1).astype(np.int64)

    def prep(rw, node):
        rw.set_input_const(node, 1, [1] + m.tolist())
    return Plan(bool(m.size) and m[0] == 1, prep)


def rule_broadcast_to(rw: Rewrite, node: Node) -> Plan:
    o = rw.shape(node.outputs[0])
    rw.const(node, 1, "shape")

    def prep(rw, node):
        rw.set_input_const(node, 1, [rw.n] + list(o))
    return Plan(False, prep, rank=len(o))


def rule_gather(rw: Rewrite, node: Node) -> Plan:
    params, idx = node.inputs[0], node.inputs[1]
    a = _axis(node, int(node.attrs.get("axis", 0) or 0), len(rw.shape(params)))
    bd = int(node.attrs.get("batch_dims", 0) or 0)

    def prep(rw, node):
        rw.set_attr(node, "axis", a + 1)
        if rw.runtime(idx):
            rw.set_attr(node, "batch_dims", (bd % max(len(rw.shape(idx)), 1) if bd < 0 else bd) + 1)
    if rw.runtime(params) and rw.runtime(idx):
        return Plan(False, prep)
    if rw.runtime(params):
        if bd:
            raise Refuse(f"{node.label()}: batch_dims {bd} with constant indices")
        return Plan(a != 0, prep)
    if a != 0 or not rw.shape(idx):
        raise Refuse(f"{node.label()}: runtime indices into axis {a} of a constant")
    return Plan(True)


def rule_gather_nd(rw: Rewrite, node: Node) -> Plan:
    if rw.runtime(node.inputs[0]) or len(rw.shape(node.inputs[1])) < 2:
        raise Refuse(f"{node.label()}: GATHER_ND of runtime params (or rank-1 indices)")
    return Plan(True)


def rule_batch_matmul(rw: Rewrite, node: Node) -> Plan:
    """Merged when axis 0 is a batch axis of both operands (or, rank 2, the LHS rows against a constant
    RHS); prepended, operands padded to the output rank, always."""
    o = rw.shape(node.outputs[0])
    r = len(o)
    x, y = node.inputs[:2]
    if r == 2:
        ok = rw.runtime(x) and not rw.runtime(y) and not node.attrs.get("adj_x")
    else:
        ok = all((len(rw.shape(t)) == r and rw.shape(t)[0] == o[0]) if rw.runtime(t)
                 else (len(rw.shape(t)) < r or rw.shape(t)[0] == 1) for t in (x, y))
    return Plan(ok, _no_prep, rank=r)


def rule_softmax(rw: Rewrite, node: Node) -> Plan:
    """Over the last axis: either form for rank >= 2; a per-item row (N, C) for rank 1."""
    _only_input0(rw, node)
    return Plan(len(rw.shape(node.inputs[0])) >= 2, _no_prep)


def rule_embedding(rw: Rewrite, node: Node) -> Plan:
    if rw.runtime(node.inputs[1]) or not rw.shape(node.inputs[0]):
        raise Refuse(f"{node.label()}: runtime lookup table or scalar ids")
    return Plan(True)


def _rank_in(rw, node):
    return len(rw.shape(node.inputs[0]))


def _rank_out(rw, node):
    return len(rw.shape(node.outputs[0]))


def rule_select_rows(rw: Rewrite, node: Node) -> Plan:
    """SELECT: a broadcasting op, but a rank-1 condition selects along axis 0 (not batch-like)."""
    if len({rw.shape(t) for t in node.inputs}) > 1:
        raise Refuse(f"{node.label()}: a rank-1 condition selects along axis 0")
    return rule_elementwise(rw, node)


def _per_item(shared: tuple, attr: str):
    """Ops whose kernels run the items themselves (TFLite_Detection_PostProcess): every runtime input and
    output merged (items on axis 0), the inputs at positions `shared` constants common to the items;
    node.attrs[attr] tells the lowering the item count."""
    def rule(rw: Rewrite, node: Node) -> Plan:
        for k in shared:
            if k < len(node.inputs) and rw.runtime(node.inputs[k]):
                raise Refuse(f"{node.label()}: input {k} is computed at run time (the items share it)")
        return Plan(True, merged_prep=lambda rw, node: rw.edits.append(lambda: node.attrs.__setitem__(attr, rw.n)))
    return rule


# the batch families an op's `batch` fact names (compiler/ops/__init__.py): a key, or (key, *params)
FAMILIES = {
    "merge": rule_merge, "unary": rule_unary, "lstm": rule_lstm, "variable": lambda rw, node: Plan(True),
    "elementwise": rule_elementwise, "select_rows": rule_select_rows, "transpose_conv": rule_transpose_conv,
    "softmax": rule_softmax, "reshape": rule_reshape, "transpose": rule_transpose, "slice": rule_slice,
    "strided_slice": rule_strided_slice, "pad": rule_pad, "tile": rule_tile, "broadcast_to": rule_broadcast_to,
    "gather": rule_gather, "gather_nd": rule_gather_nd, "embedding": rule_embedding,
    "batch_matmul": rule_batch_matmul,
    "axis_attr": lambda attr, which: _axis_attr(attr, _rank_out if which == "out" else _rank_in),
    "axis_input": _axis_input, "per_item": _per_item,
}


def rule_for(op: str):
    """The op's batch rule (its `batch` fact), or None."""
    from gpuc.compiler.ops import fact
    key = fact(op, "batch")
    if isinstance(key, tuple):
        return FAMILIES[key[0]](*key[1:])
    return FAMILIES.get(key) if isinstance(key, str) else None


def no_rule_reason(graph: Graph) -> str:
    """Every op of `graph` without a batch rule, with the reason its `batch` fact gives."""
    from gpuc.compiler.ops import FACTS, MISSING, Why
    seen: dict[str, list] = {}
    for node in graph.nodes:
        if rule_for(node.op) is None:
            seen.setdefault(node.op, []).append(node)
    parts = []
    for op, nodes in seen.items():
        why = getattr(FACTS.get(op), "batch", None)
        parts.append(f"{nodes[0].label()}{f' and {len(nodes) - 1} more' if len(nodes) > 1 else ''}: no batch rule "
                     f"for {op}" + (f" ({why.reason.removeprefix('no batch rule: ')})"
                                   if isinstance(why, Why) and why is not MISSING else ""))
    return "; ".join(parts)


def stateful_refusal(graph: Graph) -> str | None:
    """Why --max-batch cannot run `graph` at all (an op whose `batch` fact is NoBatch), else None."""
    from gpuc.compiler.ops import FACTS, NoBatch
    for node in graph.nodes:
        why = getattr(FACTS.get(node.op), "batch", None)
        if isinstance(why, NoBatch):
            return f"{node.label()}: {why.reason}"
    return None


def plan(graph: Graph, n: int) -> Rewrite:
    """The rewrite of `graph` for n items; raises Refuse (nothing changed) when it cannot be made."""
    rw = Rewrite(graph, n)
    for kind, idx in (("input", graph.inputs), ("output", graph.outputs)):
        for tid in idx:
            s = rw.shape(tid)
            if not s or s[0] != 1:
                raise Refuse(f"{kind} {graph.t(tid).name!r} has shape {list(s)} (batching stacks items along "
                             "axis 0 and needs batch dimension 1 on every input and output)")
            if graph.t(tid).is_const:
                raise Refuse(f"{kind} {graph.t(tid).name!r} is a constant")
    outputs = set(graph.outputs)
    for t in graph.tensors:
        if (t.is_variable or not t.is_const) and t.quant is not None and t.quant.per_channel:
            raise Refuse(f"tensor {t.name!r} is quantized per channel at run time")
    for node in graph.nodes:
        rule = rule_for(node.op)
        if rule is None:
            raise Refuse(no_rule_reason(graph))
        if not any(rw.runtime(t) for t in node.inputs) and not any(graph.t(t).is_variable for t in node.outputs):
            if outputs & set(node.outputs):
                raise Refuse(f"{node.label()}: a model output computed from constants only")
            rw.shared.update(t for t in node.outputs if t >= 0)     # the same for every item: computed once
            continue
        rw.place(node, rule(rw, node))
    return rw


def batch_items(graph: Graph, n: int) -> str | None:
    """Rewrite `graph` to compute n items per run (see the module doc); None when done, else why not
    (the graph is then unchanged)."""
    try:
        rw = plan(graph, n)
    except Refuse as e:
        return str(e)
    rw.apply()
    return None
