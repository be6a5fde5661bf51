"""The STABLEHLO_* builtins: one table says what becomes of each (`LOWERINGS`, `NOT_RUN`, `NOT_YET`).

LiteRT 2.3's interpreter registers only a few of the schema's StableHLO builtins; a model with any
other one fails in LiteRT (`Didn't find op for builtin opcode`), so gpuc refuses it too, for that
reason (NOT_RUN, checked by tests/ops/test_stablehlo.py against LiteRT itself).  Of the ones LiteRT
runs, each row of LOWERINGS rewrites the node, at import (`lower_stablehlo`, after
STABLEHLO_COMPOSITE is inlined), into gpuc's builtins with LiteRT's semantics:

* ADD / MULTIPLY: ADD / MUL (no fused activation).  LiteRT takes two inputs of one dtype and one
  shape (no broadcasting); integers wrap as in gpuc's kernels.
* MAXIMUM / MINIMUM: LiteRT computes std::max(a, b) / std::min(a, b), which is TFLite's MAXIMUM /
  MINIMUM (`a > b ? a : b`) with the operands swapped: NaN and -0.0 come out exactly as LiteRT's.
* AND on bool: LOGICAL_AND; on integers (bitwise) and SHIFT_LEFT: kept for their own kernel
  (compiler/ops/int_bitwise.py).
* REDUCE_WINDOW: a REDUCE_WINDOW node with its attributes and its body op's function
  (compiler/ops/reduce_window.py).
* PAD (operand, scalar padding value; edge_padding_low / high, which may be negative, and
  interior_padding): interior padding is RESHAPE (a unit axis after each padded one) + PADV2 of that
  axis + RESHAPE; edge padding is PADV2 of the positive parts, then SLICE of the negative ones.

A node LiteRT refuses (shapes or dtypes its Prepare rejects) keeps its op and gets the reason in
attrs[REFUSAL_ATTR]: `gpuc inspect` shows it and compiling it is an error naming the operator.
The StableHLO builtins LiteRT runs that gpuc does not lower yet are refused with NOT_YET's reason.
"""
from __future__ import annotations

import numpy as np

from gpuc.compiler import ir
from gpuc.compiler.frontend.tflite_schema import ENUMS
from gpuc.compiler.ops import REFUSAL_ATTR, handled, refuse

PREFIX = "STABLEHLO_"
NOT_RUN_REASON = "LiteRT's interpreter does not run it"
# the StableHLO builtins LiteRT 2.3's interpreter runs but gpuc does not lower yet -> why
NOT_YET: dict = {}
CONTROL = "STABLEHLO_CASE"            # program structure: compiler/control_flow.py (compiler/ops/case_branch.py)
INLINED = "STABLEHLO_COMPOSITE"       # compiler/frontend/composite.py inlines it before this runs


def _refused(node: ir.Node, why: str) -> list[ir.Node]:
    node.attrs[REFUSAL_ATTR] = f"{why} (LiteRT's kernel refuses it)"
    return [node]


def _same_operands(g: ir.Graph, node: ir.Node) -> str | None:
    """None when the node has LiteRT's elementwise form: 2 inputs and 1 output of one dtype and shape."""
    if len(node.inputs) != 2 or len(node.outputs) != 1 or min(node.inputs) < 0:
        return f"has {len(node.inputs)} inputs and {len(node.outputs)} outputs (expected 2 and 1)"
    a, b, y = (g.t(i) for i in (*node.inputs, node.outputs[0]))
    if a.dtype != b.dtype or a.dtype != y.dtype:
        return f"operands {a.dtype} / {b.dtype} and output {y.dtype} differ in dtype"
    if tuple(a.shape) != tuple(b.shape) or tuple(a.shape) != tuple(y.shape):
        return f"operand shapes {list(a.shape)} / {list(b.shape)} and output {list(y.shape)} differ"
    return None


