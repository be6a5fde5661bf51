"""ROPE: a rotary position embedding written as plain ops (litert-torch's `apply_rope`) as one dispatch.

fuse_rope (run by compiler/passes/__init__.py before movement folding) matches, for x [..., 2h]:
    x1 = SLICE(x, last axis [0, h));  x2 = SLICE(x, last axis [h, 2h))
    out = CONCATENATION([x1 * c - x2 * s, x2 * c + x1 * s], last axis)
(either operand order of each MUL / ADD; c and s one shape, broadcast to [..., h]; no fused
activation; every intermediate used by the chain only) and writes ROPE(src, c, s) -> out, computed in
LiteRT's order (shaders/rope.comp, `precise`).  x is read where it lies: where it is a RESHAPE of a
last-axis SLICE of src (the q or k part of a fused QKV projection), the kernel reads src itself
(attrs src_row, src_w, src_begin) and neither the SLICE nor the RESHAPE runs.  Recognised by graph
structure only, never by names.  A ROPE read only by a decode attention (q) is computed inside it
(SDPA_DECODE attrs rope: ops/sdpa_decode.py); one read only by a DYNAMIC_UPDATE_SLICE (k) writes into
the KV cache itself (ops/kv_write.py).  A small grouped-query decoder's decode step: 10 dispatches per layer -> 1."""
from __future__ import annotations

import numpy as np

from gpuc.compiler.codegen.kernel import Kernel
from gpuc.compiler.ir import Graph, Node
from gpuc.compiler.ops import NEUTRAL, Why, declare, register, rules, template
from gpuc.compiler.ops.shape import copy_kernel
from gpuc.compiler.ops.util import broadcast_strides, checked, strides
from gpuc.compiler.pattern import Op, Val, no_act, one_output, replace_nodes, rewrite

OP = "ROPE"
ATTENTION = "SDPA_DECODE"

_V = dict(H2=4, SRC_ROW=24, SRC_W=40, SRC_BEGIN=8, RANK=3, HALF_SHAPE=[1, 3, 4], CS_STRIDES=[0, 0, 1])
VARIANTS = {
    "rope": (_V, {}, ["out_", "x", "cosv", "sinv"], {}),
    "rope:dus": (dict(_V, DUS=1, URANK=3, X_SHAPE=[1, 3, 8], OUT_STRIDES=[80, 8, 1], MAX_START=[0, 7, 0]), {},
                 ["out_", "x", "cosv", "sinv", "start"], {"start": "int32"}),
}


def _ints(shape):
    """The shape as ints, or None where a dim is not a plain int (symbolic sizes: no match)."""
    try:
        return [int(d) for d in shape] if all(isinstance(d, (int, np.integer)) for d in shape) else None
    except TypeError:
        return None


def _const(g: Graph, tid: int):
    t = g.t(tid) if tid >= 0 else None
    return None if t is None or t.data is None else np.asarray(t.data).reshape(-1)


def last_axis_slice(g: Graph, m: Node, shape) -> tuple[int, int] | None:
    """(begin, size) of SLICE `m` along its input's last axis, None unless it slices that axis only."""
    b, s = _const(g, m.inputs[1]), _const(g, m.inputs[2])
    if b is None or s is None or len(b) != len(shape) or len(s) != len(shape) or b.dtype.kind not in "iu":
        return None
    s = [int(shape[d]) - int(b[d]) if int(s[d]) == -1 else int(s[d]) for d in range(len(shape))]
    if any(int(b[d]) != 0 or s[d] != shape[d] for d in range(len(shape) - 1)):
        return None
    if not 0 <= int(b[-1]) <= int(b[-1]) + s[-1] <= shape[-1]:
        return None
    return int(b[-1]), s[-1]


