"""READ_VARIABLE / ASSIGN_VARIABLE after passes/variables.py resolve_variables: plain copies between
a persistent variable tensor and an ordinary one (shaders/copy_nd.comp; 1-byte dtypes as words).

READ_VARIABLE(V) -> y copies the variable; ASSIGN_VARIABLE(x) -> V overwrites it.  Their order is
the node order (the runtime's barrier between dispatches orders the read before a later write)."""
from __future__ import annotations

from gpuc.compiler.ops import NEUTRAL, Why, declare, register, rules
from gpuc.compiler.ops.math import words
from gpuc.compiler.ops.shape import copy_kernel
from gpuc.compiler.ops.util import checked


@checked
def _check(node, graph):
    x, y = graph.t(node.inputs[0]), graph.t(node.outputs[0])
    var = x if node.op == "READ_VARIABLE" else y
    if x.dtype == "resource" or y.dtype == "resource" or not var.is_variable:
        return "resource handle not resolved to a variable"
    if x.shape != y.shape or x.dtype != y.dtype:
        return f"value {x.dtype}{list(x.shape)} does not match variable {y.dtype}{list(y.shape)}"
    return None


@register("READ_VARIABLE", "ASSIGN_VARIABLE", check=_check, inputs=(1, 1),
          dtypes=("float32", "int32", "uint32", "bool", "int8", "uint8"),
          summary="resource variables: one persistent tensor per (container, shared_name); copies in program order")
def lower_variable(node, graph):
    src, dst = words(graph, node.inputs[0]), words(graph, node.outputs[0])
    n = graph.t(dst).size
    return [copy_kernel(src, dst, [n], [1], [1], label=node.label())]


# --- facts (compiler/ops/__init__.py FACT_FIELDS) ---------------------------------------------------
declare("READ_VARIABLE", "ASSIGN_VARIABLE", shape=Why("no shape rule: a variable's shape is the model's"),
        exact=Why("a variable changes at run time"), sym_shape=Why("no dynamic-size rule: variables have fixed sizes"),
        batch="variable", pieces=Why("a state read or write, not movement"), fp16=NEUTRAL, in_place=False,
        templates=("copy_nd",), flops=rules.per_output)
declare("READ_VARIABLE", cpu="READ_VARIABLE")
declare("ASSIGN_VARIABLE", cpu="ASSIGN_VARIABLE")
