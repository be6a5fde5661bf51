"""fold_movement: a chain of data-movement ops becomes one GATHER_COPY node (ops/gather_copy.py,
shaders/gather_copy.comp): the chain's output is written in one dispatch straight from the tensors
the chain starts from, so no intermediate is ever stored.

Folded ops: RESHAPE / SQUEEZE / EXPAND_DIMS, TRANSPOSE, SLICE, STRIDED_SLICE (any strides, masks),
REVERSE_V2, CONCATENATION, PACK, UNPACK, SPLIT, SPLIT_V, PAD / PADV2 (constant), TILE, BROADCAST_TO
and GATHER with constant indices (rank <= 1, batch_dims 0).  Found by structure: starting from a
movement op whose output is not consumed by another movement op, the chain grows backwards through
producers that are movement ops the GPU runs, over tensors that are not graph outputs, variables,
quantized or fake-quantized and whose consumers are all in the chain, or are all movement ops that
copy (not RESHAPE views): a tensor read by several chains, such as SPLIT's outputs or the TRANSPOSE
that q, k and v are sliced from, is read through by each, and its node goes once nothing else reads
it.  A chain is folded where that saves dispatches (a lone TRANSPOSE or SLICE stays; RESHAPEs alone
are views).

The index map of a chain (its pieces) is passes/movement_pieces.py's.
"""
from __future__ import annotations

from gpuc.compiler import ops
from gpuc.compiler.ir import Graph, Node
from gpuc.compiler.ops.util import act_code, fused_act, strides
from gpuc.compiler.passes.movement_pieces import MAX_PIECES, Digit, Piece, Stop, data_input, kind, norm_digits, pull

OP = "GATHER_COPY"
DTYPES = ("float32", "int32")


# ---------------------------------------------------------------------------------------------------
# chains

def _cost(graph: Graph, node: Node) -> int:
    """Dispatches the node costs unfolded (RESHAPEs are views)."""
    if kind(node.op) == "reshape":
        return 0
    if kind(node.op) in ("concatenation", "pack"):
        return sum(1 for i in node.inputs if graph.t(i).size)
    return 1


def _movable(graph: Graph, node: Node, root: bool = False) -> bool:
    """A movement op the pass may fold: the GPU runs it, float32 / int32, unquantized; a fused
    activation (CONCATENATION's) only on the chain's last op."""
    k = kind(node.op)          # (the op's pieces fact: None where it computes values)
    if k is None or (fused_act(node) and not (root and k == "concatenation")):
        return False
    if ops.unsupported_reason(node, graph) is not None:     # (first: its arity check, before inputs are read)
        return False
    ts = [graph.t(t) for t in list(node.outputs) + [node.inputs[data_input(node)]]]
    if k in ("concatenation", "pack"):
        ts += [graph.t(t) for t in node.inputs]
    return not any(t.dtype not in DTYPES or t.quant is not None or t.fake_quant is not None or t.is_variable
                   for t in ts)


def _chain(graph: Graph, root: Node, prod: dict, users: dict, stops: set, movable) -> list[Node]:
    """The nodes of root's chain (see the module docstring), root first."""
    inside = {id(root): root}
    grew = True
    while grew:
        grew = False
        for n in list(inside.values()):
            for t in n.inputs:
                m = prod.get(t)
                if (t < 0 or m is None or id(m) in inside or t in stops or t in graph.outputs
                        or not movable(m) or not (all(id(u) in inside for u in users.get(t, ()))
                                                  or all(movable(u) and _cost(graph, u) for u in users.get(t, ())))):
                    continue
                inside[id(m)] = m
                grew = True
    return list(inside.values())