def _fits(m, match) -> bool:
    """The chain's shapes, slices, dtypes and broadcasts (module docstring)."""
    g, cat = m.g, match["cat"]
    out = g.t(cat.outputs[0])
    oshape = _ints(out.shape)
    if not oshape or out.dtype != "float32" or oshape[-1] % 2 or oshape[-1] < 2 \
            or int(cat.attrs.get("axis", 0)) % len(oshape) != len(oshape) - 1:
        return False
    h = oshape[-1] // 2
    half = oshape[:-1] + [h]
    xt, c, s = g.t(match["x"]), match["c"], match["s"]
    x1, x2 = match["sl1"].outputs[0], match["sl2"].outputs[0]
    if _ints(xt.shape) != oshape or xt.dtype != "float32" or last_axis_slice(g, match["sl1"], oshape) != (0, h) \
            or last_axis_slice(g, match["sl2"], oshape) != (h, h) or c in (x1, x2) or s in (x1, x2):
        return False
    tc, ts = g.t(c), g.t(s)
    cshape = _ints(tc.shape)
    if cshape is None or _ints(ts.shape) != cshape or tc.dtype != "float32" or ts.dtype != "float32" \
            or len(cshape) > len(half) or any(a not in (1, b) for a, b in zip(cshape[::-1], half[::-1])):
        return False
    return all(tuple(_ints(g.t(n.outputs[0]).shape) or ()) == tuple(half) for n in match.nodes if n is not cat)


PLAIN = (one_output, no_act)


def _mul(a, b, name):
    return Op("MUL", a, b, name=name, commute=True, uses=1, where=PLAIN)


_X1, _X2 = (Op("SLICE", Val("x"), Val(), Val(), name=f"sl{k}", uses=2) for k in (1, 2))
# CONCATENATION([x1 * c - x2 * s, x2 * c + x1 * s]) (every intermediate read by the chain alone)
CHAIN = Op("CONCATENATION",
           Op("SUB", _mul(_X1, Val("c"), "m1"), _mul(_X2, Val("s"), "m2"), uses=1, where=PLAIN),
           Op("ADD", _mul(_X2, Val("c"), "m3"), _mul(_X1, Val("s"), "m4"), uses=1, commute=True, where=PLAIN),
           name="cat", where=PLAIN, check=_fits)


