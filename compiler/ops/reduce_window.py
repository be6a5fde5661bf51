"""REDUCE_WINDOW and STABLEHLO_REDUCE_WINDOW, LiteRT's semantics (tensorflow/lite/kernels/
stablehlo_reduce_window.cc; the plan and the numpy kernel: runtime/cpu_reduce_window.py).

  REDUCE_WINDOW(input, init_value, window_shape, window_strides, window_dilations): the three int64
    vectors constant (LiteRT's Prepare demands it); ReduceWindowOptions.reduce_function ADD / MUL /
    MINIMUM / MAXIMUM / ALL / ANY.
  STABLEHLO_REDUCE_WINDOW(input, init_value): window_dimensions / window_strides / base_dilations /
    window_dilations / padding (negative: crop) attributes, and a body subgraph whose one op says the
    reduce function (ADD, MUL, MAXIMUM, MINIMUM, LOGICAL_AND, LOGICAL_OR or their StableHLO names).
    The importer (compiler/ops/stablehlo.py) turns it into a REDUCE_WINDOW node with those attributes.

float32 and int32 run on the GPU (shaders/reduce_window.comp: one invocation per output element, the
window folded in LiteRT's order, so float sums match LiteRT's bit for bit); bool / int8 / int16 /
int64 / uint8 / float64 on the CPU (runtime/cpu_reduce_window.py).
"""
from __future__ import annotations

import numpy as np

from gpuc.compiler import ir
from gpuc.compiler.codegen.kernel import Kernel
from gpuc.compiler.ops import ALWAYS, REFUSAL_ATTR, UNSAFE, Why, declare, register, rules, template
from gpuc.compiler.ops.step_chunks import in_chunks
from gpuc.compiler.ops.util import checked, size
from gpuc.runtime import cpu_reduce_window as crw

OP = "REDUCE_WINDOW"
SHLO = "STABLEHLO_REDUCE_WINDOW"
FORM = "stablehlo_form"          # attribute of a REDUCE_WINDOW node made from STABLEHLO_REDUCE_WINDOW
# the body subgraph's one op -> reduce function (ReduceWindowFunction)
BODIES = {"ADD": 1, "STABLEHLO_ADD": 1, "MUL": 2, "STABLEHLO_MULTIPLY": 2, "MINIMUM": 3, "STABLEHLO_MINIMUM": 3,
          "MAXIMUM": 4, "STABLEHLO_MAXIMUM": 4, "LOGICAL_AND": 5, "STABLEHLO_AND": 5, "LOGICAL_OR": 6,
          "STABLEHLO_OR": 6}
VARIANTS = {
    "reduce_window": (dict(R=2, WSIZE=4, OSTR=[2, 1], WST=[2, 1], STRIDE=[1, 1], WDIL=[1, 1], LO=[0, 0],
                           BASE=[1, 1], DIL=[3, 3], ISTR=[3, 1]),
                      {"OP": [1, 2, 3, 4, 5, 6], "FLOATS": [0, 1]}, ["out_", "x", "init_v"], {}),
    "reduce_window:chunked": (dict(R=2, WSIZE=4, OSTR=[2, 1], WST=[2, 1], STRIDE=[1, 1], WDIL=[1, 1], LO=[0, 0],
                                   BASE=[1, 1], DIL=[3, 3], ISTR=[3, 1], CHUNKED=1),
                              {"OP": [1, 2, 3, 4, 5, 6], "FLOATS": [0, 1]}, ["out_", "x", "init_v", "steps"],
                              {"steps": "int32"}, lambda d: dict(rw=("out_",))),
}


