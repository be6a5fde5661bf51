"""FUSED_ELEMENTWISE: a chain (or small DAG) of float elementwise ops computed by one dispatch
(shaders/ew_fused.comp).  Never in a model: the `fuse_elementwise` pass (passes/ew_fusion.py) makes it
from the fusible ops of compiler/ew_table.py (and CAST) whose intermediates have a single consumer.

attrs["steps"]: one dict per fused op in program order: {"op", "args": [ref, ...], "act", the op's
parameters ("alpha", "approximate": its ew_table row's `params`), "fq", "r16"}; a ref is ("x", k)
(input k of the node: binding x<k>, broadcast to the output shape), ("c", value) (a scalar constant,
inlined as an exact float literal) or ("t", j) (the result of step j).  The last step is the output.
Intermediates and constants pass through ew_keep (opaque to the optimizer), so nothing is contracted
or specialised across ops; an operand repeated in one step goes through ew_keep2 the second time (no
x - x -> 0).  Each step's GLSL is the formula of the op's own kernel (the row's ew_math.glsl /
common.glsl function, gpuc_apply, gpuc_fq_to); "fq": the step's output had a fake-quant grid (rounded
there, as the unfused kernel did); "r16": under --precision fp16 the unfused program stored the
step's output as float16 (rounded there the same way).
"""
from __future__ import annotations

import numpy as np

from gpuc.compiler.codegen.kernel import Kernel
from gpuc.compiler.ew_table import FUSIBLE, TABLE
from gpuc.compiler.glsl_literal import literal
from gpuc.compiler.ir import Node
from gpuc.compiler.ops import NEUTRAL, REGISTRY, Why, declare, register, rules, template
from gpuc.compiler.ops.math import call
from gpuc.compiler.ops.ew_vector import VECS, binding_strides, vector_form  # noqa: F401 - VECS: read by tests
from gpuc.compiler.ops.reduce import reduce_axes
from gpuc.compiler.ops.util import broadcast_strides, checked, size

MAX_INPUTS = 7

# the fusible ops of compiler/ew_table.py, and CAST int32 -> float32 (or float32 -> float32): the input
# binding is int32 and the load converts it, as cast.comp does (float(int), round to nearest even)
OPS = FUSIBLE | {"CAST"}


def arity(op: str) -> int:
    return 1 if op == "CAST" else TABLE[op].arity


def _ref(r) -> str:
    kind, v = r
    if kind == "x":
        return f"v{int(v)}"
    if kind == "t":
        return f"t{int(v)}"
    return f"ew_keep({literal(float(np.float32(v)))})"


def _args(refs) -> list:
    """GLSL of a step's operands; the same value twice: the second through ew_keep2, so the optimizer
    cannot fold x - x, x / x ... (the unfused kernel loaded it twice, from two bindings)."""
    out = [_ref(r) for r in refs]
    if len(refs) == 2 and tuple(refs[0]) == tuple(refs[1]):
        out[1] = f"ew_keep2({out[1]})"
    return out


def step_expr(s: dict, args: list) -> str:
    """GLSL for one step, from the GLSL of its arguments."""
    op = s["op"]
    if op == "CAST":
        e = f"({args[0]})"
    else:
        e = call(op, args, s)
        if TABLE[op].fused_act:
            e = f"gpuc_apply({e}, {int(s.get('act', 0))})"
    if s.get("fq") is not None:
        scale, zp, lo, hi = s["fq"]
        e = f"gpuc_fq_to({e}, {literal(float(scale))}, {literal(float(zp))}, " \
            f"{literal(float(lo))}, {literal(float(hi))}, -1)"
    if s.get("r16"):
        e = f"EW_R16({e})"
    return e


def render_body(steps) -> tuple[str, str]:
    """(EW_BODY, EW_RESULT): one float local per step."""
    last = len(steps) - 1
    body = " ".join(f"float t{j} = {(e if j == last else f'ew_keep({e}, {j + 1}u)')};"
                    for j, s in enumerate(steps) for e in [step_expr(s, _args(s["args"]))])
    return body, f"t{len(steps) - 1}"


def steps_reason(node, graph) -> str | None:
    steps = node.attrs.get("steps")
    if not isinstance(steps, list) or not steps:
        return "no fused steps"
    for j, s in enumerate(steps):
        if s.get("op") not in OPS:
            return f"step {j}: op {s.get('op')!r} cannot be fused"
        args = s.get("args", [])
        if len(args) != arity(s["op"]):
            return f"step {j}: {s['op']} needs {arity(s['op'])} operands"
        for kind, v in args:
            if kind == "x" and not 0 <= int(v) < len(node.inputs) or kind == "t" and not 0 <= int(v) < j \
                    or kind == "c" and not np.isfinite(v) or kind not in ("x", "t", "c"):
                return f"step {j}: bad operand {(kind, v)!r}"
    return None