def _pieces(graph: Graph, y: int, chain: list[Node], prod: dict):
    """The regions of y from the chain's sources: a list of Pieces on tensors outside the chain (or
    fills).  Raises Stop(tensor) naming the tensor the pull-back could not cross."""
    inside = {id(n) for n in chain}
    yt = graph.t(y)
    ys = strides(yt.shape)
    todo = [Piece(norm_digits([Digit(n, s, d, 1) for d, (n, s) in enumerate(zip(yt.shape, ys))]), 0, y,
                  tuple([0] * len(yt.shape)))]
    done = []
    while todo:
        p = todo.pop()
        n = prod.get(p.tensor) if p.tensor >= 0 else None
        if n is None or id(n) not in inside:
            done.append(p)
            continue
        try:
            todo += pull(graph, n, p)
        except (Stop, ValueError, IndexError) as e:
            raise Stop(p.tensor) from e
        if len(todo) + len(done) > MAX_PIECES:
            raise Stop(p.tensor)
    return done


def regions(graph: Graph, pieces, sources: list) -> list[tuple]:
    """GATHER_COPY regions (src index or -1, fill bits, shape, src strides, src offset, dst strides,
    dst offset) of the pieces, output order; sources: the node's input tensors."""
    out = []
    for p in sorted(pieces, key=lambda q: q.dst_off):
        shape = [g.n for g in p.digits]
        dst = [g.dst for g in p.digits]
        if p.tensor < 0:
            out.append((-1, p.fill, shape, [0] * len(shape), 0, dst, p.dst_off))
            continue
        xs = strides(graph.t(p.tensor).shape)
        src = [g.a * xs[g.dim] if g.dim >= 0 else 0 for g in p.digits]
        off = sum(b * s for b, s in zip(p.base, xs))
        out.append((sources.index(p.tensor), 0, shape, src, off, dst, p.dst_off))
    return out


def fold_movement(graph: Graph) -> None:
    """Replace each movement chain that costs more than one dispatch by one GATHER_COPY node."""
    users, prod = graph.consumers(), graph.producers()
    absorbed, shared = set(), set()
    new_nodes: dict = {}
    memo: dict = {}

    def movable(n, root=False):
        if (id(n), root) not in memo:
            memo[id(n), root] = _movable(graph, n, root)
        return memo[id(n), root]
    for root in reversed(list(graph.nodes)):
        if id(root) in absorbed or id(root) in shared or len(root.outputs) != 1 or not movable(root, True):
            continue
        y = root.outputs[0]
        stops: set = set()
        while True:
            chain = _chain(graph, root, prod, users, stops, movable)
            try:
                pieces = _pieces(graph, y, chain, prod)
                break
            except Stop as e:
                t = e.args[0] if e.args else None
                if t is None or t == y:
                    pieces = None
                    break
                stops.add(t)
        if pieces is None:
            continue
        sources = list(dict.fromkeys(p.tensor for p in pieces if p.tensor >= 0))
        if not sources or sum(_cost(graph, n) for n in chain) <= 1 or sum(p.count for p in pieces) != graph.t(y).size:
            continue
        inside = {id(n) for n in chain}
        mine = [n for n in chain if len(n.outputs) == 1 and all(id(u) in inside for u in users.get(n.outputs[0], ()))]
        absorbed |= {id(n) for n in mine} | {id(root)}
        shared |= {id(n) for n in chain} - {id(n) for n in mine} - {id(root)}
        new_nodes[id(root)] = Node(OP, sources, [y], index=root.index,
                                   attrs=dict(regions=regions(graph, pieces, sources), act=act_code(root, ignore=()),
                                              fused=[n.op for n in graph.nodes if id(n) in inside]))
    if not new_nodes:
        return
    graph.nodes = [new_nodes.get(id(n), n) for n in graph.nodes if id(n) not in absorbed or id(n) in new_nodes]
    used = {i for n in graph.nodes for i in n.inputs} | set(graph.outputs)
    # nodes read through by several chains (SPLIT, UNPACK, a TRANSPOSE feeding q, k and v slices):
    # gone once no output is used any more
    while True:
        keep = [n for n in graph.nodes if id(n) not in shared or any(o in used for o in n.outputs)]
        if len(keep) == len(graph.nodes):
            break
        graph.nodes = keep
        used = {i for n in graph.nodes for i in n.inputs} | set(graph.outputs)
