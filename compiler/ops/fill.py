"""FILL and ZEROS_LIKE (shaders/fill.comp): FILL of every dtype of data movement (elements.DTYPES),
ZEROS_LIKE of those LiteRT's kernel takes.  (TFLite has no ONES_LIKE builtin: the converter emits FILL
for tf.ones_like.)

FILL needs constant dims (static output shape); its value may be a constant or a runtime scalar.
ZEROS_LIKE only uses the input's (static) shape.  With constant inputs both fold
at compile time instead (compiler/passes/fold.py: `fill_value`)."""
from __future__ import annotations

import numpy as np

from gpuc.compiler.codegen.kernel import Kernel
from gpuc.compiler.ops import ALWAYS, NEUTRAL, Why, declare, register, rules, template
from gpuc.compiler.ops.elements import DTYPES, element_bits, width
from gpuc.compiler.ops.math import words
from gpuc.compiler.ops.util import checked, const_input

LIKE_DTYPES = ("float32", "int32", "int64")      # LiteRT's ZEROS_LIKE rejects others at run time

VARIANTS = {
    "fill": (dict(N=10, VALUE_BITS=1065353216, HI_BITS=-1), {"RUNTIME_VALUE": [0, 1], "ELEM": [1, 2, 4], "I64": [0, 1]},
             ["out_", "val"]),
}


def _plan(node, graph):
    y = graph.t(node.outputs[0])
    if y.dtype not in DTYPES:
        raise ValueError(f"output {y.name!r} has dtype {y.dtype} (supported: {', '.join(DTYPES)})")
    if node.op == "FILL":
        dims = const_input(node, graph, 0, "dims")
        if dims is None:
            raise ValueError("missing dims input")
        dims = np.asarray(dims)
        if dims.dtype.kind not in "iu" or dims.ndim != 1:
            raise ValueError(f"dims must be a 1-D integer constant (got {dims.dtype} {list(dims.shape)})")
        if [int(d) for d in dims] != list(y.shape):
            raise ValueError(f"output {y.name!r} has shape {list(y.shape)}, dims say {dims.tolist()}")
        v = graph.t(node.inputs[1])
        if v.size != 1:
            raise ValueError(f"value {v.name!r} must be a scalar (has {v.size} elements)")
        if v.dtype != y.dtype:
            raise ValueError(f"value dtype {v.dtype} differs from output dtype {y.dtype}")
        return y, v
    x = graph.t(node.inputs[0])
    if y.dtype not in LIKE_DTYPES:
        raise ValueError(f"output {y.name!r} has dtype {y.dtype} (LiteRT's ZEROS_LIKE takes {', '.join(LIKE_DTYPES)})")
    if x.dtype != y.dtype or tuple(x.shape) != tuple(y.shape):
        raise ValueError(f"output {y.dtype} {list(y.shape)} differs from input {x.dtype} {list(x.shape)}")
    return y, None


def fill_value(node, graph) -> np.ndarray | None:
    """The constant output of a FILL / ZEROS_LIKE whose inputs are constants (for folding)."""
    y, v = _plan(node, graph)
    if node.op == "FILL":
        return None if not v.is_const else np.full(y.shape, np.asarray(v.data).reshape(-1)[0], y.dtype)
    return np.zeros(y.shape, y.dtype)


def _bits(value, dtype) -> tuple[int, int]:
    """The value's (low, high) 32-bit words as int32 (high: int64 only)."""
    if width(dtype) != 4:
        return element_bits(value, dtype)
    return int(np.array([value], dtype).view(np.int32)[0]), 0


@register("FILL", check=checked(lambda n, g: _plan(n, g) and None), inputs=(2, 2), dtypes=DTYPES,
          summary="constant dims; constant or runtime value; every dtype of data movement")
@register("ZEROS_LIKE", check=checked(lambda n, g: _plan(n, g) and None), inputs=(1, 1), dtypes=LIKE_DTYPES,
          rejects=[d for d in DTYPES if d not in LIKE_DTYPES], summary="float32/int32/int64")
def lower_fill(node, graph):
    y, v = _plan(node, graph)
    if y.size == 0:
        return []
    out = words(graph, y.id)
    binds = [("out_", out)]
    runtime = v is not None and not v.is_const
    bits = (0, 0)
    if runtime:
        binds.append(("val", words(graph, v.id)))
    elif v is not None:
        bits = _bits(np.asarray(v.data).reshape(-1)[0], y.dtype)
    defines = dict(N=y.size, RUNTIME_VALUE=int(runtime), ELEM=min(width(y.dtype), 4), I64=int(y.dtype == "int64"),
                   VALUE_BITS=bits[0], HI_BITS=bits[1])
    return [Kernel("fill", binds, graph.t(out).size, defines, node.label())]


# --- facts (compiler/ops/__init__.py FACT_FIELDS) ---------------------------------------------------
def _fill_shape(node, vals, graph, need=None):
    return [np.full(rules.ints(vals[0], "dims"), np.asarray(vals[1]).reshape(-1)[0], rules.out_dtype(node, graph))]


def _zeros_like_shape(node, vals, graph, need=None):
    return [np.full(vals[0].shape, 0, rules.out_dtype(node, graph))]


_COMMON = dict(exact=ALWAYS, pieces=Why("writes a value, reads no elements"), fp16=NEUTRAL, in_place=False,
               templates=("fill",), flops=rules.per_output)
declare("FILL", shape=_fill_shape, sym_shape=Why("no dynamic-size rule: its size is a value"),
        batch=Why("no batch rule: its output size is a value"), cpu="FILL", **_COMMON)
declare("ZEROS_LIKE", shape=_zeros_like_shape, sym_shape="same", batch="unary", cpu="ZEROS_LIKE", **_COMMON)
template("fill", item_major=False, flat=True)