@checked
def _check(node, graph):
    if len(node.inputs) > MAX_INPUTS:
        return f"{len(node.inputs)} inputs (at most {MAX_INPUTS})"
    y = graph.t(node.outputs[0])
    for i in node.inputs:
        s = graph.t(i).shape
        padded = [1] * (len(y.shape) - len(s)) + list(s)
        if len(s) > len(y.shape) or any(p not in (1, o) for p, o in zip(padded, y.shape)):
            return f"input {graph.t(i).name!r} {list(s)} does not broadcast to {list(y.shape)}"
    for k, i in enumerate(node.inputs):
        t = graph.t(i)
        if t.dtype == "int32" and any(s.get("op") != "CAST" and ("x", k) in [tuple(r) for r in s.get("args", [])]
                                      for s in node.attrs.get("steps", [])):
            return f"int32 input {t.name!r} feeds an op other than CAST"
    if graph.t(node.outputs[0]).dtype != "float32":
        return "output must be float32"
    return steps_reason(node, graph)


@register("FUSED_ELEMENTWISE", check=_check, inputs=(1, MAX_INPUTS), dtypes=("float32", "int32"),
          summary="internal: a chain of elementwise ops fused into one kernel by the fuse_elementwise pass")
def lower_ew_fused(node, graph):
    y = graph.t(node.outputs[0])
    ins = [graph.t(i) for i in node.inputs]
    steps = node.attrs["steps"]
    body, result = render_body(steps)
    bcast = any(tuple(t.shape) != tuple(y.shape) for t in ins)
    defines = dict(NIN=len(ins), EW_BCAST=int(bcast), EW_BODY=body, EW_RESULT=result,
                   EW_ROUND16=int(any(s.get("r16") for s in steps)))
    vf = vector_form(ins, y.shape)
    n = size(y.shape)
    shape = list(y.shape) or [1]
    if vf:
        v, vec = vf
        n //= 4 * v
        shape[-1] //= 4 * v
        defines.update(EW_VEC=v, VEC_IN=sum(1 << k for k, on in enumerate(vec) if on))
    if bcast:
        defines.update(RANK=max(len(y.shape), 1), OUT_SHAPE=shape)
        for k, t in enumerate(ins):
            defines[f"I{k}_STRIDES"] = (binding_strides(t.shape, y.shape, vf, k) if vf
                                        else broadcast_strides(t.shape, y.shape) or [0])
    binds = [("out_", y.id)] + [(f"x{k}", t.id) for k, t in enumerate(ins)]
    label = f"{'+'.join(s['op'] for s in steps)} (operator #{node.index})"
    vec4 = ("out_",) + tuple(f"x{k}" for k, on in enumerate(vf[1]) if on) if vf else ()
    return [Kernel("ew_fused", binds, n, defines, label, vec4=vec4)]


def sample_steps() -> list:
    """Every op once, chained on input 0 (for `make shaders`)."""
    steps, prev = [], ("x", 0)
    for op in sorted(OPS):
        args = [prev] + [("c", 0.5)] * (arity(op) - 1)
        steps.append(dict(op=op, args=args, act=3, alpha=0.2, approximate=op == "GELU",
                          fq=(0.02, 3, -128, 127) if op == "ADD" else None, r16=op == "MUL"))
        prev = ("t", len(steps) - 1)
    return steps


_BODY, _RESULT = render_body(sample_steps())
_EW = dict(RANK=3, OUT_SHAPE=[2, 3, 4], EW_BODY=_BODY, EW_RESULT=_RESULT, FQ_SCALE=0.0235, FQ_ZP=-5, FQ_MIN=-128,
           FQ_MAX=127, **{f"I{k}_STRIDES": [12, 4, 1] if k % 2 else [0, 0, 1] for k in range(MAX_INPUTS)})
_NAMES = ["out_"] + [f"x{k}" for k in range(MAX_INPUTS)]
VARIANTS = {
    "ew_fused": (_EW, {"NIN": [1, 2, MAX_INPUTS], "EW_BCAST": [0, 1], "EW_ROUND16": [0, 1], "FQ": [0, 1]},
                 _NAMES, {"x1": "int32"}),                                      # (x1: a CAST's input)
    # the vector form: VEC_IN 0x55: x1 (int32), x3, x5 broadcast along the innermost dim (scalars)
    "ew_fused:vec": (dict(_EW, EW_ROUND16=1), {"NIN": [2, MAX_INPUTS], "EW_BCAST": [0, 1], "EW_VEC": [1, 2],
                                               "VEC_IN": [0x55, 0x7F], "FQ": [0, 1]},
                     _NAMES, {"x1": "int32"},
                     lambda d: dict(vec4=("out_",) + tuple(f"x{k}" for k in range(MAX_INPUTS) if d["VEC_IN"] >> k & 1))),
}


