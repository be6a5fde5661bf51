"""UNIQUE on the GPU (shaders/unique.comp), LiteRT's semantics (tensorflow/lite/kernels/unique.cc):
for a 1-D float32 / int32 / int64 / int16 / int8 / uint8 input x, y = its distinct values in
first-occurrence order and idx (int32 or int64, the idx output's dtype) = each element's position in
y.  Equality is std::map's (-0 == 0).  y's length is known only per run: the bundle computes y at x's
length and records the "max_plus_one" rule on idx (compiler/ops/output_lengths.py), so run() returns
y trimmed as LiteRT resizes it; y and idx must be model outputs no other op reads.  A float NaN
gets no consistent place in LiteRT's std::map (its answers depend on the tree's shape): the kernel
marks idx -1 and the run fails (runtime/output_sizes.py).  One workgroup, O(N^2 / 256) comparisons up to
BLOCKS_FROM elements.  Longer inputs first find each element's first occurrence in two dispatches over all
elements: one sorts blocks of S (step_chunks.sorted_block), one binary-searches every sorted block, O(S + NB log S)
an element; the workgroup then numbers them.  (One workgroup's O(N^2 / 256) loop passes went past llvmpipe's
65,535 at ~6,000 elements, where lavapipe then failed the run on a NaN the input did not hold.)
"""
from __future__ import annotations

import numpy as np

from gpuc.compiler.codegen.kernel import Kernel
from gpuc.compiler.ops import NEUTRAL, SHAPE_ONLY, Why, declare, register, rules, template
from gpuc.compiler.ops.math import words
from gpuc.compiler.ops.output_lengths import declare_length
from gpuc.compiler.ops.step_chunks import sorted_block
from gpuc.compiler.ops.util import checked

OP = "UNIQUE"
WG = 256
DTYPES = ("float32", "int32", "int64", "int16", "int8", "uint8")
VARIANTS = {
    "unique": (dict(N=10, WG=WG, FLOATS=0), {"ES": [1, 2, 4, 8], "OUT64": [0, 1], "MODE": [0, 3]},
               ["out_", "idx", "scr", "x"],
               {"out_": "uint32", "idx": "int32", "scr": "int32", "x": "uint32"},
               lambda d: dict(local_x=WG, rw=("scr", "idx"))),
    "unique:float": (dict(N=10, WG=WG, FLOATS=1, ES=4), {"OUT64": [0, 1], "MODE": [0, 3]}, ["out_", "idx", "scr", "x"],
                     {"idx": "int32", "scr": "int32"}, lambda d: dict(local_x=WG, rw=("scr", "idx"))),
    "unique:sort": (dict(N=10, WG=WG, S=4, NB=3, MODE=1), {"FLOATS": [0, 1], "ES": [1, 2, 4, 8]}, ["ord", "x"],
                    {"ord": "int32", "x": "uint32"}),
    "unique:first": (dict(N=10, WG=WG, S=4, NB=3, MODE=2), {"FLOATS": [0, 1], "ES": [1, 2, 4, 8]}, ["scr", "x", "ord"],
                     {"ord": "int32", "scr": "int32", "x": "uint32"}),
}
BLOCKS_FROM = 2048          # inputs longer than this find first occurrences in sorted blocks


def _plan(node, graph):
    x, y, idx = graph.t(node.inputs[0]), graph.t(node.outputs[0]), graph.t(node.outputs[1])
    if len(x.shape) != 1:
        raise ValueError(f"input {x.name!r} has shape {list(x.shape)} (LiteRT's kernel takes 1-D)")
    if x.dtype not in DTYPES:
        raise ValueError(f"input {x.name!r} is {x.dtype} (LiteRT takes {', '.join(DTYPES)})")
    if idx.dtype not in ("int32", "int64"):
        raise ValueError(f"idx output {idx.name!r} is {idx.dtype} (LiteRT writes int32 or int64)")
    return x, y, idx, int(x.shape[0])


def output_shapes(node, graph) -> list:
    n = _plan(node, graph)[3]
    return [[n], [n]]


def _check(node, graph):
    x, y, idx, n = _plan(node, graph)
    if y.dtype != x.dtype or list(y.shape) != [n] or list(idx.shape) != [n]:
        return (f"outputs {y.name!r} {y.dtype} {list(y.shape)}, {idx.name!r} {list(idx.shape)}: LiteRT makes them "
                f"{x.dtype} [at most {n}] and [{n}]")
    return declare_length(node, graph, [0], idx.id, rule="max_plus_one", check_only=True)


@register(OP, check=checked(_check), dtypes=DTYPES, inputs=(1, 1), outputs=(2, 2), shapes=output_shapes,
          summary="first-occurrence order, idx int32/int64 (one workgroup); y trimmed per run; a NaN fails the run")
def lower_unique(node, graph):
    x, y, idx, n = _plan(node, graph)
    declare_length(node, graph, [0], idx.id, rule="max_plus_one")
    if n == 0:
        return []
    scr = graph.add_tensor(f"{node.label()}/scratch", [2 * n], "int32")
    binds = [("out_", words(graph, y.id)), ("idx", words(graph, idx.id)), ("scr", scr), ("x", words(graph, x.id))]
    d = dict(N=n, WG=WG, ES=np.dtype(x.dtype).itemsize, FLOATS=int(x.dtype == "float32"),
             OUT64=int(idx.dtype == "int64"))
    if n <= BLOCKS_FROM:
        return [Kernel("unique", binds, WG, d, node.label(), local_x=WG, rw=("scr", "idx"))]
    b = sorted_block(n)
    blocks = dict(d, S=b, NB=-(-n // b))
    order = graph.add_tensor(f"{node.label()}/block_order", [n], "int32")
    return [Kernel("unique", [("ord", order), binds[3]], n, dict(blocks, MODE=1), f"{node.label()} blocks of {b}"),
            Kernel("unique", [("scr", scr), binds[3], ("ord", order)], n, dict(blocks, MODE=2),
                   f"{node.label()} first occurrences"),
            Kernel("unique", binds, WG, dict(d, MODE=3), node.label(), local_x=WG, rw=("scr", "idx"))]


def _shape(node, vals, graph, need=None):
    x, y, idx, n = _plan(node, graph)
    return [rules.placeholder([n], x.dtype), rules.placeholder([n], idx.dtype)]


# --- facts (compiler/ops/__init__.py FACT_FIELDS) ---------------------------------------------------
declare(OP, shape=_shape, exact=SHAPE_ONLY, sym_shape=Why("no dynamic-size rule: its output length is a value"),
        batch=Why("no batch rule: distinct values are counted over the whole input"),
        pieces=Why("computes values"), fp16=NEUTRAL, in_place=False, templates=("unique",),
        flops=lambda node, graph: graph.t(node.inputs[0]).size ** 2,
        cpu=Why("no CPU kernel: the GPU runs every dtype LiteRT takes"))
template("unique", item_major=False, flat=False)