def _binary(op: str, swap: bool = False, attrs: dict | None = None, dtypes: tuple = ()):
    def lower(g: ir.Graph, node: ir.Node) -> list[ir.Node]:
        bad = _same_operands(g, node)
        if bad:
            return _refused(node, bad)
        if dtypes and g.t(node.inputs[0]).dtype not in dtypes:
            if node.op in NOT_YET:
                node.attrs[REFUSAL_ATTR] = NOT_YET[node.op]
            return [node]               # (its own kernel runs it: OWN_KERNEL)
        ins = list(node.inputs[::-1] if swap else node.inputs)
        return [ir.Node(op, ins, list(node.outputs), dict(attrs or {}), 1, node.index)]
    return lower


def _pad(g: ir.Graph, node: ir.Node) -> list[ir.Node]:
    if len(node.inputs) != 2 or len(node.outputs) != 1 or min(node.inputs) < 0:
        return _refused(node, f"has {len(node.inputs)} inputs and {len(node.outputs)} outputs (expected 2 and 1)")
    x, v, y = g.t(node.inputs[0]), g.t(node.inputs[1]), g.t(node.outputs[0])
    r = len(x.shape)
    lo, hi, mid = ([int(a) for a in (node.attrs.get(f) or [])] for f in
                   ("edge_padding_low", "edge_padding_high", "interior_padding"))
    mid = mid or [0] * r
    if len(lo) != r or len(hi) != r or len(mid) != r:
        return _refused(node, f"padding vectors of lengths {len(lo)}/{len(hi)}/{len(mid)} for a rank-{r} operand")
    if any(m < 0 for m in mid):
        return _refused(node, f"negative interior_padding {mid}")
    if v.size != 1 or v.dtype != x.dtype or y.dtype != x.dtype:
        return _refused(node, f"padding value {v.dtype} {list(v.shape)} must be one {x.dtype} value like the output")
    dil = [n + max(n - 1, 0) * m for n, m in zip(x.shape, mid)]
    want = [d + a + b for d, a, b in zip(dil, lo, hi)]
    if any(w < 0 for w in want) or list(y.shape) != want:
        return _refused(node, f"output {list(y.shape)} is not {list(x.shape)} padded to {want}")
    steps = []                # (op, inputs after the current tensor, shape of its result)
    if any(mid):
        steps.append(("RESHAPE", [], [d for n in x.shape for d in (n, 1)]))
        steps.append(("PADV2", [_const(g, y, "interior", [p for m in mid for p in ([0, 0], [0, m])]), v.id],
                      [d for n, m in zip(x.shape, mid) for d in (n, 1 + m)]))
        steps.append(("RESHAPE", [], [n * (1 + m) for n, m in zip(x.shape, mid)]))
        hi = [h - (m if n else 0) for h, m, n in zip(hi, mid, x.shape)]      # the dilation's trailing fill
    grow = [[max(a, 0), max(b, 0)] for a, b in zip(lo, hi)]
    if any(a or b for a, b in grow):
        shape = steps[-1][2] if steps else list(x.shape)
        steps.append(("PADV2", [_const(g, y, "edges", grow), v.id], [d + a + b for d, (a, b) in zip(shape, grow)]))
    if any(a < 0 or b < 0 for a, b in zip(lo, hi)):
        steps.append(("SLICE", [_const(g, y, "begin", [max(-a, 0) for a in lo]), _const(g, y, "size", want)], want))
    if not steps:
        steps.append(("RESHAPE", [], want))          # no padding at all: a copy
    nodes, cur = [], x.id
    for k, (op, rest, shape) in enumerate(steps):
        out = y.id if k == len(steps) - 1 else g.add_tensor(f"{y.name}/{op.lower()}{k}", shape, x.dtype)
        nodes.append(g.reshape_node(cur, out, shape) if op == "RESHAPE" else ir.Node(op, [cur] + rest, [out], {}, 1))
        nodes[-1].index = node.index
        cur = out
    return nodes


def _reduce_window(g: ir.Graph, node: ir.Node, model) -> list[ir.Node]:
    from gpuc.compiler.ops.reduce_window import from_stablehlo     # (its body op: compiler/ops/reduce_window.py)
    return from_stablehlo(g, node, model)


def _scatter(g: ir.Graph, node: ir.Node, model) -> list[ir.Node]:
    from gpuc.compiler.ops.shlo_scatter import from_stablehlo     # (its update computation: shlo_scatter.py)
    return from_stablehlo(g, node, model)


