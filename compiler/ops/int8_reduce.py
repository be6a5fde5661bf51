"""Native int8 REDUCE_MAX / REDUCE_MIN (INT8_REDUCE_MAX, INT8_REDUCE_MIN) and ARG_MAX / ARG_MIN of an int8
activation (INT8_ARG_MAX, INT8_ARG_MIN), as LiteRT's int8 kernels compute them: on the raw bytes.

* REDUCE_MAX / REDUCE_MIN (reduce.cc, int8): the largest / smallest byte over any set of axes (negative and
  repeated ones too), keep_dims or not.  LiteRT's kernel fails a model whose output grid is not its input's
  (scale and zero point compared; found by experiment on LiteRT 2.3): REFUSALS refuses it here too.  The
  reduction runs in shaders/int8_eltwise.comp (OP 13 / 14) over at most MAX_RANK runs of kept and reduced
  dims.
* ARG_MAX / ARG_MIN (arg_min_max.cc): the raw bytes compared, the first index winning ties: the generic op's
  kernel (ops/argminmax.py, which reads int8 bytes from a word view) on the int8 tensor as it is.
passes/quant.py native_int8 makes these ops when the whole model runs in int8."""
from __future__ import annotations

import copy

import numpy as np

from gpuc.compiler.codegen.kernel import Kernel
from gpuc.compiler.ops import BOUNDED, REGISTRY, register, rules
from gpuc.compiler.ops.int8_facts import declare_int8
from gpuc.compiler.ops.int8_common import REFUSALS, int8_activation, native_form, per_tensor, scale_zp
from gpuc.compiler.ops import argminmax  # noqa: F401 (the generic op first)
from gpuc.compiler.ops.math import words
from gpuc.compiler.ops.util import checked, strides

from gpuc.compiler.ops.int8_common import ARG_MAX, ARG_MIN, REDUCE_MAX, REDUCE_MIN  # noqa: E402 (the int8 op names)
_SRC = {REDUCE_MAX: "REDUCE_MAX", REDUCE_MIN: "REDUCE_MIN", ARG_MAX: "ARG_MAX", ARG_MIN: "ARG_MIN"}
MAX_RANK = 6        # runs of kept dims and of reduced dims, each (shaders/int8_eltwise.comp KD*, KS*, RD*, RS*)


def _grids_differ(node, graph):
    """LiteRT's int8 REDUCE_MAX / REDUCE_MIN fails where the output's scale or zero point is not the input's:
    None, or the reason."""
    if len(node.inputs) < 1 or node.inputs[0] < 0 or len(node.outputs) != 1 or node.outputs[0] < 0:
        return None
    x, y = graph.t(node.inputs[0]), graph.t(node.outputs[0])
    if x.dtype != "int8" or y.dtype != "int8" or not per_tensor(x) or not per_tensor(y) or scale_zp(x) == scale_zp(y):
        return None
    (sx, zx), (sy, zy) = scale_zp(x), scale_zp(y)
    return (f"int8 output {y.name!r} (scale {sy:.9g}, zero point {zy}) is on another grid than its input "
            f"{x.name!r} (scale {sx:.9g}, zero point {zx}), which LiteRT's int8 kernel refuses")


for _op in ("REDUCE_MAX", "REDUCE_MIN"):
    REFUSALS[_op] = _grids_differ


