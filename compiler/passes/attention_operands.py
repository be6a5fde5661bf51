"""How the fused attention kernel (passes/attention.py) reads its operands and writes its output: the
chain of data movement and scalar scalings around a BATCH_MATMUL operand composed into one strided view
of the source (strided_view.StridedView), the longest chain that stays strided."""
from __future__ import annotations

import numpy as np

from gpuc.compiler.ir import Graph, Node
from gpuc.compiler.passes.strided_view import StridedView
from gpuc.compiler.pattern import Matcher, NoMatch, act_free, ints, plain_f32, scalar

VIEWS = ("RESHAPE", "SQUEEZE", "EXPAND_DIMS")


def is_f32(t) -> bool:
    """A float32 tensor without quantization that is not a variable."""
    return plain_f32(t, variables=False)


def f32_scalar(graph: Graph, tid: int):
    """The value of a float32 constant of one element, else None."""
    return scalar(graph, tid, "float32")


def _data_input(g: Graph, node: Node) -> int:
    """The tensor input of an operand-chain node (a MUL's scalar may come first, SPLIT's axis does)."""
    if node.op == "MUL" and f32_scalar(g, node.inputs[0]) is not None and f32_scalar(g, node.inputs[1]) is None:
        return node.inputs[1]
    if node.op == "SPLIT":
        return node.inputs[1]
    return node.inputs[0]


def _ints(g: Graph, tid: int):
    v = ints(g, tid)
    if v is None:
        raise NoMatch
    return v


def _const_inputs(g: Graph, node: Node) -> bool:
    return all(g.t(i).is_const for i in node.inputs if i >= 0 and i != _data_input(g, node))


def _apply(g: Graph, v: StridedView, node: Node, out: int, steps: list) -> None:
    """`v` (the view of node's data input) becomes the view of its output `out`."""
    x, y = g.t(_data_input(g, node)), g.t(out)
    r = len(x.shape)
    op = node.op
    if op == "TRANSPOSE":
        perm = [p % r if r else 0 for p in _ints(g, node.inputs[1])]
        if sorted(perm) != list(range(r)):
            raise NoMatch
        v.transpose(perm)
    elif op == "SLICE":
        begin, size = _ints(g, node.inputs[1]), _ints(g, node.inputs[2])
        if len(begin) != r or len(size) != r:
            raise NoMatch
        for a, (b0, n) in enumerate(zip(begin, size)):
            v.select(a, b0, x.shape[a] - b0 if n == -1 else n)
    elif op == "STRIDED_SLICE":
        from gpuc.compiler.ops.strided_slice import strided_slice_dims
        at = node.attrs
        try:
            plan, _ = strided_slice_dims(x.shape, _ints(g, node.inputs[1]), _ints(g, node.inputs[2]),
                                         _ints(g, node.inputs[3]), *(int(at.get(k, 0) or 0) for k in (
                                             "begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask",
                                             "shrink_axis_mask")), bool(at.get("offset", False)))
        except ValueError:
            raise NoMatch from None
        if any(d is not None and d != i - sum(p[0] is None for p in plan[:i]) for i, (d, *_r) in enumerate(plan)):
            raise NoMatch
        for d, start, count, step in plan:
            if d is not None:
                v.select(d, start, count, step)
        v.reshape(y.shape)
    elif op in ("SPLIT", "SPLIT_V", "UNPACK"):
        k = node.outputs.index(out)
        if op == "UNPACK":
            axis = int(node.attrs.get("axis", 0)) % r
            start, count = k, 1
        else:
            axis = _ints(g, node.inputs[0 if op == "SPLIT" else 2])[0] % r
            count = int(y.shape[axis])
            start = k * count if op == "SPLIT" else sum(int(g.t(o).shape[axis]) for o in node.outputs[:k])
        v.select(axis, start, count)
        v.reshape(y.shape)
    elif op in VIEWS:
        v.reshape(y.shape)
    elif op == "BROADCAST_TO":
        v.broadcast(y.shape)
    elif op == "TILE":
        reps = _ints(g, node.inputs[1])
        if len(reps) != r or any(k != 1 and x.shape[a] != 1 for a, k in enumerate(reps)):
            raise NoMatch                                # only the repeats of a size-1 dim are a view
        v.broadcast(y.shape)
    else:                                                # MUL / DIV by a scalar
        c = f32_scalar(g, node.inputs[1])
        steps.append((op, c if c is not None else f32_scalar(g, node.inputs[0])))
    if [int(np.prod([s for s, _ in d], dtype=np.int64)) if d else 1 for d in v.dims] != [int(d) for d in y.shape]:
        raise NoMatch


