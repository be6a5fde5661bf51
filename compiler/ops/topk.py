"""TOPK_V2 on the GPU with LiteRT's semantics (tensorflow/lite/kernels/topk_v2.cc): the k largest
values of the last axis of every row, value descending, equal values by the lower index; values keep
the input's dtype (float32, int32, uint8, int8, int64), indices are int32.

shaders/topk_rank.comp: each element finds its rank in that order by counting the row's elements
before it (a total order, so ranks are distinct) and writes itself at its rank when it is < k (1-byte
values then packed into words by a second dispatch).  O(N^2) comparisons per row, all in parallel.

Rows longer than BLOCKS_FROM run in blocks of S (a power of two): a dispatch sorts every block (each element
counts its block's elements before it), and a second ranks each element in its row by a binary search of every
sorted block, O(S + NB log S) comparisons an element.  An invocation's loops stay within LOOP_BUDGET passes:
lavapipe's llvmpipe ends a shader's loops after 65,535 and runs on, which made the one-dispatch ranks of a row
of 151,936 wrong there; the blocks also take the O(N^2) work off long rows on GPUs.

k is a constant, or a model input read at run time (LiteRT resizes the outputs to it): the outputs
are then sized for k = N and the bundle records that their last axis has the input's length
(runtime/output_sizes.py trims what run() returns; a k outside [0, N] fails the run).
"""
from __future__ import annotations

import numpy as np

from gpuc.compiler.codegen.kernel import Kernel
from gpuc.compiler.ops import NEUTRAL, SHAPE_ONLY, Why, declare, register, rules, template
from gpuc.compiler.ops.math import words
from gpuc.compiler.ops.output_lengths import declare_length
from gpuc.compiler.ops.step_chunks import LOOP_BUDGET, sorted_block

KINDS = {"float32": 0, "int32": 1, "uint8": 2, "int8": 3, "int64": 4}

VARIANTS = {
    "topk_rank": (dict(ROWS=2, N=10, KCAP=3), {"MODE": [0, 1], "KIND": [0, 1, 2, 3, 4]},
                  ["vals", "idx", "x", "kk"],
                  {"idx": "int32", "kk": "int32", "vals": "float32", "x": "float32"},
                  lambda d: dict(rw=("idx",) if d["MODE"] == 0 else ())),
    "topk_rank:sort": (dict(ROWS=2, N=10, KCAP=3, S=4, NB=3, MODE=2), {"KIND": [0, 1, 2, 3, 4]}, ["ord", "x"],
                       {"ord": "int32", "x": "float32"}),
    "topk_rank:merge": (dict(ROWS=2, N=10, KCAP=3, S=4, NB=3, MODE=3), {"KIND": [0, 1, 2, 3, 4]},
                        ["vals", "idx", "x", "kk", "ord"],
                        {"idx": "int32", "kk": "int32", "vals": "float32", "x": "float32", "ord": "int32"},
                        lambda d: dict(rw=("idx",))),
}
BLOCKS_FROM = 4096          # rows longer than this run in blocks (step_chunks.sorted_block)


def _plan(node, graph):
    x, kt = graph.t(node.inputs[0]), graph.t(node.inputs[1])
    vals, idx = graph.t(node.outputs[0]), graph.t(node.outputs[1])
    if x.dtype not in KINDS:
        raise ValueError(f"input {x.name!r} is {x.dtype} (LiteRT's TOPK_V2 takes {', '.join(KINDS)})")
    if not x.shape:
        raise ValueError(f"input {x.name!r} is a scalar (LiteRT takes 1 or more dimensions)")
    if kt.dtype != "int32" or int(np.prod(kt.shape)) != 1:
        raise ValueError(f"k {kt.name!r} is {kt.dtype} {list(kt.shape)}, LiteRT takes one int32")
    if vals.dtype != x.dtype or idx.dtype != "int32":
        raise ValueError(f"outputs are {vals.dtype} / {idx.dtype}, LiteRT makes them {x.dtype} / int32")
    n = int(x.shape[-1])
    if kt.is_const:
        k = int(np.asarray(kt.data).reshape(-1)[0])
        if not 0 <= k <= n:
            raise ValueError(f"k = {k} is not in [0, {n}] (the last axis of {x.name!r})")
    else:
        k = None
    want = tuple(x.shape[:-1]) + (n if k is None else k,)
    if n > BLOCKS_FROM and sorted_block(n) is None:
        raise ValueError(f"the last axis of {x.name!r} is {n} long, longer than the blocked ranks take "
                         f"({LOOP_BUDGET} loop passes an element)")
    for t in (vals, idx):
        if tuple(t.shape) != want and k is not None:
            raise ValueError(f"output {t.name!r} has shape {list(t.shape)}, expected {list(want)}")
    return x, n, k, want