def _const(g: ir.Graph, y, what: str, values) -> int:
    return g.add_const(f"{y.name}/{what}", np.asarray(values, np.int32))


# StableHLO builtin -> its lowering (graph, node) -> the nodes replacing it
LOWERINGS = {
    "STABLEHLO_ADD": _binary("ADD", attrs={"fused_activation_function": 0}),
    "STABLEHLO_MULTIPLY": _binary("MUL", attrs={"fused_activation_function": 0}),
    "STABLEHLO_MAXIMUM": _binary("MAXIMUM", swap=True),
    "STABLEHLO_MINIMUM": _binary("MINIMUM", swap=True),
    "STABLEHLO_AND": _binary("LOGICAL_AND", dtypes=("bool",)),     # (LOWERED_DTYPES)
    "STABLEHLO_PAD": _pad,
    "STABLEHLO_REDUCE_WINDOW": lambda g, n, model: _reduce_window(g, n, model),
    "STABLEHLO_SHIFT_LEFT": lambda g, n: _refused(n, _same_operands(g, n)) if _same_operands(g, n) else [n],
    "STABLEHLO_GATHER": lambda g, n: [n],
    "STABLEHLO_SCATTER": lambda g, n, model: _scatter(g, n, model),
    "STABLEHLO_RNG_BIT_GENERATOR": lambda g, n: [n],
}
# kept as they are for their own GPU kernel (compiler/ops/int_bitwise.py: SHIFT_LEFT, integer AND;
# compiler/ops/shlo_gather.py: GATHER; compiler/ops/shlo_scatter.py: SCATTER, its computation read here)
OWN_KERNEL = {"STABLEHLO_SHIFT_LEFT", "STABLEHLO_AND", "STABLEHLO_GATHER", "STABLEHLO_SCATTER",
              "STABLEHLO_RNG_BIT_GENERATOR"}             # (compiler/ops/rng_bit_generator.py)
WITH_MODEL = {"STABLEHLO_REDUCE_WINDOW", "STABLEHLO_SCATTER"}             # lowerings that read other subgraphs (a body)
# what each lowering becomes (for `gpuc ops`)
TARGETS = {"STABLEHLO_ADD": "ADD", "STABLEHLO_MULTIPLY": "MUL", "STABLEHLO_MAXIMUM": "MAXIMUM",
           "STABLEHLO_MINIMUM": "MINIMUM", "STABLEHLO_AND": "LOGICAL_AND", "STABLEHLO_PAD": "PADV2",
           "STABLEHLO_REDUCE_WINDOW": "REDUCE_WINDOW"}
LOWERED_DTYPES = {"STABLEHLO_AND": ("bool",)}        # where a lowering takes fewer dtypes than its target
ALL = sorted(n for n in ENUMS["BuiltinOperator"] if n.startswith(PREFIX))
NOT_RUN = sorted(set(ALL) - set(LOWERINGS) - set(NOT_YET) - {INLINED, CONTROL})

refuse(*NOT_RUN, reason=NOT_RUN_REASON)
for _n, _why in NOT_YET.items():
    if _n not in LOWERINGS:
        refuse(_n, reason=_why)
for _n, _to in TARGETS.items():
    handled(_n, how=f"lowered at import to {_to}" + (f"; {NOT_YET[_n]}" if _n in NOT_YET else ""), runs_as=_to,
            dtypes=LOWERED_DTYPES.get(_n, ()))
handled(INLINED, how="inlined at import: its decomposition subgraph's ops run")


def lower_stablehlo(model: ir.Model) -> None:
    """Every StableHLO node with a lowering replaced by gpuc builtins (in place, every subgraph)."""
    for g in model.subgraphs:
        if not any(n.op in LOWERINGS for n in g.nodes):
            continue
        nodes = []
        for n in g.nodes:
            if n.op in LOWERINGS:
                nodes += LOWERINGS[n.op](g, n, model) if n.op in WITH_MODEL else LOWERINGS[n.op](g, n)
            else:
                nodes.append(n)
        g.nodes = nodes
