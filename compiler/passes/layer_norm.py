"""fuse_layer_norm: a LayerNorm written as a chain of ops becomes one LAYER_NORM node (ops/layer_norm.py,
shaders/layer_norm.comp: one dispatch, statistics in fp32).

Recognised by graph structure and constant values, never by names.  From every MEAN of a float
tensor x over its trailing non-trivial axes (axes of size 1 anywhere are ignored, so [0, 2] of a
[1, T, C] tensor counts), the pass evaluates the ops downstream symbolically: each value is a
polynomial in X (x), M (the mean), V (the mean of (X - M)^2 over the same axes) and S = sqrt(V + eps),
with per-channel constant coefficients.  That covers what converters emit, in any order:
- keep_dims true or false, with RESHAPE / SQUEEZE / EXPAND_DIMS in between;
- variance as MEAN(SQUARED_DIFFERENCE(x, mean)), MEAN(d * d), MEAN(SQUARE(d)) or MEAN(POW(d, 2));
- eps as a scalar or a broadcast tensor of one value, added before RSQRT, SQRT + DIV or POW(-0.5);
- (x - mean) * inv, x * inv - mean * inv, x * (inv * gamma) + (beta - mean * inv * gamma) (Keras);
- optional gamma / beta: constants that vary only over the normalized axes.
A candidate output y matches when its polynomial is G*X/S - G*M/S + B; every intermediate it needs
must have no consumer outside the chain (not a graph output, not a variable), else the next smaller
candidate is tried (e.g. y without the beta ADD) or nothing fuses.  E[x^2] - E[x]^2 forms are not
matched (a different formula numerically).
"""
from __future__ import annotations

import numpy as np

from gpuc.compiler.ir import Graph, Node
from gpuc.compiler.pattern import NoMatch, Op, Val, act_free, index_of, rewrite
from gpuc.compiler.symbolic import dim

LN_OP = "LAYER_NORM"
RESHAPES = ("RESHAPE", "SQUEEZE", "EXPAND_DIMS")
BINARY = ("ADD", "SUB", "MUL", "DIV", "SQUARED_DIFFERENCE", "POW")
UNARY = ("NEG", "SQUARE", "RSQRT", "SQRT")
X, M, V, S = (1, 0, 0, 0), (0, 1, 0, 0), (0, 0, 1, 0), (0, 0, 0, 1)
ONE = (0, 0, 0, 0)


def _sq(shape) -> tuple:
    return tuple(dim(d) for d in shape if d != 1)


def _axes(node: Node, graph: Graph, rank: int):
    """The constant reduction axes (input 1, or an `axis` / `axes` attribute), normalized; None if unknown."""
    if len(node.inputs) > 1 and node.inputs[1] >= 0:
        t = graph.t(node.inputs[1])
        if not t.is_const:
            return None
        a = np.asarray(t.data).reshape(-1)
    else:
        a = node.attrs.get("axes", node.attrs.get("axis"))
        if a is None:
            return None
        a = np.asarray(a).reshape(-1)
    if a.dtype.kind not in "iu" or any(v < -rank or v >= rank for v in a):
        return None
    return sorted({int(v) % rank for v in a})


def _channel_pos(shape, nch: int) -> list[int]:
    """Positions of the last `nch` dims of size > 1 (the normalized axes of a full tensor)."""
    big = [i for i, d in enumerate(shape) if d != 1]
    return big[len(big) - nch:] if nch else []


# --- polynomials: {monomial exponents (X, M, V, S): coefficient (float or float64 [C] array)} ------
def _clean(p):
    return {k: v for k, v in p.items() if not (np.isscalar(v) and v == 0)}


def _add(a, b, sign=1.0):
    out = dict(a)
    for k, v in b.items():
        out[k] = out[k] + sign * v if k in out else sign * v
    return _clean(out)


def _mul(a, b):
    out = {}
    for ka, va in a.items():
        for kb, vb in b.items():
            k = tuple(x + y for x, y in zip(ka, kb))
            if max(abs(e) for e in k) > 4:
                raise NoMatch
            out[k] = out[k] + va * vb if k in out else va * vb
    return _clean(out)


def _inverse(p):
    if len(p) != 1:
        raise NoMatch
    (k, v), = p.items()
    if not np.isscalar(v) and not np.all(v == v.reshape(-1)[0]):
        raise NoMatch
    v = float(np.asarray(v).reshape(-1)[0])
    if v == 0 or not np.isfinite(v):
        raise NoMatch
    return {tuple(-e for e in k): 1.0 / v}


def _is_poly(p, want) -> bool:
    return p.keys() == want.keys() and all(np.isscalar(p[k]) and p[k] == v for k, v in want.items())