def output_shapes(node, graph) -> list:
    """A run-time k: the outputs at their bound (k = N); LiteRT resizes them per run."""
    x, n, k, want = _plan(node, graph)
    return [want, want]


def _check(node, graph):
    try:
        x, n, k, want = _plan(node, graph)
    except ValueError as e:
        return str(e)
    if k is None:
        return declare_length(node, graph, [0, 1], node.inputs[1], axis=len(want) - 1, check_only=True)
    return None


@register("TOPK_V2", check=_check, inputs=(2, 2), outputs=(2, 2), shapes=output_shapes,
          dtypes=tuple(KINDS), summary="last axis, ties to the lower index; float32/int32/uint8/int8/int64; "
                                       "constant or run-time k")
def lower_topk(node, graph):
    x, n, k, want = _plan(node, graph)
    if k is None:
        declare_length(node, graph, [0, 1], node.inputs[1], axis=len(want) - 1)
    kcap = want[-1]
    rows = int(np.prod(x.shape[:-1], dtype=np.int64))
    if rows * n == 0 or rows * kcap == 0:
        return []
    kind = KINDS[x.dtype]
    vals, idx = node.outputs
    if kind == 4:
        pairs = graph.add_tensor(f"{graph.t(vals).name}/int32_pairs", [2 * rows * kcap], "int32")
        graph.aliases[pairs] = vals
        vals = pairs
    elif kind in (2, 3):
        vals = words(graph, vals)
    binds = [("vals", vals), ("idx", idx), ("x", words(graph, x.id)), ("kk", node.inputs[1])]
    d = dict(ROWS=rows, N=n, KCAP=kcap, KIND=kind)
    if n > BLOCKS_FROM:
        s = sorted_block(n)
        d.update(S=s, NB=-(-n // s))
        order = graph.add_tensor(f"{graph.t(idx).name}/block_order", [rows * n], "int32")
        ks = [Kernel("topk_rank", [("ord", order), binds[2]], rows * n, dict(d, MODE=2), f"{node.label()} blocks of {s}"),
              Kernel("topk_rank", binds + [("ord", order)], rows * n, dict(d, MODE=3), f"{node.label()} ranks",
                     rw=("idx",))]
    else:
        ks = [Kernel("topk_rank", binds, rows * n, dict(d, MODE=0), f"{node.label()} ranks", rw=("idx",))]
    if kind in (2, 3):
        ks.append(Kernel("topk_rank", binds, -(-rows * kcap // 4), dict(d, MODE=1), f"{node.label()} values"))
    return ks


# --- facts (compiler/ops/__init__.py FACT_FIELDS) ---------------------------------------------------
declare("TOPK_V2", shape=Why("no shape rule: OpDef.shapes sizes its outputs from k"), exact=SHAPE_ONLY,
        sym_shape=Why("no dynamic-size rule yet"), batch=Why("no batch rule yet: k is per run"),
        pieces=Why("computes values"), fp16=NEUTRAL, in_place=False, templates=("topk_rank",),
        flops=rules.per_output, cpu="TOPK_V2")
template("topk_rank", item_major=False, flat=False)