def _plan(node, graph):
    x, init, y = graph.t(node.inputs[0]), graph.t(node.inputs[1]), graph.t(node.outputs[0])
    if init.dtype != x.dtype or y.dtype != x.dtype or init.size != 1:
        raise ValueError(f"init value {init.name!r} ({init.dtype} {list(init.shape)}) and output {y.dtype} must be "
                         f"one value / the dtype of the input ({x.dtype})")
    if node.attrs.get(FORM):
        if len(node.inputs) != 2:
            raise ValueError(f"has {len(node.inputs)} inputs (LiteRT's STABLEHLO_REDUCE_WINDOW takes 2)")
        consts = None
    else:
        if len(node.inputs) != 5:
            raise ValueError(f"has {len(node.inputs)} inputs (LiteRT's kernel takes 5)")
        ts = [graph.t(i) for i in node.inputs[2:5]]
        for t in ts:
            if not t.is_const or t.dtype != "int64":
                raise ValueError(f"{t.name!r} must be a constant int64 vector (LiteRT's Prepare demands it)")
        consts = [np.asarray(t.data) for t in ts]
    p = crw.plan(node.attrs, list(x.shape), consts)
    if list(y.shape) != p["out"]:
        raise ValueError(f"output {y.name!r} has shape {list(y.shape)}, LiteRT makes it {p['out']}")
    return x, y, p


@register(OP, check=checked(lambda n, g: _plan(n, g) and None), dtypes=("float32", "int32"), inputs=(2, 5),
          shapes=lambda n, g: [_plan(n, g)[2]["out"]],
          summary="window dims / strides / base and window dilations / padding; LiteRT's fold order; "
                  "float32/int32 on the GPU, other dtypes on the CPU")
def lower_reduce_window(node, graph):
    x, y, p = _plan(node, graph)
    if y.size == 0:
        return []
    r = len(p["out"])
    ostr = [size(p["out"][k + 1:]) for k in range(r)]
    wst = [size(p["win"][k + 1:]) for k in range(r)]
    istr = [size(x.shape[k + 1:]) for k in range(r)]
    d = dict(R=r, OP=p["fn"], FLOATS=int(x.dtype == "float32"), WSIZE=size(p["win"]), OSTR=ostr, WST=wst,
             STRIDE=p["strides"], WDIL=p["wdil"], LO=p["lo"], BASE=p["base"], DIL=p["dilated"], ISTR=istr)
    k = Kernel("reduce_window", [("out_", y.id), ("x", x.id), ("init_v", node.inputs[1])], y.size, d, node.label())
    return in_chunks(k, graph, 1 + r, "WSIZE", rw=("out_",))     # (1 + R: a window position's loop over the dims)


def _shape(node, vals, graph, need=None):
    x, y, p = _plan(node, graph)
    if need is not None and all(need[:2]):
        return [crw.reduce_window(p, np.asarray(vals[0]), vals[1])]
    return [rules.placeholder(p["out"], x.dtype)]


def from_stablehlo(g: ir.Graph, node: ir.Node, model) -> list[ir.Node]:
    """STABLEHLO_REDUCE_WINDOW -> a REDUCE_WINDOW node with its attributes and the body's function
    (compiler/ops/stablehlo.py runs it at import)."""
    attrs = {k: node.attrs.get(k) for k in ("window_dimensions", "window_strides", "base_dilations",
                                             "window_dilations", "padding")}
    bi = int(node.attrs.get("body_subgraph_index") or 0)
    subs = getattr(model, "subgraphs", [])
    body = subs[bi].nodes if 0 < bi < len(subs) else None
    if body is None or len(body) != 1 or body[0].op not in BODIES:
        node.attrs[REFUSAL_ATTR] = ("its body subgraph is not one ADD / MUL / MAXIMUM / MINIMUM / AND / OR op "
                                    "(LiteRT's kernel refuses it)")
        return [node]
    attrs.update(reduce_function=BODIES[body[0].op], **{FORM: True})
    return [ir.Node(OP, list(node.inputs), list(node.outputs), attrs, 1, node.index)]


# --- facts (compiler/ops/__init__.py FACT_FIELDS) ---------------------------------------------------
declare(OP, shape=_shape, exact=ALWAYS, sym_shape=Why("no dynamic-size rule: window arithmetic per dim"),
        batch=Why("no batch rule: windows may span the first dim"), pieces=Why("computes values"),
        fp16=UNSAFE, in_place=False, templates=("reduce_window",),
        flops=lambda node, graph: graph.t(node.outputs[0]).size * max(1, size(_plan(node, graph)[2]["win"])),
        cpu=OP)
template("reduce_window", item_major=False, flat=True)
