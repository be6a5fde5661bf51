"""Comparisons, logic, SELECT / SELECT_V2 and CAST (shaders/compare.comp, select.comp, cast.comp).

Bool (and uint8 / int8) tensors keep numpy's layout, one byte per element; shaders see them as
uint32 words (4 elements each, little-endian) through `math.words` views, and every invocation that
writes such a tensor writes one whole word, so parallel invocations never share a word.

* LESS LESS_EQUAL GREATER GREATER_EQUAL (float32, int32), EQUAL NOT_EQUAL (float32, int32, bool)
  -> bool, numpy broadcasting.  LOGICAL_AND LOGICAL_OR (broadcasting) LOGICAL_NOT on bool.
* SELECT (condition of the same shape, or rank 1 selecting along dimension 0) and SELECT_V2
  (condition, x and y broadcast together) for every dtype of data movement (elements.DTYPES: 1- and
  2-byte values packed in words, int64 as word pairs).
* CAST between float32 int32 bool uint8 int8 (not quantized), as LiteRT does it: float -> integer
  truncates and saturates (NaN -> the type's maximum), integer -> narrower integer wraps, -> bool is
  != 0.
"""
from __future__ import annotations

import numpy as np

from gpuc.compiler.codegen.kernel import Kernel
from gpuc.compiler.ops import ALWAYS, BOUNDED, INTEGER, NEUTRAL, SHAPE_ONLY, Why, declare, register, rules, template
from gpuc.compiler.ops.elements import DTYPES as SELECT_DTYPES
from gpuc.compiler.ops.elements import width
from gpuc.compiler.ops.math import BYTE_DTYPES, KIND, broadcast_reason, dtype_reason, geometry, words
from gpuc.compiler.ops.util import checked
from gpuc.runtime.cpu_ops import litert_cast  # noqa: F401 (numpy CAST, LiteRT's semantics: constant folding)

COMPARE = {"LESS": 0, "LESS_EQUAL": 1, "GREATER": 2, "GREATER_EQUAL": 3, "EQUAL": 4, "NOT_EQUAL": 5,
           "LOGICAL_AND": 6, "LOGICAL_OR": 7, "LOGICAL_NOT": 8}
_INPUT_DTYPES = {op: ("float32", "int32") for op in ("LESS", "LESS_EQUAL", "GREATER", "GREATER_EQUAL")}
_INPUT_DTYPES.update({"EQUAL": ("float32", "int32", "bool"), "NOT_EQUAL": ("float32", "int32", "bool"),
                      "LOGICAL_AND": ("bool",), "LOGICAL_OR": ("bool",), "LOGICAL_NOT": ("bool",)})
VALUE_DTYPES = ("float32", "int32", "bool", "uint8", "int8")


