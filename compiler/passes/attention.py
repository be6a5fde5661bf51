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
source (strided_view.py: batch index terms, row and column strides, an offset), the longest such chain
that stays strided; the source may be a variable (the cache).  The kernel applies the scalars as the ops
did.  Those intermediates may have other readers (their nodes then stay; nodes left unread are
dropped).  The output is written through the single-use RESHAPE / TRANSPOSE chain that follows (a head
merge) the same way.  Every intermediate of the score chain must have no consumer outside the chain
and not be a graph output or variable; every tensor float32 without quantization; the shapes must line
up (a bias broadcasting only, both products sharing the batch and the N rows).  Anything else leaves the
ops as they are.

Modules: attention_match.py (the chain from a SOFTMAX, `worthwhile`), attention_operands.py (the
operands' and the output's views through data movement), strided_view.py (the view itself); this one
rewrites a match into the ATTENTION node.
"""
from __future__ import annotations

from gpuc.compiler.ir import Graph, Node
from gpuc.compiler.passes.attention_match import match_attention, worthwhile  # noqa: F401 (worthwhile: tests)
from gpuc.compiler.pattern import NoMatch, Op, replace_nodes, rewrite

ATTN_OP = "ATTENTION"


def fuse_attention(graph: Graph) -> None:
    """Replace each attention chain by one ATTENTION node (module docstring)."""
    rewrite(graph, [(Op("SOFTMAX", name="sm"), _fuse)])


def _fuse(graph: Graph, match):
    try:
        plan = match_attention(match.matcher, match["sm"])
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
