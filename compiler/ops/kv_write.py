"""fold_update_slices: the KV-cache writes of litert-torch's decoder layers in fewer dispatches.
- A DYNAMIC_UPDATE_SLICE whose update is a last-axis SLICE of a wider tensor, or a RESHAPE of one (v: a slice of
  the fused QKV projection) reads the update from that tensor itself (attrs upd_src, upd_shape:
  ops/dynamic_update_slice.py), so the SLICE's copy is never dispatched.
- One whose update is a ROPE's output (or a RESHAPE of it) read by nothing else (k after its rotary embedding) becomes that
  ROPE writing into the cache (ops/rope.py, inputs cache and start), one dispatch instead of two.
Run by compiler/passes/__init__.py after fuse_rope; recognised by graph
structure only."""
from __future__ import annotations

from gpuc.compiler.ir import Graph
from gpuc.compiler.ops.rope import rope_of, sliced_source
from gpuc.compiler.pattern import Op, Val, rewrite

OP = "DYNAMIC_UPDATE_SLICE"
ROPE = "ROPE"


UPDATE = Op(OP, Val(), Val(), Val(), name="dus", where=lambda m, n: "upd_src" not in n.attrs)


def fold_update_slices(g: Graph) -> None:
    if getattr(g, "dynamic_dims", None):
        return                       # (sizes must be plain ints: the kernel's index map is fixed)
    rewrite(g, [(UPDATE, lambda g, match: _into_rope(g, match["dus"])), (UPDATE, _read_source)])


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
