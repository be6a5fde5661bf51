"""STABLEHLO_COMPOSITE: inline each composite's decomposition subgraph into the graph that calls it.

litert-torch writes attention and RMSNorm as composites (`odml.scaled_dot_product_attention`,
`odml.rms_norm`) whose options name a decomposition subgraph of plain ops.  The importer replaces
every composite node by a copy of that subgraph's nodes: the subgraph's inputs become the composite's
inputs, its outputs the composite's outputs, its other tensors new tensors of the caller (named
"<composite name>/<tensor name>").  The copied nodes keep the composite's operator index (messages
name the composite) and record its name in attrs["composite"].  A composite an op module fuses
(compiler/ops COMPOSITES: `odml.rms_norm`, decode-shaped `odml.scaled_dot_product_attention`) becomes
that module's fused op instead, where it recognizes the decomposition's form.  An attention composite
is first rebuilt from its attributes (ops/sdpa_composite.py: litert-torch's own decomposition is
wrong for one KV head; LiteRT's default CPU path runs the composite natively).  Nested
composites are inlined depth first.  A bad subgraph index, a recursion or an arity / shape / dtype
mismatch is a ModelFormatError naming the operator.
"""
from __future__ import annotations

from gpuc.compiler import ir
from gpuc.errors import ModelFormatError

OP = "STABLEHLO_COMPOSITE"
MAX_DEPTH = 16


def inline_composites(model: ir.Model) -> None:
    """Every graph of `model` without STABLEHLO_COMPOSITE nodes (in place)."""
    done: set[int] = set()
    for gi in range(len(model.subgraphs)):
        _inline_graph(model, gi, done, ())


def _inline_graph(model: ir.Model, gi: int, done: set, stack: tuple) -> None:
    if gi in done:
        return
    if gi in stack:
        raise ModelFormatError(f"invalid model: subgraph {model.subgraphs[gi].name!r}: composite decompositions "
                               "call themselves")
    if len(stack) > MAX_DEPTH:
        raise ModelFormatError(f"invalid model: composites nest more than {MAX_DEPTH} deep")
    g = model.subgraphs[gi]
    if not any(n.op == OP for n in g.nodes):
        done.add(gi)
        return
    from gpuc.compiler.ops import sdpa_composite
    nodes = []
    for n in g.nodes:
        if n.op != OP:
            nodes.append(n)
            continue
        sub = _decomposition(model, g, n)
        own = sdpa_composite.canonical(n, model.subgraphs[sub])    # attention from its attributes
        fused = _fused(g, n, own or model.subgraphs[sub])
        if fused is not None:
            nodes += fused
            continue
        if own is None:
            _inline_graph(model, sub, done, stack + (gi,))
        nodes += _copy_into(g, n, own or model.subgraphs[sub])
    g.nodes = nodes
    done.add(gi)


def _fused(g: ir.Graph, n: ir.Node, s: ir.Graph) -> list[ir.Node] | None:
    """The fused op(s) an op module gives for this composite (compiler/ops COMPOSITES), where it
    recognizes the decomposition and the GPU supports them; else None (the decomposition is inlined)."""
    from gpuc.compiler import ops
    fn = ops.COMPOSITES.get(n.attrs.get("name") or "")
    try:
        made = fn(n, g, s) if fn is not None else None
    except (ValueError, IndexError, KeyError, TypeError):   # a malformed form: the decomposition says why
        made = None
    if not made or any(ops.unsupported_reason(m, g) for m in made):
        return None
    return made


def _decomposition(model: ir.Model, g: ir.Graph, n: ir.Node) -> int:
    where = f"invalid model: subgraph {g.name!r} {n.label()} ({n.attrs.get('name') or 'unnamed'})"
    sub = n.attrs.get("decomposition_subgraph_index")
    if not isinstance(sub, int) or not 0 <= sub < len(model.subgraphs):
        raise ModelFormatError(f"{where}: decomposition subgraph {sub} out of range "
                               f"({len(model.subgraphs)} subgraphs)")
    s = model.subgraphs[sub]
    if len(s.inputs) != len(n.inputs) or len(s.outputs) != len(n.outputs):
        raise ModelFormatError(f"{where}: {len(n.inputs)} inputs / {len(n.outputs)} outputs, but its decomposition "
                               f"{s.name!r} has {len(s.inputs)} / {len(s.outputs)}")
    for kind, outer, inner in (("input", n.inputs, s.inputs), ("output", n.outputs, s.outputs)):
        for k, (o, i) in enumerate(zip(outer, inner)):
            if o < 0:
                raise ModelFormatError(f"{where}: {kind} {k} is absent")
            a, b = g.t(o), s.t(i)
            if tuple(a.shape) != tuple(b.shape) or a.dtype != b.dtype:
                raise ModelFormatError(f"{where}: {kind} {k} is {a.dtype} {list(a.shape)}, but its decomposition "
                                       f"{s.name!r} takes {b.dtype} {list(b.shape)}")
    return sub


def _copy_into(g: ir.Graph, n: ir.Node, s: ir.Graph) -> list[ir.Node]:
    """The nodes of decomposition `s`, over `g`'s tensors, computing composite `n`."""
    name = n.attrs.get("name") or "composite"
    ids = dict(zip(s.inputs, n.inputs))
    produced = {o for m in s.nodes for o in m.outputs}
    out_of = {}
    for k, o in enumerate(s.outputs):
        if o in produced and o not in ids and o not in out_of:
            ids[o] = n.outputs[k]          # the producing node writes the composite's output directly
        else:
            out_of.setdefault(o, []).append(n.outputs[k])

    def tid(i: int) -> int:
        if i < 0:
            return i
        if i not in ids:
            t = s.t(i)
            new = g.add_tensor(f"{name}/{t.name}", t.shape, t.dtype, t.data, t.quant)
            g.t(new).is_variable, g.t(new).shape_signature = t.is_variable, t.shape_signature
            ids[i] = new
        return ids[i]

    nodes = []
    for m in s.nodes:
        attrs = dict(m.attrs, composite=name)
        nodes.append(ir.Node(m.op, [tid(i) for i in m.inputs], [tid(o) for o in m.outputs], attrs, m.version, n.index))
    for o, outs in out_of.items():        # an output that is an input, a constant or repeated: a copy
        for dst in outs:
            nodes.append(g.reshape_node(tid(o), dst, g.t(dst).shape))
            nodes[-1].index = n.index
    return nodes