class _Matcher:
    def __init__(self, graph: Graph, m1: Node):
        self.g = graph
        x = graph.t(m1.inputs[0])
        axes = _axes(m1, graph, len(x.shape))
        if axes is None:
            raise NoMatch
        red = [a for a in axes if x.shape[a] != 1]
        big = [i for i, d in enumerate(x.shape) if d != 1]
        if not red or red != big[len(big) - len(red):]:
            raise NoMatch
        self.nch = len(red)
        self.nd = tuple(x.shape[a] for a in red)
        self.C = int(np.prod(self.nd))
        self.sq_row = tuple(x.shape[i] for i in big[:len(big) - len(red)])
        self.sq_full = self.sq_row + self.nd
        self.x = m1.inputs[0]
        self.xs = {self.x}                          # x and its views (RESHAPE / SQUEEZE / EXPAND_DIMS)
        self.eps = None
        self.vals = {self.x: ("full", {X: 1.0})}     # tensor -> (kind, polynomial)

    def kind_of(self, tid):
        s = _sq(self.g.t(tid).shape)
        return "full" if s == self.sq_full else "row" if s == self.sq_row else None

    def const(self, tid, out_shape, kind):
        """A constant operand as a coefficient: a scalar, or (full outputs) a [C] array."""
        c = np.asarray(self.g.t(tid).data, np.float64)
        if c.size and np.all(c == c.reshape(-1)[0]):
            if len(c.shape) > len(out_shape):
                raise NoMatch
            return float(c.reshape(-1)[0])
        if kind != "full" or len(c.shape) > len(out_shape) or c.size == 0:
            raise NoMatch
        chan = _channel_pos(out_shape, self.nch)
        cs = (1,) * (len(out_shape) - len(c.shape)) + tuple(c.shape)
        if any(cs[i] != 1 and (i not in chan or cs[i] != out_shape[i]) for i in range(len(out_shape))):
            raise NoMatch
        rows = tuple(out_shape[i] if i in chan else 1 for i in range(len(out_shape)))     # (one row)
        return np.ascontiguousarray(np.broadcast_to(c.reshape(cs), rows)).reshape(-1)

    def operand(self, tid, out_shape, kind):
        t = self.g.t(tid)
        if tid in self.vals:
            k, p = self.vals[tid]
            s = (1,) * (len(out_shape) - len(t.shape)) + tuple(t.shape)
            if len(t.shape) > len(out_shape) or any(a != 1 and a != b for a, b in zip(s, out_shape)):
                raise NoMatch
            if k == "row" and kind == "full" and any(s[i] != 1 for i in _channel_pos(out_shape, self.nch)):
                raise NoMatch
            return p
        if t.is_const and t.dtype == "float32":
            return {ONE: self.const(tid, out_shape, kind)}
        raise NoMatch

    def mean(self, node, p):
        xt = self.g.t(node.inputs[0])
        axes = _axes(node, self.g, len(xt.shape))
        if axes is None or self.vals[node.inputs[0]][0] != "full" \
                or [a for a in axes if xt.shape[a] != 1] != _channel_pos(xt.shape, self.nch):
            raise NoMatch
        if _is_poly(p, {X: 1.0}):
            return {M: 1.0}
        if _is_poly(p, {(2, 0, 0, 0): 1.0, (1, 1, 0, 0): -2.0, (0, 2, 0, 0): 1.0}):
            return {V: 1.0}
        raise NoMatch

    def root(self, p, power):
        """sqrt(V + eps) ** power (power +-1)."""
        if not p.keys() <= {V, ONE} or p.get(V) != 1.0:
            raise NoMatch
        eps = float(p.get(ONE, 0.0))
        if not np.isfinite(eps) or eps < 0 or (self.eps is not None and self.eps != eps):
            raise NoMatch
        self.eps = eps
        return {(0, 0, 0, power): 1.0}

    def step(self, node: Node):
        """The polynomial of `node`'s output, or raise NoMatch."""
        g = self.g
        if len(node.outputs) != 1 or any(i < 0 for i in node.inputs):
            raise NoMatch
        y = g.t(node.outputs[0])
        kind = self.kind_of(node.outputs[0])
        if kind is None or y.dtype != "float32" or y.fake_quant is not None or y.quant is not None \
                or y.is_variable or not act_free(node):
            raise NoMatch
        op, ins = node.op, node.inputs
        if op in RESHAPES:
            k, p = self.vals.get(ins[0], (None, None))
            if k != kind:
                raise NoMatch
            return p
        if op == "MEAN":
            if ins[0] not in self.vals or kind != "row":
                raise NoMatch
            return self.mean(node, self.vals[ins[0]][1])
        if op in UNARY:
            if len(ins) != 1 or ins[0] not in self.vals or self.vals[ins[0]][0] != kind \
                    or g.t(ins[0]).size != y.size:
                raise NoMatch
            p = self.vals[ins[0]][1]
            if op == "NEG":
                return _add({}, p, -1.0)
            if op == "SQUARE":
                return _mul(p, p)
            return self.root(p, -1 if op == "RSQRT" else 1)
        if op in BINARY:
            if len(ins) != 2:
                raise NoMatch
            a, b = (self.operand(i, y.shape, kind) for i in ins)
            if op == "ADD":
                return _add(a, b)
            if op == "SUB":
                return _add(a, b, -1.0)
            if op == "MUL":
                return _mul(a, b)
            if op == "DIV":
                return _mul(a, _inverse(b))
            if op == "SQUARED_DIFFERENCE":
                d = _add(a, b, -1.0)
                return _mul(d, d)
            # POW with a constant exponent
            if b.keys() != {ONE} or not np.isscalar(b[ONE]):
                raise NoMatch
            e = b[ONE]
            if e == 2.0:
                return _mul(a, a)
            if e in (0.5, -0.5):
                return self.root(a, 1 if e > 0 else -1)
            raise NoMatch
        raise NoMatch

    def layer_norm(self, p):
        """(gamma, beta) as [C] arrays / scalars / None if p is G*X/S - G*M/S (+ B), else None."""
        xs, ms = (1, 0, 0, -1), (0, 1, 0, -1)
        if not p.keys() <= {xs, ms, ONE} or xs not in p or ms not in p or self.eps is None:
            return None
        gamma = p[xs]
        if not np.array_equal(np.broadcast_to(-np.asarray(p[ms], np.float64), (self.C,)),
                              np.broadcast_to(np.asarray(gamma, np.float64), (self.C,))):
            return None
        return gamma, p.get(ONE)