def reduce_plan(node, graph) -> tuple:
    """(x, y, defines): the reduction of x over its axes as runs of kept dims (KD*, input strides KS*) and of
    reduced dims (RD*, RS*), R the reduced count."""
    x, y = graph.t(node.inputs[0]), graph.t(node.outputs[0])
    if not int8_activation(graph, x.id) or y.dtype != "int8" or not per_tensor(y):
        raise ValueError("input and output must be per-tensor quantized int8 activations")
    if _grids_differ(node, graph):
        raise ValueError(_grids_differ(node, graph))
    ax = graph.t(node.inputs[1])
    if not ax.is_const or ax.data is None:
        raise ValueError("axis must be constant")
    rank = len(x.shape)
    raw = [int(v) for v in np.asarray(ax.data).reshape(-1)]
    if any(not -rank <= a < rank for a in raw):
        raise ValueError(f"axis {raw} out of range for rank {rank}")
    red = {a % rank for a in raw}
    st = strides(x.shape)
    runs = []                               # [reduced?, size, stride of the innermost dim]
    for d in range(rank):
        n, r = int(x.shape[d]), d in red
        if n == 1:
            continue
        if runs and runs[-1][0] == r and runs[-1][2] == n * st[d]:
            runs[-1][1] *= n
            runs[-1][2] = st[d]
        else:
            runs.append([r, n, st[d]])
    kept = [(n, s) for r, n, s in runs if not r]
    reduced = [(n, s) for r, n, s in runs if r]
    if len(kept) > MAX_RANK or len(reduced) > MAX_RANK:
        raise ValueError(f"more than {MAX_RANK} runs of kept or reduced dims")
    if int(np.prod([n for n, _ in kept])) != y.size:
        raise ValueError(f"output {list(y.shape)} is not {list(x.shape)} reduced over axes {sorted(red)}")
    kept = [(1, 0)] * (MAX_RANK - len(kept)) + kept
    reduced = [(1, 0)] * (MAX_RANK - len(reduced)) + reduced
    d = {f"KD{k}": n for k, (n, _) in enumerate(kept)}
    d.update({f"KS{k}": s for k, (_, s) in enumerate(kept)}, **{f"RD{k}": n for k, (n, _) in enumerate(reduced)},
             **{f"RS{k}": s for k, (_, s) in enumerate(reduced)}, R=int(np.prod([n for n, _ in reduced])))
    return x, y, d


def _generic(node):
    g = copy.copy(node)
    g.op = _SRC.get(node.op, node.op)
    return g


def _arg_plan(node, graph):
    x = graph.t(node.inputs[0])
    if not int8_activation(graph, x.id):
        raise ValueError(f"input {x.name!r} is not a per-tensor quantized int8 activation")
    why = REGISTRY[_SRC.get(node.op, node.op)].check(_generic(node), graph)
    if why:
        raise ValueError(why)


@checked
def _check(node, graph):
    if _SRC.get(node.op, node.op) in ("ARG_MAX", "ARG_MIN"):
        _arg_plan(node, graph)
    else:
        reduce_plan(node, graph)
    return None


@register(REDUCE_MAX, REDUCE_MIN, check=_check, dtypes=("int8",), inputs=(2, 2), quantized_io=True,
          summary="internal: native int8 max / min reduction of the raw bytes (passes/quant.py native_int8)")
def lower_int8_reduce(node, graph):
    x, y, d = reduce_plan(node, graph)
    d.update(NOUT=y.size, OP=13 if node.op == REDUCE_MAX else 14)
    binds = [("out_", words(graph, y.id)), ("a", words(graph, x.id))]
    return [Kernel("int8_eltwise", binds, -(-y.size // 4), d, node.label())]


@register(ARG_MAX, ARG_MIN, check=_check, dtypes=("int8", "int32", "int64"), inputs=(2, 2), quantized_io=True,
          summary="internal: native int8 arg max / min of the raw bytes (passes/quant.py native_int8)")
def lower_int8_arg(node, graph):
    return REGISTRY[_SRC[node.op]].lower(_generic(node), graph)


native_form(("REDUCE_MAX", REDUCE_MAX), ("REDUCE_MIN", REDUCE_MIN), ("ARG_MAX", ARG_MAX), ("ARG_MIN", ARG_MIN),
            check=_check)

declare_int8(REDUCE_MAX, REDUCE_MIN, templates=("int8_eltwise",), flops=lambda n, g: g.t(n.inputs[0]).size)
declare_int8(ARG_MAX, ARG_MIN, templates=("arg_reduce",), fp16=BOUNDED, flops=rules.per_output)
