"""CUMSUM (shaders/cumsum.comp): constant axis (negative allowed), exclusive, reverse; float32, int32
and int64 (both wrapping; int64 as 32-bit word pairs with a carry), summed sequentially along the
axis like LiteRT's kernel.  An axis longer than step_chunks.LOOP_BUDGET runs as one dispatch a chunk of it
(each resumes the scan from the output before its chunk: the same additions in the same order)."""
from __future__ import annotations

import numpy as np

from gpuc.compiler.codegen.kernel import Kernel
from gpuc.compiler.ops import SHAPE_ONLY, UNSAFE, Why, declare, register, rules, template
from gpuc.compiler.ops.math import words
from gpuc.compiler.ops.step_chunks import in_chunks
from gpuc.compiler.ops.util import checked, scalar_axis, size

DTYPES = ("float32", "int32", "int64")

VARIANTS = {
    "cumsum": (dict(AXIS=5, INNER=3), {"EXCLUSIVE": [0, 1], "REVERSE": [0, 1], "IS_INT": [0, 1, 2]},
               ["out_", "x"]),
    "cumsum:chunked": (dict(AXIS=5, INNER=3, CHUNKED=1), {"EXCLUSIVE": [0, 1], "REVERSE": [0, 1], "IS_INT": [0, 1, 2]},
                       ["out_", "x", "steps"], {"steps": "int32"}, lambda d: dict(rw=("out_",))),
}


def _plan(node, graph):
    x, y = graph.t(node.inputs[0]), graph.t(node.outputs[0])
    if x.dtype != y.dtype or x.dtype not in DTYPES:
        raise ValueError(f"dtypes {x.dtype} -> {y.dtype} not supported ({', '.join(DTYPES)}, same for both)")
    if tuple(x.shape) != tuple(y.shape):
        raise ValueError(f"output shape {list(y.shape)} differs from the input's {list(x.shape)}")
    return x, y, scalar_axis(node, graph, 1, x)


@register("CUMSUM", check=checked(lambda n, g: _plan(n, g) and None), inputs=(2, 2), dtypes=DTYPES,
          summary="any axis, exclusive, reverse; float32, int32 and int64")
def lower_cumsum(node, graph):
    x, y, axis = _plan(node, graph)
    if y.size == 0:
        return []
    inner = size(x.shape[axis + 1:])
    lines = y.size // x.shape[axis]
    defines = dict(AXIS=x.shape[axis], INNER=max(inner, 1), EXCLUSIVE=int(bool(node.attrs.get("exclusive", False))),
                   REVERSE=int(bool(node.attrs.get("reverse", False))), IS_INT=DTYPES.index(x.dtype))
    k = Kernel("cumsum", [("out_", words(graph, y.id)), ("x", words(graph, x.id))], lines, defines, node.label())
    return in_chunks(k, graph, 1, "AXIS", rw=("out_",))


# --- facts (compiler/ops/__init__.py FACT_FIELDS) ---------------------------------------------------
declare("CUMSUM", shape=rules.same_shape, exact=SHAPE_ONLY, sym_shape=Why("no dynamic-size rule yet"),
        batch=("axis_input", 1, "axis"), pieces=Why("computes values"), fp16=UNSAFE, in_place=False,
        templates=("cumsum",), flops=rules.per_output, cpu="CUMSUM")
template("cumsum", item_major=False, flat=False)
