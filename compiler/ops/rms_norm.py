"""RMS_NORM: an `odml.rms_norm` composite (litert-torch's RMSNorm) as one dispatch, made by
compiler/frontend/composite.py where its decomposition is the chain LiteRT runs:
    ms = MEAN(x * x, last axis);  r = RSQRT(ms + eps);  y = (x * r) * w
(RESHAPEs between them allowed; either operand order of each MUL / ADD).  Inputs: x, w [D];
attrs eps (the decomposition's constant: LiteRT computes with it; a composite attribute `epsilon`
that disagrees keeps the decomposition).  shaders/rms_norm.comp: one workgroup per row, fp32 sums."""
from __future__ import annotations

import numpy as np

from gpuc.compiler.codegen.kernel import Kernel
from gpuc.compiler.ir import Node
from gpuc.compiler.ops import NEUTRAL, SHAPE_ONLY, Why, declare, fuses, register, rules, template
from gpuc.compiler.ops.decomposition import Decomposition, attributes
from gpuc.compiler.ops.reduce import SUBGROUP_VARIANT
from gpuc.compiler.ops.util import checked

OP = "RMS_NORM"
COMPOSITE = "odml.rms_norm"

VARIANTS = {
    "rms_norm": (dict(D=10, EPS=1e-6), {"SUBGROUP": [0, 1]}, ["out_", "x", "w"], {}, lambda d: dict(local_x=64)),
}


def _other(m: Node, tid: int) -> int | None:
    """The operand of binary `m` that is not `tid` (None when neither is)."""
    a, b = m.inputs
    return b if a == tid else a if b == tid else None


@fuses(COMPOSITE)
def fuse(n: Node, g, s) -> list[Node] | None:
    """The RMS_NORM node computing composite `n`, or None where its decomposition `s` is another form."""
    if len(s.inputs) != 2 or len(s.outputs) != 1 or len(n.inputs) != 2:
        return None
    dec = Decomposition(n, s)
    xs, ws = s.inputs
    x = s.t(xs)
    d = int(x.shape[-1]) if x.shape else 0
    if d < 1 or tuple(s.t(ws).shape) != (d,) or x.dtype != "float32" or s.t(ws).dtype != "float32":
        return None
    scaled = dec.node(s.outputs[0], "MUL", 2, through_reshape=False)      # (x * r) * w
    if scaled is None or _other(scaled, ws) is None:
        return None
    xr = dec.node(_other(scaled, ws), "MUL", 2, through_reshape=False)    # x * r
    if xr is None or _other(xr, xs) is None:
        return None
    rs = dec.node(_other(xr, xs), "RSQRT", 1)
    if rs is None or tuple(s.t(rs.outputs[0]).shape) != (*x.shape[:-1], 1):
        return None                            # (r must broadcast over each row's D elements)
    add = dec.node(rs.inputs[0], "ADD", 2)
    if add is None:
        return None
    eps = [dec.scalar(i) for i in add.inputs]
    if sum(e is not None for e in eps) != 1:
        return None
    k = 0 if eps[0] is not None else 1
    mean = dec.node(add.inputs[1 - k], "MEAN", 2)
    sq = mean and dec.node(mean.inputs[0], "MUL", 2, through_reshape=False)
    axes = mean and dec.const(mean.inputs[1])
    if sq is None or list(sq.inputs) != [xs, xs] or axes is None or \
            sorted({int(a) % len(x.shape) for a in axes.reshape(-1)}) != [len(x.shape) - 1]:
        return None
    if not dec.all_used():
        return None
    eps = np.float32(eps[k])
    given = attributes(n).get("epsilon")
    if given is not None and np.float32(given) != eps:
        return None
    return [Node(OP, list(n.inputs), list(n.outputs), {"eps": float(eps), "composite": COMPOSITE}, 1, n.index)]


@checked
def _check(node, graph):
    x, w, y = (graph.t(t) for t in (node.inputs[0], node.inputs[1], node.outputs[0]))
    if not x.shape or tuple(w.shape) != (x.shape[-1],) or tuple(x.shape) != tuple(y.shape):
        return f"cannot normalize {list(x.shape)} by a weight of {list(w.shape)} into {list(y.shape)}"
    if not np.isfinite(float(node.attrs["eps"])):
        return f"epsilon {node.attrs['eps']} is not finite"
    return None


@register(OP, check=_check, inputs=(2, 2),
          summary="internal: an odml.rms_norm composite in one dispatch (compiler/frontend/composite.py)")
def lower_rms_norm(node, graph):
    x, y = graph.t(node.inputs[0]), graph.t(node.outputs[0])
    d = int(x.shape[-1])
    rows = x.size // d
    if rows == 0:
        return []
    local = 256 if d >= 2048 else 128 if d >= 512 else 64
    k = Kernel("rms_norm", [("out_", y.id), ("x", x.id), ("w", node.inputs[1])], rows * local,
               dict(D=d, EPS=float(node.attrs["eps"])), node.label(), local_x=local, flops=4 * x.size)
    k.variants.append(SUBGROUP_VARIANT)
    return [k]


# --- facts (compiler/ops/__init__.py FACT_FIELDS) ---------------------------------------------------
declare(OP, shape=rules.same_shape, exact=SHAPE_ONLY, sym_shape="same", batch="softmax",
        pieces=Why("computes values"), fp16=NEUTRAL, in_place=False, templates=("rms_norm",),
        flops=rules.per_output, cpu=Why("internal op: where the GPU refuses it the decomposition is inlined"))
template("rms_norm", item_major=True, flat=False)
