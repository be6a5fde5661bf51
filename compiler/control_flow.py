"""WHILE and IF: their subgraphs are lowered into the main program, with jumps between segments.

Each subgraph a WHILE / IF calls is prepared on its own (prepare.prepare_graph: passes, placement and
clustering, once per subgraph) and then merged into the main graph's tensor space at the call site
(fresh tensors per call).  Static shapes only: every loop variable keeps its shape and dtype.

    WHILE(x) -> y:   y <- x;  L: cond(y) -> c;  JUMP_IF_FALSE c -> END;  body(y) -> b;  y <- b;  JUMP L;  END:
    IF(c, x) -> y:   JUMP_IF_FALSE c -> ELSE;  then(x) -> t;  y <- t;  JUMP END;  ELSE: else(x) -> e;  y <- e;  END:
    STABLEHLO_CASE(i, x) -> y:  per branch k < n-1: f = (i == k); JUMP_IF_FALSE f -> NEXT; branch_k(x); y <- ..;
                     JUMP END; NEXT: ...  the last branch (also every out-of-range index);  END:

The runtime reads the condition back on the host (runtime/program.py) and resubmits the recorded
GPU segments of the body.  Loop variables are ordinary arena tensors: the linear lifetimes of the
memory planner already cover the whole loop for them (written before it, read by cond at its top and
written by the copy at its bottom); everything else a cond / body computes lives inside one pass.
Body results that are loop variables themselves are copied through temporaries (a parallel assignment).
"""
from __future__ import annotations

import copy
import dataclasses

from gpuc.compiler.ir import Graph, Jump, Label, Node
from gpuc.compiler.ops import case_branch
from gpuc.compiler.ops.math import words
from gpuc.compiler.ops.shape import copy_kernel
from gpuc.compiler.passes.variables import bind_variable
from gpuc.errors import UnsupportedError

CONTROL_OPS = ("WHILE", "IF", case_branch.OP)


def _subgraph(ctx, node: Node, attr: str) -> int:
    gi = int(node.attrs.get(attr, -1))
    if not 0 < gi < len(ctx.model.subgraphs):
        raise UnsupportedError(f"{node.label()}: {attr} {gi} is not a subgraph of this model "
                               f"({len(ctx.model.subgraphs)} subgraphs)")
    return gi


def check_subgraph(g: Graph) -> None:
    """What a subgraph must be before it is prepared (prepare.Lowering.subgraph)."""
    for tid in g.inputs + g.outputs:
        t = g.t(tid)
        if t.quant is not None and t.dtype in ("int8", "uint8", "int16") and not t.is_const:
            raise UnsupportedError(f"subgraph {g.name!r}: quantized {t.dtype} tensor {t.name!r} at its boundary "
                                   f"(quantized control flow is not supported)")


def _merge(graph: Graph, sub: Graph, bind: dict, cpu: dict):
    """Copy sub's nodes into graph; bind: sub tensor -> graph tensor (its inputs).  Returns
    (nodes, cpu placement of the new nodes, sub tensor -> graph tensor)."""
    idmap = dict(bind)
    for t in sub.tensors:
        if t.id in idmap:
            continue
        new = len(graph.tensors)                  # a copy with every declared field (fake_quant, ...)
        graph.tensors.append(dataclasses.replace(t, id=new, name=f"{sub.name}/{t.name}"))
        idmap[t.id] = new
    for view, base in sub.aliases.items():
        if view not in bind:
            graph.aliases[idmap[view]] = idmap[base]
    nodes, placed = [], {}
    for n in sub.nodes:
        res = n.epilogue.residual
        m = Node(n.op, [idmap[i] if i >= 0 else -1 for i in n.inputs], [idmap[o] for o in n.outputs],
                 copy.copy(n.attrs), n.version, n.index,
                 dataclasses.replace(n.epilogue, residual=None if res is None else idmap[res],
                                     chain_inputs=[(idmap[t], shape) for t, shape in n.epilogue.chain_inputs]))
        nodes.append(m)
        if id(n) in cpu:
            placed[id(m)] = cpu[id(n)]
    return nodes, placed, idmap


def _copy(graph: Graph, src: int, dst: int, label: str):
    s, d = words(graph, src), words(graph, dst)
    n = graph.t(d).size
    return copy_kernel(s, d, [n], [1], [1], label=label)


def _check_vars(node: Node, graph: Graph, what: str, tids: list, ref: list):
    for i, (a, b) in enumerate(zip(tids, ref)):
        ta, tb = graph.t(a), graph.t(b)
        if ta.shape != tb.shape or ta.dtype != tb.dtype:
            raise UnsupportedError(f"{node.label()}: {what} {i} is {ta.dtype}{list(ta.shape)} but the op's tensor is "
                                   f"{tb.dtype}{list(tb.shape)}; gpuc needs static shapes (loop variables keep "
                                   f"their shape and dtype)")


