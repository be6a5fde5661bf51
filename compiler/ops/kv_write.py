"""fold_update_slices: the KV-cache writes of litert-torch's decoder layers in fewer dispatches.
- A DYNAMIC_UPDATE_SLICE whose update is a last-axis SLICE of a wider tensor, or a RESHAPE of one (v: a slice of
  the fused QKV projection) reads the update from that tensor itself (attrs upd_src, upd_shape:
  ops/dynamic_update_slice.py), so the SLICE's copy is never dispatched.
- One whose update is a ROPE's output (or a RESHAPE of it) read by nothing else (k after its rotary embedding) becomes that
  ROPE writing into the cache (ops/rope.py, inputs cache and start), one dispatch instead of two.
- Then a decode attention (SDPA_DECODE, q rotated inside it) reading the k cache such a ROPE wrote and the v cache
  such an update wrote, at one start, does both writes itself (fold_into_attention; ops/sdpa_decode.py attrs
  kv_write): per decoder layer 2 dispatches and a barrier less.
Run by compiler/passes/__init__.py after fuse_rope; recognised by graph
structure only."""
from __future__ import annotations

from gpuc.compiler.ir import Graph
from gpuc.compiler.ops.rope import rope_of, sliced_source
from gpuc.compiler.pattern import Op, Val, replace_nodes, rewrite

OP = "DYNAMIC_UPDATE_SLICE"
ROPE = "ROPE"
ATTENTION = "SDPA_DECODE"


UPDATE = Op(OP, Val(), Val(), Val(), name="dus", where=lambda m, n: "upd_src" not in n.attrs)


def fold_update_slices(g: Graph) -> None:
    if getattr(g, "dynamic_dims", None):
        return                       # (sizes must be plain ints: the kernel's index map is fixed)
    rewrite(g, [(UPDATE, lambda g, match: _into_rope(g, match["dus"])), (UPDATE, _read_source)])
    fold_into_attention(g)


def _read_source(g: Graph, match):
    """The update read from the wider tensor it is a last-axis SLICE of (module docstring)."""
    n = match["dus"]
    u = n.inputs[1]
    found = sliced_source(g, u) if match.matcher.users.get(u) == [n] else None
    if found is None or u in g.outputs or g.t(u).is_variable or g.t(n.inputs[0]).dtype != "float32":
        return False
    src, row, w, begin, feeders = found
    n.attrs = dict(n.attrs, upd_src=(row, w, begin), upd_shape=tuple(int(d) for d in g.t(u).shape))
    n.inputs = [n.inputs[0], src, n.inputs[2]]
    for m in feeders:            # (the RESHAPE first, then its SLICE)
        o = m.outputs[0]
        if not g.consumers().get(o) and o not in g.outputs and not g.t(o).is_variable:
            g.nodes = [k for k in g.nodes if k is not m]


def _into_rope(g: Graph, n) -> bool:
    """DYNAMIC_UPDATE_SLICE `n` of a ROPE's output as that ROPE writing into the cache (True if done)."""
    cache, u, start = n.inputs
    found = rope_of(g, u, n) if u >= 0 else None
    if found is None or g.t(start).dtype != "int32" or tuple(g.t(start).shape) != (len(g.t(cache).shape),) \
            or len(g.t(u).shape) != len(g.t(cache).shape) or g.t(cache).dtype != g.t(u).dtype:
        return False
    p, between = found
    attrs = dict(p.attrs, upd_shape=tuple(int(d) for d in g.t(u).shape))
    fused = type(p)(ROPE, [*p.inputs, cache, start], list(n.outputs), attrs, p.version, p.index)
    g.nodes = [fused if m is n else m for m in g.nodes if m is not p and all(m is not b for b in between)]   # (at the update's place)
    return True


# --- the step's cache writes inside its decode attention --------------------------------------------
def _attends(m, match) -> bool:
    """The ROPE (k) and the DYNAMIC_UPDATE_SLICE (v) write one row of [1, KV, KH, D] caches at one start, with
    the attention's cos and sin, and the attention alone reads what they write."""
    g, n, p, u = m.g, match["attn"], match["rope"], match["dus"]
    users = m.users
    kc, vc, start = g.t(p.inputs[3]), g.t(u.inputs[0]), p.inputs[4]
    if len(n.inputs) != 6 or len(p.inputs) != 5 or len(u.inputs) != 3 or not n.attrs.get("rope") or n.attrs.get("kv_write") or u.inputs[2] != start \
            or p.inputs[1:3] != n.inputs[4:6] or users.get(n.inputs[1]) != [n] or users.get(n.inputs[2]) != [n]:
        return False
    if len(kc.shape) != 4 or tuple(kc.shape) != tuple(vc.shape) or kc.dtype != "float32" or vc.dtype != "float32" \
            or g.t(start).dtype != "int32" or tuple(g.t(start).shape) != (4,):
        return False
    row = (1, 1, int(kc.shape[2]), int(kc.shape[3]))
    ushape = tuple(u.attrs["upd_shape"]) if "upd_src" in u.attrs else tuple(g.t(u.inputs[1]).shape)
    return tuple(p.attrs.get("upd_shape", ())) == row and ushape == row and g.t(u.inputs[1]).dtype == "float32"


ATTEND = Op(ATTENTION, Val("q"), Op(ROPE, name="rope"), Op(OP, name="dus"), name="attn", prefix=True, check=_attends)


def _into_attention(g: Graph, match) -> None:
    """SDPA_DECODE(q, ROPE->k cache, DUS->v cache, ...) as one SDPA_DECODE writing both caches
    (ops/sdpa_decode.py attrs kv_write): inputs kx, vx and start after cos and sin; outputs y, k cache, v cache."""
    n, p, u = match["attn"], match["rope"], match["dus"]
    vsrc = tuple(u.attrs["upd_src"]) if "upd_src" in u.attrs else (int(g.t(u.inputs[1]).size),) * 2 + (0,)
    attrs = dict(n.attrs, kv_write={"rope_k": {k: v for k, v in p.attrs.items()}, "v_src": vsrc})
    fused = type(n)(ATTENTION, [n.inputs[0], p.inputs[3], u.inputs[0], *n.inputs[3:6], p.inputs[0], u.inputs[1],
                                p.inputs[4]], [n.outputs[0], p.outputs[0], u.outputs[0]], attrs, n.version, n.index)
    replace_nodes(g, n, fused, [p, u])


def fold_into_attention(g: Graph) -> None:
    """Every decode attention reading the caches its step's ROPE (k) and DYNAMIC_UPDATE_SLICE (v) just wrote
    does the writes itself: two dispatches and a barrier less per layer."""
    if getattr(g, "dynamic_dims", None):
        return
    rewrite(g, [(ATTEND, _into_attention)])
