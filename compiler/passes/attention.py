"""fuse_attention: scaled dot-product attention written as ops becomes one ATTENTION node
(ops/attention.py, shaders/attention.comp: one dispatch, flash-attention style, the score matrix never
stored).

Recognised by graph structure, never by names.  From every SOFTMAX (always over the last axis in
TFLite) of a float32 tensor, the pass walks back to a BATCH_MATMUL and forward to a second one:

    S = BATCH_MATMUL(Q, K)          Q [.., N, D] (or adj_x), K [.., M, D] with adj_y or [.., D, M] without
    S = S * c  |  S / c             any number, in any order with the ADDs (c: a scalar constant)
    S = S + bias  |  S - bias       bias: a float32 tensor (constant or runtime) broadcast to S's shape
    (RESHAPE / SQUEEZE / EXPAND_DIMS anywhere that keep the last axis, M)
    P = SOFTMAX(S, beta)            beta > 0
    O = BATCH_MATMUL(P, V)          V [.., M, DV] or adj_y [.., DV, M]; P's row count per batch is N

Each operand Q, K, V is read where it comes from: the data movement (RESHAPE / SQUEEZE / EXPAND_DIMS,
TRANSPOSE, SLICE, STRIDED_SLICE, SPLIT, SPLIT_V, UNPACK with constant parameters; BROADCAST_TO and
TILE of size-1 dims, a stride of 0: GQA's KV heads repeated for their query heads) and multiplications
/ divisions by a scalar constant that make it (a qkv head split, K's transpose, Q scaled before the
product, an LLM's KV cache [1, kv, KH, D] as [H, kv, D]) are composed into one strided view of the
source (`_View`: batch index terms, row and column strides, an offset), the longest such chain that
stays strided; the source may be a variable (the cache).  The kernel applies the scalars as the ops
did.  Those intermediates may have other readers (their nodes then stay; nodes left unread are
dropped).  The output is written through the single-use RESHAPE / TRANSPOSE chain that follows (a head
merge) the same way.  Every intermediate of the score chain must have no consumer outside the chain
and not be a graph output or variable; every tensor float32 without quantization; the shapes must line
up (a bias broadcasting only, both products sharing the batch and the N rows).  Anything else leaves the ops as they are.
"""
from __future__ import annotations

import numpy as np

from gpuc.compiler.ir import Graph, Node
from gpuc.compiler.ops.attention import wide
from gpuc.compiler.pattern import (Matcher, NoMatch, Op, act_free, ints, plain_f32, replace_nodes, rewrite,
                                           scalar)

ATTN_OP = "ATTENTION"
VIEWS = ("RESHAPE", "SQUEEZE", "EXPAND_DIMS")
MAX_BIAS = 3                 # bias / mask tensors added to the scores
MAX_TERMS = 8                # batch index terms of one operand's view
MAX_DV = 512                 # value width the kernel's registers hold (ops/attention.py)


def _f32(t) -> bool:
    return plain_f32(t, variables=False)


def _scalar(graph: Graph, tid: int):
    """The value of a float32 constant of one element, else None."""
    return scalar(graph, tid, "float32")


