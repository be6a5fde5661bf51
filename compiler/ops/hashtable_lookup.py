"""HASHTABLE_LOOKUP on the GPU (shaders/hashtable_lookup.comp), LiteRT's semantics (tensorflow/lite/
kernels/hashtable_lookup.cc): lookup [N] int32, keys [K] int32, value [K, ...]; output [N, ...] of
value's dtype (the key's row, else zeros) and hits [N] uint8.  LiteRT searches the keys with glibc's
bsearch: the kernel runs that search step for step, so unsorted keys give LiteRT's answers (its
comparator subtracts, yet -2^31 is found among large keys as a plain comparison finds it: tested).  Values of any numeric dtype whose rows fill
whole 32-bit words (float32, int32, int64; 1- and 2-byte dtypes with rows of 4 / 2 elements); string
values (LiteRT's other case) have no gpuc tensors.
"""
from __future__ import annotations

import numpy as np

from gpuc.compiler.codegen.kernel import Kernel
from gpuc.compiler.ops import NEUTRAL, SHAPE_ONLY, Why, declare, register, rules, template
from gpuc.compiler.ops.math import words
from gpuc.compiler.ops.util import checked, size

OP = "HASHTABLE_LOOKUP"
VALUE_DTYPES = ("float32", "int32", "int64", "uint8", "int8", "bool", "int16")
_BINDS = ["out_", "look", "keys", "val"]
VARIANTS = {
    "hashtable_lookup": (dict(N=5, NK=4, RW=2, MODE=0), {}, _BINDS, {"look": "int32", "keys": "int32"}),
    "hashtable_lookup:int": (dict(N=5, NK=4, RW=2, MODE=0), {}, _BINDS,
                             {"out_": "uint32", "look": "int32", "keys": "int32", "val": "uint32"}),
    "hashtable_lookup:hits": (dict(N=5, NK=4, RW=2, MODE=1), {}, _BINDS,
                              {"out_": "uint32", "look": "int32", "keys": "int32", "val": "uint32"}),
}


def _plan(node, graph):
    look, keys, v = (graph.t(i) for i in node.inputs)
    y, hits = (graph.t(o) for o in node.outputs)
    for t in (look, keys):
        if t.dtype != "int32" or len(t.shape) != 1:
            raise ValueError(f"{t.name!r} is {t.dtype} {list(t.shape)} (LiteRT takes 1-D int32)")
    if not keys.shape[0]:
        raise ValueError(f"keys {keys.name!r} are empty (every lookup misses): gpuc binds no empty tensor")
    if len(v.shape) < 1 or v.shape[0] != keys.shape[0]:
        raise ValueError(f"value {v.name!r} {list(v.shape)} must have a row per key ({keys.shape[0]})")
    if v.dtype not in VALUE_DTYPES:
        raise ValueError(f"value {v.name!r} is {v.dtype}: gpuc runs {', '.join(VALUE_DTYPES)}")
    row = size(v.shape[1:])
    nbytes = row * np.dtype(v.dtype).itemsize
    if nbytes % 4:
        raise ValueError(f"value rows of {row} {v.dtype} ({nbytes} bytes) do not fill whole 32-bit words: gpuc "
                         "copies rows by the word")
    out = [look.shape[0]] + list(v.shape[1:])
    if hits.dtype != "uint8" or list(hits.shape) != [look.shape[0]]:
        raise ValueError(f"hits {hits.name!r} is {hits.dtype} {list(hits.shape)}, LiteRT makes it uint8 "
                         f"[{look.shape[0]}]")
    if y.dtype != v.dtype or list(y.shape) != out:
        raise ValueError(f"output {y.name!r} is {y.dtype} {list(y.shape)}, LiteRT makes it {v.dtype} {out}")
    return look, keys, v, y, hits, nbytes // 4


@register(OP, check=checked(lambda n, g: _plan(n, g) and None), dtypes=VALUE_DTYPES, inputs=(3, 3),
          outputs=(2, 2), shapes=lambda n, g: [[g.t(n.inputs[0]).shape[0]] + list(g.t(n.inputs[2]).shape[1:]),
                                               [g.t(n.inputs[0]).shape[0]]],
          summary="glibc bsearch step for step (unsorted keys as LiteRT); rows copied by the word; uint8 hits")
def lower_hashtable_lookup(node, graph):
    look, keys, v, y, hits, rw = _plan(node, graph)
    n = look.shape[0]
    if n == 0:
        return []
    d = dict(N=n, NK=int(keys.shape[0]), RW=rw)
    binds = [("look", look.id), ("keys", keys.id), ("val", words(graph, v.id))]
    out = []
    if rw:
        out.append(Kernel("hashtable_lookup", [("out_", words(graph, y.id))] + binds, n * rw, dict(d, MODE=0),
                          node.label()))
    out.append(Kernel("hashtable_lookup", [("out_", words(graph, hits.id))] + binds, -(-n // 4), dict(d, MODE=1),
                      node.label() + " (hits)"))
    return out


def _shape(node, vals, graph, need=None):
    look, keys, v, y, hits, rw = _plan(node, graph)
    return [rules.placeholder(y.shape, y.dtype), rules.placeholder(hits.shape, "uint8")]


# --- facts (compiler/ops/__init__.py FACT_FIELDS) ---------------------------------------------------
declare(OP, shape=_shape, exact=SHAPE_ONLY, sym_shape=Why("no dynamic-size rule yet"),
        batch=Why("no batch rule: lookups are a 1-D list"), pieces=Why("computes values"), fp16=NEUTRAL,
        in_place=False, templates=("hashtable_lookup",),
        flops=lambda node, graph: graph.t(node.outputs[0]).size * 32,
        cpu=Why("no CPU kernel: the GPU runs every numeric dtype whose rows fill whole words"))
template("hashtable_lookup", item_major=False, flat=True)