def _chan_const(graph: Graph, name: str, v, C: int) -> int:
    return graph.add_const(name, np.ascontiguousarray(np.broadcast_to(np.asarray(v, np.float64), (C,)),
                                                      dtype=np.float32))


def _try(graph: Graph, m1: Node) -> bool:
    try:
        mt = _Matcher(graph, m1)
    except NoMatch:
        return False
    users, prod = graph.consumers(), graph.producers()
    start = index_of(graph.nodes, m1)
    region = []
    for node in graph.nodes[start:]:
        ins = [i for i in node.inputs if i >= 0]
        if not any(i in mt.vals and i not in mt.xs for i in ins) and node is not m1 \
                and not (node.op in RESHAPES and ins[:1] and ins[0] in mt.xs):
            continue
        try:
            p = mt.step(node)
        except NoMatch:
            continue
        mt.vals[node.outputs[0]] = (mt.kind_of(node.outputs[0]), p)
        if node.op in RESHAPES and node.inputs[0] in mt.xs:
            mt.xs.add(node.outputs[0])          # a view of x: read like x, left in place (not part of the chain)
        else:
            region.append(node)
    outputs = set(graph.outputs) | {t.id for t in graph.tensors if t.is_variable}
    for y_node in reversed(region):
        y = y_node.outputs[0]
        if mt.vals[y][0] != "full":
            continue
        gb = mt.layer_norm(mt.vals[y][1])
        if gb is None:
            continue
        need, stack = {}, [y_node]
        while stack:
            n = stack.pop()
            if id(n) in need:
                continue
            need[id(n)] = n
            stack += [prod[i] for i in n.inputs if i in mt.vals and i not in mt.xs]
        if any(o != y and (o in outputs or any(id(u) not in need for u in users.get(o, [])))
               for n in need.values() for o in n.outputs):
            continue
        gamma, beta = gb
        C = mt.C
        gid = -1 if np.isscalar(gamma) and gamma == 1.0 else _chan_const(graph, f"{graph.t(y).name}/ln_gamma", gamma, C)
        bid = -1 if beta is None else _chan_const(graph, f"{graph.t(y).name}/ln_beta", beta, C)
        fused = Node(LN_OP, [mt.x, gid, bid], [y], index=y_node.index,
                     attrs=dict(eps=mt.eps, norm_size=C, fused=[n.op for n in graph.nodes if id(n) in need]))
        graph.nodes[index_of(graph.nodes, y_node)] = fused
        graph.nodes = [n for n in graph.nodes if id(n) not in need]
        return True
    return False


def _mean_of_float(m, node: Node) -> bool:
    x = m.g.t(node.inputs[0])
    return x.dtype == "float32" and x.fake_quant is None and x.quant is None and x.size > 0


MEAN = Op("MEAN", Val(), name="mean", prefix=True, where=_mean_of_float)


def fuse_layer_norm(graph: Graph) -> None:
    """Replace each LayerNorm chain by one LAYER_NORM node (module docstring)."""
    rewrite(graph, [(MEAN, lambda g, match: _try(g, match["mean"]))])