def _fuse(g: Graph, match) -> None:
    """ROPE(src, c, s) writes the CONCATENATION's output; the chain goes, and the RESHAPE / SLICE making x
    where nothing else reads them."""
    cat, xt = match["cat"], match["x"]
    oshape = _ints(g.t(cat.outputs[0]).shape)
    src, row, w, begin, feeders = sliced_source(g, xt, match.matcher.prod) or (xt, oshape[-1], oshape[-1], 0, [])
    if row % oshape[-1]:                     # where x is a RESHAPE of a last-axis SLICE of src, read src
        src, row, w, begin, feeders = xt, oshape[-1], oshape[-1], 0, []
    node = Node(OP, [src, match["c"], match["s"]], [cat.outputs[0]],
                {"half": oshape[-1] // 2, "src_row": row, "src_w": w, "src_begin": begin, "x_shape": tuple(oshape)},
                1, cat.index)
    replace_nodes(g, cat, node, match.nodes)
    for m in feeders:            # (the RESHAPE first, then its SLICE)
        o = m.outputs[0]
        if not g.consumers().get(o) and o not in g.outputs and not g.t(o).is_variable:
            g.nodes = [n for n in g.nodes if n is not m]


def sliced_source(g: Graph, xt: int, made: dict | None = None):
    """(src, row, w, begin, [RESHAPE, SLICE]) where float32 `xt` is a SLICE of src along its last axis
    only, or a RESHAPE of one (flat element f of xt is src[(f // row) * w + begin + f % row]); else None."""
    made = g.producers() if made is None else made
    rs = made.get(xt)
    if rs is None or not rs.inputs:
        return None
    if rs.op == "SLICE":
        sl, rs = rs, None
    elif rs.op != "RESHAPE" or made.get(rs.inputs[0]) is None:
        return None
    else:
        sl = made[rs.inputs[0]]
    if sl.op != "SLICE" or len(sl.inputs) != 3 or g.t(sl.inputs[0]).dtype != "float32" \
            or g.t(xt).dtype != "float32":
        return None
    zshape = _ints(g.t(sl.inputs[0]).shape)
    cut = last_axis_slice(g, sl, zshape) if zshape else None
    if cut is None or cut[1] < 1:
        return None
    return sl.inputs[0], cut[1], zshape[-1], cut[0], [m for m in (rs, sl) if m is not None]


def fuse_rope(g: Graph) -> None:
    """Every rotary-embedding chain of `g` as one ROPE node (module docstring); the RESHAPE and SLICE
    making x are dropped where nothing else reads them."""
    if getattr(g, "dynamic_dims", None):
        return                       # (sizes must be plain ints: the kernel's index maps are fixed)
    rewrite(g, [(CHAIN, _fuse)])
    _into_attention(g)


def rope_defines(a: dict, cs_shape) -> dict:
    """shaders/rope.glsl's defines for a ROPE's attrs `a` (also an attention reading its q through it)."""
    half = list(a["x_shape"])[:-1] + [int(a["half"])]
    cst = broadcast_strides(list(cs_shape), half)
    return dict(H2=int(a["half"]), SRC_ROW=int(a["src_row"]), SRC_W=int(a["src_w"]), SRC_BEGIN=int(a["src_begin"]),
                RANK=len(half), HALF_SHAPE=[int(d) for d in half], CS_STRIDES=[int(v) for v in cst])


def _into_attention(g: Graph) -> None:
    """An SDPA_DECODE whose q is a ROPE's output read by nothing else computes the rotation as it reads q
    (ops/sdpa_decode.py, attrs rope; inputs cos and sin after the mask): one dispatch less."""
    for n in [n for n in g.nodes if n.op == ATTENTION and len(n.inputs) == 4 and "rope" not in n.attrs]:
        q = n.inputs[0]
        found = rope_of(g, q, n)
        if found is None:
            continue
        p, between = found
        n.inputs = [p.inputs[0], *n.inputs[1:], p.inputs[1], p.inputs[2]]
        n.attrs = dict(n.attrs, rope=dict(p.attrs, q_shape=tuple(int(d) for d in g.t(q).shape)))
        g.nodes = [m for m in g.nodes if m is not p and all(m is not b for b in between)]


def rope_of(g: Graph, t: int, reader) -> tuple[Node, list] | None:
    """(the 3-input ROPE whose output `t` is, past one RESHAPE (flat order kept), [that RESHAPE]) where
    `reader` alone reads it; else None."""
    made, users = g.producers(), g.consumers()
    p, between = made.get(t), []
    if p is not None and p.op == "RESHAPE" and p.inputs and users.get(t) == [reader] and _free(g, t):
        between, reader, t = [p], p, p.inputs[0]
        p = made.get(t)
    if p is None or p.op != OP or len(p.inputs) != 3 or users.get(t) != [reader] or not _free(g, t):
        return None
    return p, between


def _free(g: Graph, t: int) -> bool:
    return t not in g.outputs and not g.t(t).is_variable


def check_rope(a: dict, x, c, s) -> str | None:
    """Why rotation attrs `a` cannot read x, c, s (tensors), or None."""
    if any(t.dtype != "float32" for t in (x, c, s)):
        return "rotates float32 tensors"
    shape, h = list(a["x_shape"]), int(a["half"])
    n = int(np.prod(shape))
    if not shape or shape[-1] != 2 * h or h < 1 or a["src_row"] % shape[-1] or n % a["src_row"] \
            or a["src_begin"] < 0 or a["src_begin"] + a["src_row"] > a["src_w"] \
            or x.size != (n // a["src_row"]) * a["src_w"]:
        return f"rotary embedding of {list(x.shape)} into {shape} does not fit its source rows"
    half = shape[:-1] + [h]
    if tuple(c.shape) != tuple(s.shape) or len(c.shape) > len(half) or \
            any(p not in (1, q) for p, q in zip(list(c.shape)[::-1], half[::-1])):
        return f"cos {list(c.shape)} / sin {list(s.shape)} do not broadcast to {half}"
    return None


@checked
def _check(node, graph):
    x, c, s, y = (graph.t(t) for t in (*node.inputs[:3], node.outputs[0]))
    if y.dtype != "float32":
        return "rotates float32 tensors (int32: its start indices only)"
    bad = check_rope(node.attrs, x, c, s)
    if bad:
        return bad
    shape = list(node.attrs["x_shape"])
    if len(node.inputs) == 4:
        return "takes x, cos and sin, and optionally a cache and start indices (5 inputs), not 4"
    if len(node.inputs) == 5:          # written into a KV cache at run-time starts (ops/kv_write.py)
        cache, start = graph.t(node.inputs[3]), graph.t(node.inputs[4])
        ushape = list(node.attrs.get("upd_shape", shape))
        if tuple(cache.shape) != tuple(y.shape) or len(cache.shape) != len(ushape) or \
                int(np.prod(ushape)) != int(np.prod(shape)) or \
                any(u > d for u, d in zip(ushape, cache.shape)) or cache.dtype != y.dtype:
            return f"cannot write the rotated {ushape} into {list(cache.shape)} as {list(y.shape)}"
        if start.dtype != "int32" or tuple(start.shape) != (len(ushape),):
            return f"start indices must be int32 [{len(ushape)}] (got {start.dtype} {list(start.shape)})"
    elif tuple(y.shape) != tuple(shape):
        return f"output {list(y.shape)} is not the rotated {shape}"
    return None


@register(OP, check=_check, inputs=(3, 5), dtypes=("float32", "int32"),
          summary="internal: a rotary position embedding chain in one dispatch (ops/rope.py fuse_rope)")
def lower_rope(node, graph):
    y = graph.t(node.outputs[0])
    a = node.attrs
    shape = list(a["x_shape"])
    half = shape[:-1] + [int(a["half"])]
    n = int(np.prod(shape))
    kernels, bind = [], [("out_", y.id), ("x", node.inputs[0]), ("cosv", node.inputs[1]), ("sinv", node.inputs[2])]
    defines = rope_defines(a, graph.t(node.inputs[1]).shape)
    if len(node.inputs) == 5:          # into a KV cache (ops/kv_write.py), as DYNAMIC_UPDATE_SLICE writes
        cache = graph.t(node.inputs[3])
        if graph.storage(y.id) != graph.storage(cache.id) and y.size:
            kernels.append(copy_kernel(cache.id, y.id, [cache.size], [1], [1],
                                       label=f"{node.label()}: operand copy"))
        ushape = [int(d) for d in a.get("upd_shape", shape)]     # (the update's coordinates: flat order is x's)
        defines.update(DUS=1, URANK=len(ushape), X_SHAPE=ushape, OUT_STRIDES=strides(cache.shape),
                       MAX_START=[int(d - u) for d, u in zip(cache.shape, ushape)])
        bind.append(("start", node.inputs[4]))
    if n:
        kernels.append(Kernel("rope", bind, n, defines, node.label(), flops=3 * n))
    return kernels


# --- facts (compiler/ops/__init__.py FACT_FIELDS) ---------------------------------------------------
_MADE = Why("an internal op fuse_rope makes after shapes are propagated and the graph batched")
declare(OP, shape=_MADE, exact=_MADE, sym_shape=_MADE, batch=_MADE, pieces=Why("computes values"),
        fp16=NEUTRAL, in_place=False, templates=("rope", "copy_nd"), flops=rules.per_output,
        cpu=Why("internal op: no CPU kernel (the unfused ops have theirs)"))
template("rope", item_major=False, flat=True)
