"""The attention chain fuse_attention (passes/attention.py) looks for, matched from a SOFTMAX: the score
chain back to the first BATCH_MATMUL, the second product, the shapes lining up, and whether fusing pays
(`worthwhile`).  `match_attention` gives the plan of one ATTENTION node or raises pattern.NoMatch."""
from __future__ import annotations

import numpy as np

from gpuc.compiler.ir import Node
from gpuc.compiler.ops.attention import wide
from gpuc.compiler.passes.attention_operands import VIEWS, f32_scalar, is_f32, operand, output
from gpuc.compiler.passes.strided_view import bias_terms
from gpuc.compiler.pattern import Matcher, NoMatch, act_free

MAX_BIAS = 3                 # bias / mask tensors added to the scores
MAX_DV = 512                 # value width the kernel's registers hold (ops/attention.py)


def _score_chain(ctx: Matcher, cur: int, m: int):
    """Walk back from the softmax input to the first BATCH_MATMUL: (matmul node, steps in order, nodes)."""
    g = ctx.g
    if not ctx.single_use(cur) or cur not in ctx.prod or not is_f32(g.t(cur)):
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
            c = f32_scalar(g, other)
            if c is None:
                continue
            step = (p.op, c)
        else:
            bt = g.t(other)
            if bt.dtype != "float32" or bt.quant is not None or bt.fake_quant is not None:
                continue
            try:
                terms, sj = bias_terms(bt.shape, out.shape)
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


def match_attention(ctx: Matcher, sm: Node):
    g = ctx.g
    if len(sm.inputs) != 1 or len(sm.outputs) != 1:
        raise NoMatch
    x, p_t = g.t(sm.inputs[0]), g.t(sm.outputs[0])
    if not x.shape or not is_f32(x) or not is_f32(p_t) or x.shape != p_t.shape:
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
                and is_f32(g.t(u.outputs[0])):
            p_nodes.append(u)
            cur = u.outputs[0]
            continue
        if u.op == "BATCH_MATMUL" and len(u.inputs) == 2 and u.inputs[0] == cur and u.inputs[1] != cur:
            mm2 = u
            break
        raise NoMatch
    for mm in (mm1, mm2):
        if any(i < 0 for i in mm.inputs) or any(not is_f32(g.t(t)) and not (g.t(t).is_const
                                                                          and g.t(t).dtype == "float32"
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
    q, q_nodes = operand(ctx, mm1.inputs[0], -1 if adj_x else -2, -2 if adj_x else -1, batch1)
    k, k_nodes = operand(ctx, mm1.inputs[1], -2 if adj_y else -1, -1 if adj_y else -2, batch1)
    v, v_nodes = operand(ctx, mm2.inputs[1], -1 if adj_v else -2, -2 if adj_v else -1, batch2)
    o, o_nodes = output(ctx, mm2.outputs[0], batch2)
    biases = [s[1] for s in steps if s[0] in ("ADD", "SUB")]
    if len(biases) > MAX_BIAS:
        raise NoMatch
    read = []
    for ns in (q_nodes, k_nodes, v_nodes):
        read += [nd for nd in ns if all(nd is not a for a in read)]
    return dict(n=n, m=m, d=d, dv=dv, batch=nb, beta=beta, q=q, k=k, v=v, o=o, steps=steps, biases=biases,
                at=o_nodes[-1] if o_nodes else mm2, nodes=[mm1, *score_nodes, sm, *p_nodes, mm2, *o_nodes],
                read=read)