# ------------------------------------------------------------------------------------------------
# FUSED_REDUCE: MEAN / SUM / REDUCE_MAX / REDUCE_MIN / REDUCE_PROD whose input is computed per element
# by a fused elementwise prologue (reduce.comp PROLOGUE; pass fuse_reduce_prologue).  Inputs: the
# prologue's inputs, then the reduction axes; attrs: "steps" (as above; the last one is the reduced
# value), "reduce" (the op), "x" (the tensor the prologue replaces: its shape is the reduced shape).

def _reduce_node(node):
    return Node(node.attrs["reduce"], [node.attrs["x"], node.inputs[-1]], list(node.outputs),
                attrs={k: v for k, v in node.attrs.items() if k not in ("steps", "reduce", "x", "fused")},
                index=node.index)


@checked
def _check_reduce(node, graph):
    if node.attrs.get("reduce") not in ("MEAN", "SUM", "REDUCE_MAX", "REDUCE_MIN", "REDUCE_PROD"):
        return f"cannot fuse a prologue into {node.attrs.get('reduce')!r}"
    x = graph.t(node.attrs["x"])
    if len(node.inputs) - 1 > MAX_INPUTS or len(node.inputs) < 2:
        return f"{len(node.inputs) - 1} prologue inputs (1..{MAX_INPUTS})"
    for i in node.inputs[:-1]:
        s = graph.t(i).shape
        padded = [1] * (len(x.shape) - len(s)) + list(s)
        if len(s) > len(x.shape) or any(p not in (1, o) for p, o in zip(padded, x.shape)):
            return f"input {graph.t(i).name!r} {list(s)} does not broadcast to {list(x.shape)}"
        if graph.t(i).dtype != "float32":
            return f"prologue input {graph.t(i).name!r} must be float32"
    reason = steps_reason(Inputs(node.inputs[:-1], node.attrs), graph)
    return reason or REGISTRY[node.attrs["reduce"]].check(_reduce_node(node), graph)


class Inputs:
    """A node-like view (inputs, attrs) for steps_reason."""
    def __init__(self, inputs, attrs):
        self.inputs, self.attrs = list(inputs), attrs


@register("FUSED_REDUCE", check=_check_reduce, inputs=(2, MAX_INPUTS + 1),
          summary="internal: a reduction computing its input with a fused elementwise prologue (fuse_reduce_prologue)")
def lower_fused_reduce(node, graph):
    rn = _reduce_node(node)
    ks = REGISTRY[rn.op].lower(rn, graph)
    x = graph.t(node.attrs["x"])
    axes = reduce_axes(rn, graph)
    keep = [d for d in range(len(x.shape)) if d not in axes]
    ins = [graph.t(i) for i in node.inputs[:-1]]
    ik, ir = [], []
    for t in ins:
        st = broadcast_strides(t.shape, x.shape)
        ik += [st[d] for d in keep] or [0]
        ir += [st[d] for d in axes] or [0]
    steps = node.attrs["steps"]
    body, result = render_body(steps)
    label = f"{'+'.join(s['op'] for s in steps)}+{rn.op} (operator #{node.index})"
    out = []
    for k in ks:
        if ("x", x.id) not in k.bindings:   # (a long reduction's second dispatch, over the first's partials)
            out.append(k)
            continue
        k.bindings = [b for b in k.bindings if b[0] != "x"] + [(f"x{j}", t.id) for j, t in enumerate(ins)]
        k.defines.update(PROLOGUE=1, NIN=len(ins), EW_BODY=body, EW_RESULT=result, IK_STRIDES=ik, IR_STRIDES=ir,
                         EW_ROUND16=int(any(s.get("r16") for s in steps)))
        k.label = label + k.label.removeprefix(rn.label())    # (what the reduce lowering added, e.g. ": 3 parts")
        out.append(k)
    return out


# --- facts (compiler/ops/__init__.py FACT_FIELDS) ---------------------------------------------------
_MADE = Why("an internal op the fusion passes make after shapes are propagated and the graph batched")
declare("FUSED_ELEMENTWISE", "FUSED_REDUCE", shape=_MADE, exact=_MADE, sym_shape=_MADE, batch=_MADE,
        pieces=Why("computes values"), fp16=NEUTRAL, templates=("ew_fused",), flops=rules.per_output,
        cpu=Why("internal op: no CPU kernel (the unfused ops have theirs)"))
declare("FUSED_ELEMENTWISE", in_place=True)
declare("FUSED_REDUCE", in_place=False)
template("ew_fused", item_major=True, flat=True, in_place=None)