MOVES = VIEWS + ("TRANSPOSE", "SLICE", "STRIDED_SLICE", "SPLIT", "SPLIT_V", "UNPACK", "BROADCAST_TO", "TILE")


def operand(ctx: Matcher, tid: int, row_axis: int, col_axis: int, batch_shape):
    """How the kernel reads matmul operand `tid`: dict(src, off, terms, sr, sc, steps) and the nodes
    read through.  Follows the longest chain of data movement (views, TRANSPOSE, slices and splits
    with constant parameters) and multiplications / divisions by a scalar constant ending in `tid`
    whose composed view is strided; intermediates may have other consumers (those nodes stay)."""
    g, chain, cur = ctx.g, [], tid
    while cur in ctx.prod and len(chain) < 16:
        p = ctx.prod[cur]
        if not p.inputs or any(i < 0 for i in p.inputs) or not plain_f32(g.t(_data_input(g, p))) \
                or not is_f32(g.t(cur)):                    # a source may be a variable (a KV cache)
            break
        if p.op in MOVES and _const_inputs(g, p):
            pass
        elif p.op in ("MUL", "DIV") and len(p.inputs) == 2 and act_free(p) \
                and g.t(_data_input(g, p)).shape == g.t(cur).shape \
                and f32_scalar(g, p.inputs[1] if _data_input(g, p) == p.inputs[0] else p.inputs[0]) is not None \
                and (p.op == "MUL" or _data_input(g, p) == p.inputs[0]):
            pass
        else:
            break
        chain.append((p, cur))
        cur = _data_input(g, p)
    chain.reverse()                                      # source first
    for start in range(len(chain) + 1):
        links = chain[start:]
        src = _data_input(g, links[0][0]) if links else tid
        try:
            v, steps = StridedView(g.t(src).shape), []
            for node, out in links:
                _apply(g, v, node, out, steps)
            r = len(v.dims)
            return dict(src=src, off=v.off, terms=v.batch_terms(batch_shape), sr=v.stride(row_axis % r),
                        sc=v.stride(col_axis % r), steps=steps), [n for n, _ in links]
        except NoMatch:
            continue
    raise NoMatch


def output(ctx: Matcher, y: int, batch_shape):
    """Where the kernel writes: the tensor made from `y` by single-use RESHAPE / TRANSPOSE (a head
    merge), as dict(dst, terms, sr, sc) with the nodes written through, the longest chain that gives a
    strided view; `y` itself when none."""
    g, chain, cur = ctx.g, [], y
    while ctx.single_use(cur):
        u = ctx.users[cur][0]
        if u.op not in VIEWS + ("TRANSPOSE",) or u.inputs[0] != cur or len(u.outputs) != 1 \
                or not _const_inputs(g, u) or not is_f32(g.t(u.outputs[0])):
            break
        chain.append(u)
        cur = u.outputs[0]
    for stop in range(len(chain), -1, -1):
        nodes = chain[:stop]
        dst = nodes[-1].outputs[0] if nodes else y
        try:
            v = StridedView(g.t(dst).shape)
            for node in reversed(nodes):                 # from the written tensor back to y
                x = g.t(node.inputs[0])
                if node.op == "TRANSPOSE":
                    r = len(x.shape)
                    perm = [p % r if r else 0 for p in _ints(g, node.inputs[1])]
                    if sorted(perm) != list(range(r)):
                        raise NoMatch
                    inv = [perm.index(i) for i in range(r)]
                    v.transpose(inv)
                else:
                    v.reshape(x.shape)
                if [int(np.prod([s for s, _ in d], dtype=np.int64)) if d else 1 for d in v.dims] \
                        != [int(d) for d in x.shape]:
                    raise NoMatch
            r = len(v.dims)
            return dict(dst=dst, terms=v.batch_terms(batch_shape), sr=v.stride(r - 2), sc=v.stride(r - 1)), nodes
        except NoMatch:
            continue
    raise NoMatch
