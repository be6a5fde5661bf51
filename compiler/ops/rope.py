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
the KV cache itself (ops/kv_write.py).  The decode step of tiny Qwen: 10 dispatches per layer -> 1."""
from __future__ import annotations

import numpy as np

from gpuc.compiler.codegen.kernel import Kernel
from gpuc.compiler.ir import Graph, Node
from gpuc.compiler.ops import NEUTRAL, Why, declare, register, rules, template
from gpuc.compiler.ops.shape import copy_kernel
from gpuc.compiler.ops.util import broadcast_strides, checked, fused_act, strides

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


class _Chain:
    def __init__(self, g: Graph):
        self.g = g
        self.made = g.producers()
        self.users = g.consumers()
        self.chain: list[Node] = []

    def node(self, tid: int, op: str, n_inputs: int) -> Node | None:
        m = self.made.get(tid)
        if m is None or m.op != op or len(m.inputs) != n_inputs or len(m.outputs) != 1 or fused_act(m) != 0:
            return None
        self.chain.append(m)
        return m

    def const(self, tid: int):
        t = self.g.t(tid) if tid >= 0 else None
        return None if t is None or t.data is None else np.asarray(t.data).reshape(-1)

    def last_axis_slice(self, m: Node, shape) -> tuple[int, int] | None:
        """(begin, size) of SLICE `m` along its input's last axis, None unless it slices that axis only."""
        b, s = self.const(m.inputs[1]), self.const(m.inputs[2])
        if b is None or s is None or len(b) != len(shape) or len(s) != len(shape) or b.dtype.kind not in "iu":
            return None
        s = [int(shape[d]) - int(b[d]) if int(s[d]) == -1 else int(s[d]) for d in range(len(shape))]
        if any(int(b[d]) != 0 or s[d] != shape[d] for d in range(len(shape) - 1)):
            return None
        if not 0 <= int(b[-1]) <= int(b[-1]) + s[-1] <= shape[-1]:
            return None
        return int(b[-1]), s[-1]


def _mul_pair(ch: _Chain, tid: int, xs: tuple) -> tuple[int, int] | None:
    """(the operand of MUL `tid` among xs, its other operand)."""
    m = ch.node(tid, "MUL", 2)
    if m is None:
        return None
    a, b = m.inputs
    return (a, b) if a in xs else (b, a) if b in xs else None


def _match(g: Graph, cat: Node, pick: int) -> tuple[Node, list[Node], list[Node]] | None:
    """The ROPE node computing CONCATENATION `cat`, the nodes it replaces and the RESHAPE / SLICE making
    its x (dropped where nothing else reads them); None where not the chain."""
    if len(cat.inputs) != 2 or len(cat.outputs) != 1 or fused_act(cat) != 0:
        return None
    out = g.t(cat.outputs[0])
    oshape = _ints(out.shape)
    if not oshape or out.dtype != "float32" or oshape[-1] % 2 or oshape[-1] < 2:
        return None
    if int(cat.attrs.get("axis", 0)) % len(oshape) != len(oshape) - 1:
        return None
    h = oshape[-1] // 2
    half = oshape[:-1] + [h]
    ch = _Chain(g)
    sub, add = ch.node(cat.inputs[0], "SUB", 2), ch.node(cat.inputs[1], "ADD", 2)
    if sub is None or add is None:
        return None
    m1 = ch.made.get(sub.inputs[0])          # x1 * c: find x1 and x2 through the SLICEs
    if m1 is None or m1.op != "MUL" or len(m1.inputs) != 2:
        return None
    x1 = m1.inputs[pick]                     # (pick: which operand of x1 * c is x1; the caller tries both)
    sl1 = ch.made.get(x1)
    if sl1 is None or sl1.op != "SLICE" or len(sl1.inputs) != 3:
        return None
    xt = sl1.inputs[0]
    xshape = _ints(g.t(xt).shape)
    if xshape != oshape or g.t(xt).dtype != "float32":
        return None
    ch.chain.append(sl1)
    if ch.last_axis_slice(sl1, xshape) != (0, h):
        return None
    p1 = _mul_pair(ch, sub.inputs[0], (x1,))          # x1 * c
    m2 = ch.made.get(sub.inputs[1])
    x2 = None if m2 is None or m2.op != "MUL" else \
        next((t for t in m2.inputs if t != x1 and ch.made.get(t) is not None and ch.made[t].op == "SLICE"), None)
    if x2 is None or p1 is None:
        return None
    sl2 = ch.made[x2]
    ch.chain.append(sl2)
    if len(sl2.inputs) != 3 or sl2.inputs[0] != xt or ch.last_axis_slice(sl2, xshape) != (h, h):
        return None
    p2 = _mul_pair(ch, sub.inputs[1], (x2,))          # x2 * s
    q = [_mul_pair(ch, t, (x1, x2)) for t in add.inputs]   # x2 * c, x1 * s
    if p2 is None or None in q:
        return None
    c, s = p1[1], p2[1]
    if {q[0], q[1]} != {(x2, c), (x1, s)} or c in (x1, x2) or s in (x1, x2):
        return None
    tc, ts = g.t(c), g.t(s)
    cshape = _ints(tc.shape)
    if cshape is None or _ints(ts.shape) != cshape or tc.dtype != "float32" or ts.dtype != "float32" \
            or len(cshape) > len(half) or \
            any(a not in (1, b) for a, b in zip(cshape[::-1], half[::-1])):
        return None
    for m in ch.chain:            # every intermediate: half-shaped, read by the chain alone
        if tuple(_ints(g.t(m.outputs[0]).shape) or ()) != tuple(half):
            return None
    inner = {o for m in ch.chain for o in m.outputs}
    mine = {id(m) for m in ch.chain} | {id(cat)}
    for t in inner:
        if t in g.outputs or g.t(t).is_variable or any(id(u) not in mine for u in ch.users.get(t, [])):
            return None
    # where x is a RESHAPE of a last-axis SLICE of src, read src
    src, row, w, begin, feeders = sliced_source(g, xt, ch.made) or (xt, oshape[-1], oshape[-1], 0, [])
    if row % oshape[-1]:
        src, row, w, begin, feeders = xt, oshape[-1], oshape[-1], 0, []
    node = Node(OP, [src, c, s], [cat.outputs[0]],
                {"half": h, "src_row": row, "src_w": w, "src_begin": begin, "x_shape": tuple(oshape)}, 1, cat.index)
    return node, ch.chain + [cat], feeders


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
    cut = _Chain(g).last_axis_slice(sl, zshape) if zshape else None
    if cut is None or cut[1] < 1:
        return None
    return sl.inputs[0], cut[1], zshape[-1], cut[0], [m for m in (rs, sl) if m is not None]


def fuse_rope(g: Graph) -> None:
    """Every rotary-embedding chain of `g` as one ROPE node (module docstring); the RESHAPE and SLICE
    making x are dropped where nothing else reads them."""
    if getattr(g, "dynamic_dims", None):
        return                       # (sizes must be plain ints: the kernel's index maps are fixed)
    for cat in [n for n in g.nodes if n.op == "CONCATENATION"]:
        found = _match(g, cat, 0) or _match(g, cat, 1)
        if found is None:
            continue
        node, gone, feeders = found
        drop = {id(m) for m in gone if m is not cat}
        g.nodes = [node if n is cat else n for n in g.nodes if id(n) not in drop]
        for m in feeders:            # (the RESHAPE first, then its SLICE)
            o = m.outputs[0]
            if not g.consumers().get(o) and o not in g.outputs and not g.t(o).is_variable:
                g.nodes = [n for n in g.nodes if n is not m]
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
