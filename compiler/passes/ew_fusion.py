"""fuse_elementwise: chains (and small DAGs) of float elementwise ops become one FUSED_ELEMENTWISE
node, computed by one dispatch per output element (ops/ew_fused.py, shaders/ew_fused.comp).

A node joins its consumer's group when its output has that single consumer (or all of its consumers
are in one group), is not a graph output or a variable, has no views, and has the group's output shape (so every intermediate is one value
per output element; inputs from outside the group may broadcast).  The members' inputs from outside
become the fused node's inputs (at most MAX_INPUTS); scalar float constants are inlined as exact
literals.  Semantics stay identical:
- every step uses its op's own formula (its ew_table row's ew_math.glsl / common.glsl function: the
  one the unfused kernel calls), with the node's fused activation exactly as its kernel applies it;
- a fake-quantized intermediate (passes/quant.py) is rounded to its grid where its kernel rounded it;
- under --precision fp16 (this pass runs after plan_fp16_storage) an intermediate the unfused
  program would have stored as float16 is rounded to float16 in registers, exactly as that store and
  load did; a boundary tensor that stayed fp32 because a member's template had no fp16 storage is
  pinned fp32; a scalar constant is inlined only when float16 represents it exactly (else bound).
"""
from __future__ import annotations

import copy

import numpy as np

from gpuc.compiler import ops
from gpuc.compiler.shader_text import supports_storage16
from gpuc.compiler.ir import Graph, Node
from gpuc.compiler.ew_table import TABLE
from gpuc.compiler.ops.ew_fused import MAX_INPUTS, OPS, arity
from gpuc.compiler.ops.math import params
from gpuc.compiler.ops.util import act_code
from gpuc.compiler.pattern import Op, Val, rewrite, scalar

FUSED_OP = "FUSED_ELEMENTWISE"


REDUCE_OPS = ("MEAN", "SUM", "REDUCE_MAX", "REDUCE_MIN", "REDUCE_PROD")


def template_of(node: Node) -> str:
    """The template the op's own lowering uses (float32); a fused node: its last op's."""
    op = node.attrs["fused"][-1] if node.op == FUSED_OP else node.op
    if op == "CAST":
        return "cast"
    if op in REDUCE_OPS:
        return "reduce"
    return "binary_math" if TABLE[op].arity == 2 else "unary_math"


def fusible(graph: Graph, node: Node) -> bool:
    if node.op not in OPS or len(node.outputs) != 1 or any(i < 0 for i in node.inputs) \
            or len(node.inputs) != arity(node.op):
        return False
    ts = [graph.t(i) for i in list(node.inputs) + list(node.outputs)]
    y = ts[-1]
    if node.op == "CAST":           # int32 -> float32 from a runtime tensor (converted as it is loaded)
        if ts[0].dtype not in ("int32", "float32") or ts[0].is_const or ts[0].is_variable:
            return False
        ts = ts[1:]
    if any(t.dtype != "float32" for t in ts) or y.size == 0 or any(t.is_variable for t in ts):
        return False            # (variables: state another node may write between a member and the root)
    if arity(node.op) == 1 and tuple(ts[0].shape) != tuple(y.shape):
        return False
    if node.op == "PRELU" and tuple(ts[0].shape) != tuple(y.shape):
        return False
    return ops.unsupported_reason(node, graph) is None


def chain_step(node: Node) -> dict:
    if node.op == "CAST":
        return dict(op="CAST")
    s = dict(op=node.op, **params(node))
    if TABLE[node.op].fused_act:
        s["act"] = act_code(node)
    return s


def _groups(graph: Graph) -> list[list[Node]]:
    """Members of each fusible group (program order), root last; only groups of 2 or more."""
    users, prod = graph.consumers(), graph.producers()
    viewed = {graph.storage(v) for v in graph.aliases} | set(graph.aliases)
    group: dict[int, list[Node]] = {}           # id(root) -> members
    for node in graph.nodes:
        if not fusible(graph, node):
            continue
        members = [node]
        y = graph.t(node.outputs[0])
        for tid in dict.fromkeys(node.inputs):
            p = prod.get(tid)
            if p is None or id(p) not in group or {id(u) for u in users.get(tid, [])} != {id(node)} \
                    or tid in graph.outputs or tid in viewed or tuple(graph.t(tid).shape) != tuple(y.shape):
                continue
            cand = group[id(p)] + members
            if len(external_inputs(graph, cand)) > MAX_INPUTS:
                continue
            del group[id(p)]
            members = cand
        group[id(node)] = sorted(members, key=graph.nodes.index)
    # a value several members read (z*z, |z| and sign(z) of one z, as a decomposed erf has): its group
    # joins theirs when all of its readers ended in one group (the value is computed once there)
    where = {id(m): r for r, ms in group.items() for m in ms}
    changed = True
    while changed:
        changed = False
        for r, ms in list(group.items()):
            tid = ms[-1].outputs[0]
            owners = {where.get(id(u)) for u in users.get(tid, [])}
            if len(owners) != 1 or None in owners or r in owners or tid in graph.outputs or tid in viewed:
                continue
            b = owners.pop()
            cand = ms + group[b]
            if tuple(graph.t(tid).shape) != tuple(graph.t(group[b][-1].outputs[0]).shape) \
                    or len(external_inputs(graph, cand)) > MAX_INPUTS:
                continue
            group[b] = sorted(cand, key=graph.nodes.index)
            where.update({id(m): b for m in ms})
            del group[r]
            changed = True
    return [m for m in group.values() if len(m) > 1]