def _words_of(n: int) -> int:
    return -(-n // 4)


@checked
def _check_compare(node, graph):
    ins = [graph.t(i) for i in node.inputs]
    y = graph.t(node.outputs[0])
    if y.dtype != "bool":
        return f"output dtype {y.dtype} (expected bool)"
    bad = dtype_reason(ins, _INPUT_DTYPES[node.op])
    if bad:
        return bad
    if len({t.dtype for t in ins}) != 1:
        return f"mixed input dtypes {[t.dtype for t in ins]}"
    if node.op == "LOGICAL_NOT":
        return None if tuple(ins[0].shape) == tuple(y.shape) else \
            f"input shape {list(ins[0].shape)} differs from output shape {list(y.shape)}"
    return broadcast_reason([t.shape for t in ins], y.shape)


@register(*(op for op in COMPARE if op != "LOGICAL_NOT"), check=_check_compare, dtypes=("float32", "int32", "bool"),
          inputs=(2, 2), summary="numpy broadcasting -> bool")
@register("LOGICAL_NOT", check=_check_compare, dtypes=("bool",), inputs=(1, 1), summary="bool")
def lower_compare(node, graph):
    ins = [graph.t(i) for i in node.inputs]
    y = graph.t(node.outputs[0])
    unary = node.op == "LOGICAL_NOT"
    shapes = [ins[0].shape, ins[0].shape] if unary else [t.shape for t in ins]
    same = all(tuple(s) == tuple(y.shape) for s in shapes)
    defines = dict(OP=COMPARE[node.op], KIND=KIND[ins[0].dtype], UNARY=int(unary), SAME_SHAPE=int(same), N=y.size,
                   **geometry(shapes, y.shape, ["A", "B"]))
    binds = [("out_", words(graph, y.id))] + [(n, words(graph, t.id)) for n, t in zip("ab", ins)]
    return [Kernel("compare", binds, _words_of(y.size), defines, node.label())]


def _row_select(node, graph) -> bool:
    """SELECT with a rank-1 condition over a higher-rank x: picks whole rows of dimension 0."""
    c, x = graph.t(node.inputs[0]), graph.t(node.inputs[1])
    return node.op == "SELECT" and len(c.shape) == 1 and len(x.shape) > 1


@checked
def _check_select(node, graph):
    c, x, yv = (graph.t(i) for i in node.inputs)
    out = graph.t(node.outputs[0])
    if c.dtype != "bool":
        return f"condition dtype {c.dtype} (expected bool)"
    bad = dtype_reason([x, yv, out], SELECT_DTYPES)
    if bad:
        return bad
    if not x.dtype == yv.dtype == out.dtype:
        return f"mixed value dtypes: {x.dtype}, {yv.dtype} -> {out.dtype}"
    if node.op == "SELECT_V2":
        return broadcast_reason([c.shape, x.shape, yv.shape], out.shape)
    if not tuple(x.shape) == tuple(yv.shape) == tuple(out.shape):
        return f"x {list(x.shape)}, y {list(yv.shape)} and output {list(out.shape)} shapes differ"
    if _row_select(node, graph):
        if c.shape[0] != x.shape[0]:
            return f"rank-1 condition of {c.shape[0]} elements for {x.shape[0]} rows"
    elif tuple(c.shape) != tuple(x.shape):
        return f"condition shape {list(c.shape)} differs from {list(x.shape)} (and is not a rank-1 row selector)"
    return None


@register("SELECT", "SELECT_V2", check=_check_select, dtypes=SELECT_DTYPES, inputs=(3, 3),
          summary="SELECT: same shape or rank-1 row condition; SELECT_V2: broadcasting")
def lower_select(node, graph):
    c, x, yv = (graph.t(i) for i in node.inputs)
    out = graph.t(node.outputs[0])
    geo = geometry([c.shape, x.shape, yv.shape], out.shape, ["C", "X", "Y"])
    if _row_select(node, graph):
        geo["C_STRIDES"] = [1] + [0] * (len(out.shape) - 1)
    w, n = width(out.dtype), out.size
    if w == 8:           # int64: (low, high) word pairs, a last dimension of 2 the condition does not see
        geo = dict(RANK=geo["RANK"] + 1, OUT_SHAPE=geo["OUT_SHAPE"] + [2], C_STRIDES=geo["C_STRIDES"] + [0],
                   X_STRIDES=[2 * s for s in geo["X_STRIDES"]] + [1], Y_STRIDES=[2 * s for s in geo["Y_STRIDES"]] + [1])
        n = 2 * n
    binds = [("out_", words(graph, out.id)), ("cond", words(graph, c.id)), ("x", words(graph, x.id)),
             ("y", words(graph, yv.id))]
    return [Kernel("select", binds, -(-n // (4 // w)) if w < 4 else n, dict(ELEM=min(w, 4), N=n, **geo),
                   node.label())]


@checked
def _check_cast(node, graph):
    x, y = graph.t(node.inputs[0]), graph.t(node.outputs[0])
    bad = dtype_reason([x, y], VALUE_DTYPES)
    if bad:
        return bad
    if x.size != y.size:
        return f"input has {x.size} elements, output {y.size}"
    return None


@register("CAST", check=_check_cast, dtypes=VALUE_DTYPES, inputs=(1, 1),
          summary="float32/int32/bool/uint8/int8, saturating float -> integer like LiteRT")
def lower_cast(node, graph):
    x, y = graph.t(node.inputs[0]), graph.t(node.outputs[0])
    out_bytes = y.dtype in BYTE_DTYPES
    defines = dict(IN_KIND=KIND[x.dtype], OUT_KIND=KIND[y.dtype], N=y.size)
    binds = [("out_", words(graph, y.id)), ("x", words(graph, x.id))]
    return [Kernel("cast", binds, _words_of(y.size) if out_bytes else y.size, defines, node.label())]


_U = "uint32"
VARIANTS = {
    "compare": (dict(N=22, RANK=3, OUT_SHAPE=[2, 3, 4], A_STRIDES=[12, 4, 1], B_STRIDES=[0, 0, 1]),
                {"OP": list(range(9)), "KIND": [0, 1, 2], "SAME_SHAPE": [0, 1], "UNARY": [0, 1]},
                ["out_", "a", "b"], {"out_": _U}),
    "select": (dict(N=22, RANK=3, OUT_SHAPE=[2, 3, 4], C_STRIDES=[1, 0, 0], X_STRIDES=[12, 4, 1],
                    Y_STRIDES=[0, 4, 1]), {"ELEM": [1, 2, 4]}, ["out_", "cond", "x", "y"], {"cond": _U}),
    "cast": (dict(N=22), {"IN_KIND": [0, 1, 2, 3, 4], "OUT_KIND": [0, 1, 2, 3, 4]}, ["out_", "x"],
             {"out_": "int32", "x": _U}),
}


# --- facts (compiler/ops/__init__.py FACT_FIELDS) ---------------------------------------------------
_NUMPY = {"LESS": np.less, "LESS_EQUAL": np.less_equal, "GREATER": np.greater, "GREATER_EQUAL": np.greater_equal,
          "EQUAL": np.equal, "NOT_EQUAL": np.not_equal, "LOGICAL_AND": np.logical_and, "LOGICAL_OR": np.logical_or}
_COMMON = dict(pieces=Why("computes values"), in_place=False, flops=rules.per_output)
for _op, _fn in _NUMPY.items():
    declare(_op, shape=rules.binary(_fn), exact=INTEGER, sym_shape="broadcast", batch="elementwise",
            fp16=NEUTRAL if _op.startswith("LOGICAL") else BOUNDED, templates=("compare",), cpu=_op, **_COMMON)
declare("LOGICAL_NOT", shape=rules.unary(np.logical_not), exact=INTEGER, sym_shape="same", batch="unary",
        fp16=NEUTRAL, templates=("compare",), cpu="LOGICAL_NOT", **_COMMON)
declare("SELECT", "SELECT_V2", shape=Why("no host rule: the symbolic broadcast rule gives its shape"),
        exact=SHAPE_ONLY, sym_shape="broadcast", fp16=NEUTRAL, templates=("select",), **_COMMON)
declare("SELECT", batch="select_rows", cpu="SELECT")
declare("SELECT_V2", batch="elementwise", cpu="SELECT_V2")


def _cast_shape(node, vals, graph, need=None):
    return [litert_cast(np.asarray(vals[0]), rules.out_dtype(node, graph))]


def _cast_sym_value(node, vals, graph):
    """A size cast to an integer type is the same size (--dynamic shape arithmetic)."""
    return vals[0] if rules.out_dtype(node, graph).startswith("int") else None


declare("CAST", shape=_cast_shape, exact=ALWAYS, sym_shape="same", batch="unary", fp16=NEUTRAL,
        templates=("cast",), cpu="CAST", sym_value=_cast_sym_value, **_COMMON)
for _t in ("cast", "compare", "select"):
    template(_t, item_major=True, flat=True)