# --- strided views ---------------------------------------------------------------------------------
class _View:
    """A tensor as a strided view of a contiguous source: per logical dim, its atoms (size, stride) in
    row-major order (an empty list: a dim of size 1).  RESHAPE regroups atoms (splitting one where a
    dim boundary falls inside it), TRANSPOSE permutes the dims."""

    def __init__(self, shape):
        self.off = 0
        st, dims = 1, []
        for d in reversed(shape):
            dims.append([(int(d), st)] if d != 1 else [])
            st *= int(d)
        self.dims = dims[::-1]

    def transpose(self, perm):
        self.dims = [self.dims[p] for p in perm]

    def select(self, axis, start, count, step=1):
        """Elements start, start + step, ... (count of them) of dim `axis` (a SLICE / split)."""
        full = int(np.prod([s for s, _ in self.dims[axis]], dtype=np.int64)) if self.dims[axis] else 1
        if start == 0 and count == full and step == 1:
            return
        if step < 1 or count < 1 or start < 0 or start + (count - 1) * step >= full:
            raise NoMatch
        t = self.stride(axis)
        self.off += start * t
        self.dims[axis] = [(count, t * step)] if count > 1 else []

    def reshape(self, shape):
        atoms = [a for d in self.dims for a in d]
        dims = []
        for n in shape:
            n, dim, got = int(n), [], 1
            while got < n:
                if not atoms:
                    raise NoMatch
                s, t = atoms[0]
                need = n // got
                if n % got:
                    raise NoMatch
                if s <= need and need % s == 0:
                    dim.append(atoms.pop(0))
                    got *= s
                elif s % need == 0:                      # split the atom: outer part here, inner stays
                    dim.append((need, t * (s // need)))
                    atoms[0] = (s // need, t)
                    got *= need
                else:
                    raise NoMatch
            dims.append(dim)
        if atoms:
            raise NoMatch
        self.dims = dims

    def broadcast(self, shape):
        """BROADCAST_TO / TILE of size-1 dims: right-aligned against `shape`, a dim of size 1 that grows to n
        reads its one element n times (an atom of stride 0)."""
        if len(shape) < len(self.dims):
            raise NoMatch
        self.dims = [[] for _ in range(len(shape) - len(self.dims))] + self.dims
        for a, n in enumerate(shape):
            if int(n) != 1 and not self.dims[a]:
                self.dims[a] = [(int(n), 0)]

    def stride(self, axis):
        """The one stride of a dim (its atoms merged), 0 for a dim of size 1; NoMatch if not strided."""
        atoms = self.dims[axis]
        if not atoms:
            return 0
        for (s0, t0), (s1, t1) in zip(atoms, atoms[1:]):
            if t0 != s1 * t1:
                raise NoMatch
        return atoms[-1][1]

    def batch_terms(self, batch_shape):
        """(div, mod, stride) triples: the offset of output batch b is sum(((b // div) % mod) * stride),
        this view's leading dims (all but the last two) broadcast against `batch_shape`."""
        mine = self.dims[:-2]
        if len(mine) > len(batch_shape):
            if any(self.dims[i] for i in range(len(mine) - len(batch_shape))):
                raise NoMatch
            mine = mine[len(mine) - len(batch_shape):]
        mine = [[]] * (len(batch_shape) - len(mine)) + list(mine)
        terms, p = [], 1
        for atoms, n in zip(reversed(mine), reversed(batch_shape)):
            size = int(np.prod([s for s, _ in atoms], dtype=np.int64)) if atoms else 1
            if size not in (1, n):
                raise NoMatch
            inner = 1
            for s, t in reversed(atoms if size == n else []):
                terms.append((p * inner, s, t))
                inner *= s
            p *= int(n)
        merged = []                                      # adjacent terms that are one stride
        for d, m, t in terms:
            if t == 0:                                   # a broadcast: every batch reads the same
                continue
            if merged and merged[-1][0] * merged[-1][1] == d and merged[-1][2] * merged[-1][1] == t:
                d0, m0, t0 = merged.pop()
                merged.append((d0, m0 * m, t0))
            else:
                merged.append((d, m, t))
        if len(merged) > MAX_TERMS:
            raise NoMatch
        return merged


def _bias_terms(bshape, shape):
    """Row terms (over the flat row index of `shape`[:-1]) and the column stride of a tensor of shape
    `bshape` broadcast to `shape` (its last axis is the key axis)."""
    if len(bshape) > len(shape):
        if any(d != 1 for d in bshape[:len(bshape) - len(shape)]):
            raise NoMatch
        bshape = bshape[len(bshape) - len(shape):]
    bs = [1] * (len(shape) - len(bshape)) + [int(d) for d in bshape]
    if any(b not in (1, s) for b, s in zip(bs, shape)):
        raise NoMatch
    st, acc = [], 1
    for d in reversed(bs):
        st.append(acc)
        acc *= d
    st = st[::-1]
    terms, p = [], 1
    for a in range(len(shape) - 2, -1, -1):
        if bs[a] != 1:
            terms.append((p, int(shape[a]), st[a]))
        p *= int(shape[a])
    return terms, (st[-1] if bs[-1] != 1 else 0)


# --- matching --------------------------------------------------------------------------------------
def _data_input(g: Graph, node: Node) -> int:
    """The tensor input of an operand-chain node (a MUL's scalar may come first, SPLIT's axis does)."""
    if node.op == "MUL" and _scalar(g, node.inputs[0]) is not None and _scalar(g, node.inputs[1]) is None:
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


def _apply(g: Graph, v: _View, node: Node, out: int, steps: list) -> None:
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
        c = _scalar(g, node.inputs[1])
        steps.append((op, c if c is not None else _scalar(g, node.inputs[0])))
    if [int(np.prod([s for s, _ in d], dtype=np.int64)) if d else 1 for d in v.dims] != [int(d) for d in y.shape]:
        raise NoMatch


MOVES = VIEWS + ("TRANSPOSE", "SLICE", "STRIDED_SLICE", "SPLIT", "SPLIT_V", "UNPACK", "BROADCAST_TO", "TILE")


def _operand(ctx: Matcher, tid: int, row_axis: int, col_axis: int, batch_shape):
    """How the kernel reads matmul operand `tid`: dict(src, off, terms, sr, sc, steps) and the nodes
    read through.  Follows the longest chain of data movement (views, TRANSPOSE, slices and splits
    with constant parameters) and multiplications / divisions by a scalar constant ending in `tid`
    whose composed view is strided; intermediates may have other consumers (those nodes stay)."""
    g, chain, cur = ctx.g, [], tid
    while cur in ctx.prod and len(chain) < 16:
        p = ctx.prod[cur]
        if not p.inputs or any(i < 0 for i in p.inputs) or not plain_f32(g.t(_data_input(g, p))) \
                or not _f32(g.t(cur)):                   # a source may be a variable (a KV cache)
            break
        if p.op in MOVES and _const_inputs(g, p):
            pass
        elif p.op in ("MUL", "DIV") and len(p.inputs) == 2 and act_free(p) \
                and g.t(_data_input(g, p)).shape == g.t(cur).shape \
                and _scalar(g, p.inputs[1] if _data_input(g, p) == p.inputs[0] else p.inputs[0]) is not None \
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
            v, steps = _View(g.t(src).shape), []
            for node, out in links:
                _apply(g, v, node, out, steps)
            r = len(v.dims)
            return dict(src=src, off=v.off, terms=v.batch_terms(batch_shape), sr=v.stride(row_axis % r),
                        sc=v.stride(col_axis % r), steps=steps), [n for n, _ in links]
        except NoMatch:
            continue
    raise NoMatch


def _output(ctx: Matcher, y: int, batch_shape):
    """Where the kernel writes: the tensor made from `y` by single-use RESHAPE / TRANSPOSE (a head
    merge), as dict(dst, terms, sr, sc) with the nodes written through, the longest chain that gives a
    strided view; `y` itself when none."""
    g, chain, cur = ctx.g, [], y
    while ctx.single_use(cur):
        u = ctx.users[cur][0]
        if u.op not in VIEWS + ("TRANSPOSE",) or u.inputs[0] != cur or len(u.outputs) != 1 \
                or not _const_inputs(g, u) or not _f32(g.t(u.outputs[0])):
            break
        chain.append(u)
        cur = u.outputs[0]
    for stop in range(len(chain), -1, -1):
        nodes = chain[:stop]
        dst = nodes[-1].outputs[0] if nodes else y
        try:
            v = _View(g.t(dst).shape)
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


def _score_chain(ctx: Matcher, cur: int, m: int):
    """Walk back from the softmax input to the first BATCH_MATMUL: (matmul node, steps in order, nodes)."""
    g = ctx.g
    if not ctx.single_use(cur) or cur not in ctx.prod or not _f32(g.t(cur)):
        raise NoMatch
    p, out = ctx.prod[cur], g.t(cur)
    if len(p.outputs) != 1:
        raise NoMatch
    if p.op == "BATCH_MATMUL":
        return p, [], []
    if p.op in VIEWS:
        if not out.shape or out.shape[-1] != m or g.t(p.inputs[0]).shape[-1:] != (m,):
            raise NoMatch
        mm, steps, nodes = _score_chain(ctx, p.inputs[0], m)
        return mm, steps, nodes + [p]
    if p.op not in ("MUL", "DIV", "ADD", "SUB") or len(p.inputs) != 2 or not act_free(p) \
            or any(i < 0 for i in p.inputs):
        raise NoMatch
    a, b = p.inputs
    for chain_in, other in ([(a, b)] if p.op in ("DIV", "SUB") else [(a, b), (b, a)]):
        if g.t(chain_in).size != out.size or other == chain_in:      # the chain side never broadcasts
            continue
        if p.op in ("MUL", "DIV"):
            c = _scalar(g, other)
            if c is None:
                continue
            step = (p.op, c)
        else:
            bt = g.t(other)
            if bt.dtype != "float32" or bt.quant is not None or bt.fake_quant is not None:
                continue
            try:
                terms, sj = _bias_terms(bt.shape, out.shape)
            except NoMatch:
                continue
            step = (p.op, other, terms, sj)
        try:
            mm, steps, nodes = _score_chain(ctx, chain_in, m)
        except NoMatch:
            continue
        return mm, steps + [step], nodes + [p]
    raise NoMatch


# Measured on the H100 (benchmarks/archive/results/attention-h100-2026-11-24.md, GPU us of one attention, fused vs
# unfused): 49 keys x head dim 32 3.7x faster, 197 x 64 1.35x, 1500 x 64 1.0x, but 577 x 80 0.77x and
# 1024 x 128 0.40x.  That was attention.comp (K/V tiles of 32 keys, no tensor cores), which loses to the
# two tiled products with long key sequences and wide heads: those it would run stay unfused.  The
# shapes attention_wide.comp takes (ops/attention.py `wide`: >= 256 keys, >= 64 query rows, heads up to
# 256 wide; 64-key tiles, 4 x 4 register blocks, masked tiles skipped) fuse at any head width: LLM prefill
# (512 rows, 1024 keys of the cache, half of them masked on average).
LONG_KEYS, WIDE_HEAD = 512, 64


def worthwhile(n: int, m: int, d: int, dv: int) -> bool:
    """Whether the fused kernel beats the unfused chain: n query rows, m keys, head dims d (scores) and dv
    (values)."""
    return m < LONG_KEYS or d <= WIDE_HEAD or wide(n, m, d, dv)


def _match(ctx: Matcher, sm: Node):
    g = ctx.g
    if len(sm.inputs) != 1 or len(sm.outputs) != 1:
        raise NoMatch
    x, p_t = g.t(sm.inputs[0]), g.t(sm.outputs[0])
    if not x.shape or not _f32(x) or not _f32(p_t) or x.shape != p_t.shape:
        raise NoMatch
    beta = float(sm.attrs.get("beta", 1.0))
    if not (np.isfinite(beta) and beta > 0):
        raise NoMatch
    m = int(x.shape[-1])
    mm1, steps, score_nodes = _score_chain(ctx, sm.inputs[0], m)
    # forward: views to the second product
    cur, p_nodes = sm.outputs[0], []
    while True:
        if not ctx.single_use(cur):
            raise NoMatch
        u = ctx.users[cur][0]
        if u.op in VIEWS and len(u.outputs) == 1 and g.t(u.outputs[0]).shape[-1:] == (m,) \
                and _f32(g.t(u.outputs[0])):
            p_nodes.append(u)
            cur = u.outputs[0]
            continue
        if u.op == "BATCH_MATMUL" and len(u.inputs) == 2 and u.inputs[0] == cur and u.inputs[1] != cur:
            mm2 = u
            break
        raise NoMatch
    for mm in (mm1, mm2):
        if any(i < 0 for i in mm.inputs) or any(not _f32(g.t(t)) and not (g.t(t).is_const and g.t(t).dtype == "float32"
                                                                         and g.t(t).quant is None)
                                               for t in list(mm.inputs) + list(mm.outputs)):
            raise NoMatch
    if mm2.attrs.get("adj_x", False):
        raise NoMatch
    s_t, y = g.t(mm1.outputs[0]), g.t(mm2.outputs[0])
    if len(s_t.shape) < 2 or s_t.shape[-1] != m:
        raise NoMatch
    n = int(s_t.shape[-2])
    pm = g.t(mm2.inputs[0])
    if len(pm.shape) < 2 or pm.shape[-2] != n or pm.shape[-1] != m or len(y.shape) < 2 or y.shape[-2] != n:
        raise NoMatch
    batch1, batch2 = [int(d) for d in s_t.shape[:-2]], [int(d) for d in y.shape[:-2]]
    nb = int(np.prod(batch1, dtype=np.int64))
    if nb != int(np.prod(batch2, dtype=np.int64)) or nb != int(np.prod(pm.shape[:-2], dtype=np.int64)) \
            or nb * n == 0:
        raise NoMatch
    qa, ka = g.t(mm1.inputs[0]), g.t(mm1.inputs[1])
    adj_x, adj_y = bool(mm1.attrs.get("adj_x", False)), bool(mm1.attrs.get("adj_y", False))
    d = int(qa.shape[-2] if adj_x else qa.shape[-1])
    if (ka.shape[-1] if adj_y else ka.shape[-2]) != d or (ka.shape[-2] if adj_y else ka.shape[-1]) != m \
            or (qa.shape[-1] if adj_x else qa.shape[-2]) != n or d < 1:
        raise NoMatch
    va = g.t(mm2.inputs[1])
    adj_v = bool(mm2.attrs.get("adj_y", False))
    dv = int(va.shape[-2] if adj_v else va.shape[-1])
    if (va.shape[-1] if adj_v else va.shape[-2]) != m or y.shape[-1] != dv or not 1 <= dv <= MAX_DV:
        raise NoMatch
    if not worthwhile(n, m, d, dv):
        raise NoMatch
    q, q_nodes = _operand(ctx, mm1.inputs[0], -1 if adj_x else -2, -2 if adj_x else -1, batch1)
    k, k_nodes = _operand(ctx, mm1.inputs[1], -2 if adj_y else -1, -1 if adj_y else -2, batch1)
    v, v_nodes = _operand(ctx, mm2.inputs[1], -1 if adj_v else -2, -2 if adj_v else -1, batch2)
    o, o_nodes = _output(ctx, mm2.outputs[0], batch2)
    biases = [s[1] for s in steps if s[0] in ("ADD", "SUB")]
    if len(biases) > MAX_BIAS:
        raise NoMatch
    read = []
    for ns in (q_nodes, k_nodes, v_nodes):
        read += [nd for nd in ns if all(nd is not a for a in read)]
    return dict(n=n, m=m, d=d, dv=dv, batch=nb, beta=beta, q=q, k=k, v=v, o=o, steps=steps, biases=biases,
                at=o_nodes[-1] if o_nodes else mm2, nodes=[mm1, *score_nodes, sm, *p_nodes, mm2, *o_nodes],
                read=read)


def fuse_attention(graph: Graph) -> None:
    """Replace each attention chain by one ATTENTION node (module docstring)."""
    rewrite(graph, [(Op("SOFTMAX", name="sm"), _fuse)])


def _fuse(graph: Graph, match):
    try:
        plan = _match(match.matcher, match["sm"])
    except NoMatch:
        return False
    steps, bi = [], 0
    for s in plan["steps"]:
        if s[0] in ("ADD", "SUB"):
            steps.append(dict(op=s[0], bias=bi, terms=s[2], sj=s[3]))
            bi += 1
        else:
            steps.append(dict(op=s[0], value=s[1]))
    attrs = dict(n=plan["n"], m=plan["m"], d=plan["d"], dv=plan["dv"], batch=plan["batch"], beta=plan["beta"],
                 steps=steps, fused=[nd.op for nd in graph.nodes if any(nd is a for a in plan["nodes"])])
    for name in ("q", "k", "v", "o"):
        o = plan[name]
        attrs[name] = dict(off=o.get("off", 0), terms=o["terms"], sr=o["sr"], sc=o["sc"], steps=o.get("steps", []))
    fused = Node(ATTN_OP, [plan["q"]["src"], plan["k"]["src"], plan["v"]["src"], *plan["biases"]],
                 [plan["o"]["dst"]], attrs=attrs, index=plan["at"].index)
    replace_nodes(graph, plan["at"], fused, plan["nodes"])
    graph.remove_unread(plan["read"])