def _inline_const(graph: Graph, tid: int) -> bool:
    v = scalar(graph, tid, "float32")
    if v is None or not np.isfinite(np.float32(v)):
        return False
    return graph.fp32_pinned is None or np.float32(np.float16(v)) == np.float32(v)


def external_inputs(graph: Graph, members: list[Node]) -> list[int]:
    made = {o for m in members for o in m.outputs}
    return list(dict.fromkeys(i for m in members for i in m.inputs if i not in made and not _inline_const(graph, i)))


def _stored_fp16(graph: Graph, tid: int, producer: Node, consumer: Node) -> bool:
    """Would the unfused program store intermediate `tid` as float16 (precision.assign_storage)?"""
    return graph.fp32_pinned is not None and graph.storage(tid) not in graph.fp32_pinned \
        and supports_storage16(template_of(producer)) and supports_storage16(template_of(consumer))


def fuse_elementwise(graph: Graph) -> None:
    for members in _groups(graph):
        root = members[-1]
        ext = external_inputs(graph, members)
        if not ext:
            continue
        index = {}
        steps = []
        pinned = graph.fp32_pinned
        for m in members:
            args = []
            for i in m.inputs:
                if i in index:
                    args.append(("t", index[i]))
                elif i in ext:
                    args.append(("x", ext.index(i)))
                else:
                    args.append(("c", float(np.asarray(graph.t(i).data).reshape(-1)[0])))
            s = chain_step(m)
            s["args"] = args
            o = m.outputs[0]
            if m is not root:
                s["fq"] = graph.t(o).fake_quant
                s["r16"] = all(_stored_fp16(graph, o, m, u) for u in members if o in u.inputs)
            index[o] = len(steps)
            steps.append(s)
        fused = Node(FUSED_OP, ext, [root.outputs[0]], attrs={"steps": steps, "fused": [m.op for m in members]},
                     index=root.index)
        if ops.unsupported_reason(fused, graph) is not None:      # (never expected: the members each checked)
            continue
        if pinned is not None:
            # a tensor the unfused program kept fp32 (a member's template without fp16 storage) stays fp32
            for m in members:
                if not supports_storage16(template_of(m)):
                    pinned.update(graph.storage(t) for t in list(m.inputs) + list(m.outputs) if t in ext
                                  or t == root.outputs[0])
        at = graph.nodes.index(root)
        graph.nodes[at] = fused
        for m in members[:-1]:
            graph.nodes.remove(m)


def fuse_reduce_prologue(graph: Graph) -> None:
    """MEAN / SUM / REDUCE_MAX / REDUCE_MIN / REDUCE_PROD whose input is made by an elementwise op or a
    fused chain (fuse_elementwise) used only there: one FUSED_REDUCE dispatch computes the chain per
    reduced element (reduce.comp PROLOGUE), e.g. SQUARED_DIFFERENCE + MEAN (a variance), SQUARE + SUM.
    The reduced tensor is never stored; its value is rounded as its store did (fake quant, fp16)."""
    rewrite(graph, [(REDUCE_PROLOGUE, _reduce_prologue)], variables=False)


def _prologue_fits(m, match) -> bool:
    g, r = m.g, match["r"]
    xt = r.inputs[0]
    viewed = {g.storage(v) for v in g.aliases} | set(g.aliases)
    return xt not in viewed and g.t(xt).dtype == "float32" and g.t(r.outputs[0]).dtype == "float32" \
        and ops.unsupported_reason(r, g) is None


REDUCE_PROLOGUE = Op(REDUCE_OPS, Op(None, name="p", uses=1), Val(), name="r", check=_prologue_fits,
                     where=lambda m, n: len(n.outputs) == 1)


def _reduce_prologue(graph: Graph, match):
    r, p = match["r"], match["p"]
    xt = r.inputs[0]
    if p.op == FUSED_OP:
        steps, ext, names = copy.deepcopy(p.attrs["steps"]), list(p.inputs), list(p.attrs["fused"])
    elif fusible(graph, p) and p.op != "CAST":
        ext = external_inputs(graph, [p])
        if not ext:
            return False
        steps = [dict(chain_step(p), args=[("x", ext.index(i)) if i in ext else
                                      ("c", float(np.asarray(graph.t(i).data).reshape(-1)[0])) for i in p.inputs])]
        names = [p.op]
    else:
        return False
    if any(graph.t(i).dtype != "float32" for i in ext):
        return False
    steps[-1]["fq"] = graph.t(xt).fake_quant
    steps[-1]["r16"] = _stored_fp16(graph, xt, p, r)
    fused = Node("FUSED_REDUCE", ext + [r.inputs[1]], list(r.outputs),
                 attrs=dict(r.attrs, steps=steps, reduce=r.op, x=xt, fused=names + [r.op]), index=r.index)
    if ops.unsupported_reason(fused, graph) is not None:
        return False
    if graph.fp32_pinned is not None and p.op != FUSED_OP and not supports_storage16(template_of(p)):
        graph.fp32_pinned.update(graph.storage(t) for t in ext)     # they stayed fp32 unfused
    graph.nodes[graph.nodes.index(r)] = fused
    graph.nodes.remove(p)