def _call(ctx, graph: Graph, node: Node, gi: int, args: list, n_out: int | None):
    """Lower subgraph gi called with graph tensors `args`: (program items, its output tensors)."""
    sub, cpu = ctx.subgraph(gi)
    if len(sub.inputs) != len(args) or (n_out is not None and len(sub.outputs) != n_out):
        raise UnsupportedError(f"{node.label()}: subgraph {sub.name!r} takes {len(sub.inputs)} inputs and gives "
                               f"{len(sub.outputs)} outputs; the op passes {len(args)} and expects {n_out}")
    for i, (s, a) in enumerate(zip(sub.inputs, args)):
        ts, ta = sub.t(s), graph.t(a)
        if ts.shape != ta.shape or ts.dtype != ta.dtype:
            raise UnsupportedError(f"{node.label()}: subgraph {sub.name!r} input {i} is {ts.dtype}{list(ts.shape)}, "
                                   f"the op passes {ta.dtype}{list(ta.shape)}; gpuc needs static shapes")
    bind = dict(zip(sub.inputs, args))
    for v, key in sub.var_keys.items():
        bind[v] = bind_variable(ctx.model, graph, key, sub.t(v))
    nodes, placed, idmap = _merge(graph, sub, bind, cpu)
    return ctx.lower(graph, nodes, placed), [idmap[o] for o in sub.outputs]


def _assign(graph: Graph, node: Node, dsts: list, srcs: list, why: str):
    """dsts <- srcs as a parallel assignment (srcs may be dsts themselves)."""
    items, staged = [], []
    st = graph.storage
    dset = {st(d) for d in dsts}
    for d, s in zip(dsts, srcs):
        if st(s) in dset and st(s) != st(d):
            tmp = graph.add_tensor(f"{graph.t(d).name}#next", graph.t(d).shape, graph.t(d).dtype)
            items.append(_copy(graph, s, tmp, f"{node.label()} {why}"))
            staged.append((d, tmp))
        else:
            staged.append((d, s))
    items += [_copy(graph, s, d, f"{node.label()} {why}") for d, s in staged if st(s) != st(d)]
    return items


def lower_control(node: Node, graph: Graph, ctx) -> list:
    """WHILE / IF `node` of `graph` as program items; ctx: the model's prepare.Lowering."""
    if node.op == "WHILE":
        return _lower_while(node, graph, ctx)
    if node.op == case_branch.OP:
        return _lower_case(node, graph, ctx)
    return _lower_if(node, graph, ctx)


def _lower_while(node: Node, graph: Graph, ctx) -> list:
    if len(node.inputs) != len(node.outputs) or any(t < 0 for t in node.inputs + node.outputs):
        raise UnsupportedError(f"{node.label()}: needs as many outputs as inputs ({len(node.inputs)} vs "
                               f"{len(node.outputs)}), none absent")
    _check_vars(node, graph, "output", node.outputs, node.inputs)
    ci, bi = _subgraph(ctx, node, "cond_subgraph_index"), _subgraph(ctx, node, "body_subgraph_index")
    ys = list(node.outputs)
    top, end = Label(), Label()
    items = _assign(graph, node, ys, list(node.inputs), "loop-in")
    items.append(top)
    cond_items, (c,) = _call_checked(ctx, graph, node, ci, ys, 1)
    items += cond_items
    items.append(Jump(end, cond=c))
    body_items, outs = _call_checked(ctx, graph, node, bi, ys, len(ys))
    _check_vars(node, graph, "body output", outs, ys)
    items += body_items
    items += _assign(graph, node, ys, outs, "loop-carry")
    items += [Jump(top), end]
    return items


def _call_checked(ctx, graph, node, gi, args, n_out):
    items, outs = _call(ctx, graph, node, gi, args, n_out)
    if n_out == 1 and graph.t(outs[0]).size < 1:
        raise UnsupportedError(f"{node.label()}: condition subgraph gives an empty tensor")
    return items, outs


def _lower_if(node: Node, graph: Graph, ctx) -> list:
    if not node.inputs or node.inputs[0] < 0 or any(t < 0 for t in node.inputs[1:] + node.outputs):
        raise UnsupportedError(f"{node.label()}: needs a condition input and no absent tensors")
    ti, ei = _subgraph(ctx, node, "then_subgraph_index"), _subgraph(ctx, node, "else_subgraph_index")
    args, ys = list(node.inputs[1:]), list(node.outputs)
    other, end = Label(), Label()
    items = [Jump(other, cond=node.inputs[0])]
    for gi, last in ((ti, False), (ei, True)):
        branch, outs = _call(ctx, graph, node, gi, args, len(ys))
        _check_vars(node, graph, "branch output", outs, ys)
        items += branch + _assign(graph, node, ys, outs, "result")
        items += [end] if last else [Jump(end), other]
    return items


def _lower_case(node: Node, graph: Graph, ctx) -> list:
    if not node.inputs or node.inputs[0] < 0 or any(t < 0 for t in node.inputs[1:] + node.outputs):
        raise UnsupportedError(f"{node.label()}: needs an index input and no absent tensors")
    gis = case_branch.branches(node, len(ctx.model.subgraphs))
    args, ys = list(node.inputs[1:]), list(node.outputs)
    end, items = Label(), []
    for k, gi in enumerate(gis):
        last = k == len(gis) - 1
        if not last:
            nxt = Label()
            test, flag = case_branch.branch_flag(node, graph, k)
            items += ctx.lower(graph, [test], {}) + [Jump(nxt, cond=flag)]
        branch, outs = _call(ctx, graph, node, gi, args, len(ys))
        _check_vars(node, graph, "branch output", outs, ys)
        items += branch + _assign(graph, node, ys, outs, "result")
        items += [end] if last else [Jump(end), nxt]
    return items
