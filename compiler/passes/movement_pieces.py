"""The index map of a folded movement chain (passes/movement_fold.py): pieces, and pulling them back
through each movement op.

The index map.  The output is described by *pieces*, each a box of output elements walked by
`digits`: a digit is (count n, output stride, tensor dim, coefficient a), so that the piece's
element (k_0 .. k_m) is the output element dst_off + sum k_i * dst_i and the element of the current
tensor at coordinates base + sum over digits of a_i * k_i on dim_i.  Pulling a piece back through an
op rewrites (tensor, base, dims, coefficients) into the op's input: per-dim affine maps (transpose,
slices, reverse, unpack, split, broadcast) rewrite them in place; RESHAPE re-expresses every digit
in the input's mixed radix (a digit that crosses a dimension of the input splits in two where the
dimension divides it; where it does not, the piece is first cut at the input's block boundaries,
leaving a partial block at each end and the whole blocks between in one piece); CONCATENATION / PACK / PAD / TILE / GATHER split a piece where it crosses the
boundary between two inputs (or between the padding and the input) along the digits of that dim,
outermost digit first.  A piece that reaches a tensor outside the chain is a strided copy region
(shape, source strides and offset, output strides and offset) of the GATHER_COPY node; a piece in
padding is a fill region (the pad value's bits).  Where a pull-back is not expressible (a reshape
whose digits do not divide the input's dims, too many pieces), the chain stops at that tensor.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from gpuc.compiler.ir import Graph, Node
from gpuc.compiler.ops.shape import pad_constant
from gpuc.compiler.ops.strided_slice import strided_slice_dims
from gpuc.compiler.ops import rules
from gpuc.compiler.ops.util import norm_axis, size, strides



def kind(op: str) -> str | None:
    """The op's `pieces` fact (compiler/ops/): which pull-back below reads its output's pieces, or
    None for an op that computes values."""
    from gpuc.compiler.ops import fact
    k = fact(op, "pieces")
    return k if isinstance(k, str) else None
MAX_PIECES = 4096           # regions of one GATHER_COPY


class Stop(Exception):
    """The chain cannot be pulled back through this tensor (it stays materialized)."""


@dataclass(frozen=True)
class Digit:
    n: int          # count
    dst: int        # output stride (elements)
    dim: int        # dim of the current tensor it moves (-1: none)
    a: int          # coefficient along that dim


@dataclass(frozen=True)
class Piece:
    digits: tuple
    dst_off: int
    tensor: int                 # current tensor (-1: a fill region)
    base: tuple = ()            # coordinates of the first element in the current tensor
    fill: int = 0               # fill regions: the value's 32-bit pattern

    @property
    def count(self) -> int:
        return size([d.n for d in self.digits])


def norm_digits(digits) -> tuple:
    return tuple(d if d.a else replace(d, dim=-1) for d in digits if d.n > 1)


# ---------------------------------------------------------------------------------------------------
# pull-backs

def _affine(p: Piece, x: int, rank: int, maps) -> Piece:
    """maps[e] = (input dim or None, start, step) for every dim e of the current tensor: the input
    coordinate on that dim is start + step * c_e (None: the coordinate is dropped: a broadcast or new
    axis, or PACK's axis once a piece has one value there).  Input dims no map names get 0."""
    base = [0] * rank
    for e, (d, start, step) in enumerate(maps):
        if d is not None:
            base[d] = start + step * p.base[e]
    digits = []
    for g in p.digits:
        if g.dim < 0:
            digits.append(g)
            continue
        d, _, step = maps[g.dim]
        digits.append(replace(g, dim=-1, a=0) if d is None else replace(g, dim=d, a=g.a * step))
    return Piece(norm_digits(digits), p.dst_off, x, tuple(base))


def _reshape(p: Piece, cur_shape, x: int, shape) -> Piece:
    """The piece (on a tensor of `cur_shape`) re-expressed in the mixed radix of `shape`, the shape
    of tensor x (same elements, row-major)."""
    cur = strides(cur_shape)
    flat = sum(b * s for b, s in zip(p.base, cur))
    xs, digits = strides(shape), []
    movable = [d for d in range(len(shape)) if shape[d] > 1]
    for g in p.digits:
        if g.dim < 0:
            digits.append(g)
            continue
        s, n, dst, parts = abs(g.a * cur[g.dim]), g.n, g.dst, []
        sign = 1 if g.a > 0 else -1
        while n > 1:
            d = next((d for d in movable if xs[d] <= s), None)
            if d is None or s % xs[d]:
                raise Stop
            a = s // xs[d]
            fit = -(-shape[d] // a)
            if n <= fit:
                parts.append(Digit(n, dst, d, sign * a))
                break
            if shape[d] % a or n % fit:
                raise Stop
            parts.append(Digit(fit, dst, d, sign * a))
            n, dst, s = n // fit, dst * fit, s * fit
        digits += parts[::-1]
    base = list(np.unravel_index(flat, shape)) if shape else []
    out = Piece(norm_digits(digits), p.dst_off, x, tuple(int(b) for b in base))
    _check_box(out, shape)
    return out


def _reshape_split(p: Piece, cur_shape, x: int, shape) -> list[Piece]:
    """_reshape, else the piece cut where its dims cross a dimension boundary of `shape` (a roll
    across window borders: rows 0..4 of [2 windows x 4 rows]), each part re-expressed."""
    try:
        return [_reshape(p, cur_shape, x, shape)]
    except Stop:
        pass
    cur, xs = strides(cur_shape), strides(shape)
    parts = [p]
    for j, n in enumerate(cur_shape):
        if not any(g.dim == j for g in p.digits):
            continue
        periods = [q for q in {xs[d - 1] // cur[j] for d in range(1, len(shape)) if xs[d - 1] % cur[j] == 0}
                   if 1 < q < n]
        nxt = []
        for part in parts:                 # a partial block at each end, whole blocks in between
            lo, hi = _range(part, j)
            cuts = sorted({c for q in periods for c in (-(-lo // q) * q, (hi + 1) // q * q) if lo < c <= hi})
            nxt += [q for q, _ in _split(part, j, cuts)] if cuts else [part]
        parts = nxt
        if len(parts) > MAX_PIECES:
            raise Stop
    return [_reshape(q, cur_shape, x, shape) for q in parts]


def _range(p: Piece, d: int) -> tuple[int, int]:
    """Lowest and highest coordinate of the piece on dim d."""
    lo = hi = p.base[d]
    for g in p.digits:
        if g.dim == d:
            lo, hi = lo + min(0, g.a * (g.n - 1)), hi + max(0, g.a * (g.n - 1))
    return lo, hi


def _check_box(p: Piece, shape) -> None:
    """Every coordinate the piece reaches lies inside `shape` (else the mixed radix carried)."""
    for d, n in enumerate(shape):
        lo, hi = _range(p, d)
        if lo < 0 or hi >= n:
            raise Stop


def _split(p: Piece, dim: int, cuts) -> list[tuple[Piece, int]]:
    """Sub-pieces of `p` each of whose coordinates on `dim` lie in one interval of the sorted `cuts`
    ((-inf, c0), [c0, c1), ...): [(piece, interval)]."""
    def interval(v):
        return int(np.searchsorted(cuts, v, side="right"))

    def rec(p):
        on = sorted((g for g in p.digits if g.dim == dim), key=lambda g: -abs(g.a))
        lo = hi = p.base[dim]
        for g in on:
            lo, hi = lo + min(0, g.a * (g.n - 1)), hi + max(0, g.a * (g.n - 1))
        if interval(lo) == interval(hi):
            return [(p, interval(lo))]
        g = on[0]
        rest_lo, rest_hi = lo - min(0, g.a * (g.n - 1)), hi - max(0, g.a * (g.n - 1))
        i = p.digits.index(g)
        out, run = [], None
        for k in range(g.n + 1):
            iv = None
            if k < g.n:
                a, b = interval(rest_lo + g.a * k), interval(rest_hi + g.a * k)
                iv = a if a == b else -1
            if run is not None and (iv != run[1] or iv == -1):
                k0 = run[0]
                sub = _sub(p, i, k0, k - k0)
                out += [(sub, run[1])] if run[1] != -1 else rec(sub)
                run = None
            if k < g.n and run is None:
                run = (k, iv)
            if len(out) > MAX_PIECES:
                raise Stop
        return out
    return rec(p)


def _sub(p: Piece, i: int, k0: int, n: int) -> Piece:
    """`p` with digit i restricted to k0 .. k0 + n - 1."""
    g = p.digits[i]
    base = list(p.base)
    if g.dim >= 0:
        base[g.dim] += g.a * k0
    digits = list(p.digits)
    digits[i] = replace(g, n=n)
    return Piece(norm_digits(digits), p.dst_off + g.dst * k0, p.tensor, tuple(base), p.fill)


def data_input(node: Node) -> int:
    """The position of the input whose elements a movement op moves (SPLIT's axis comes first)."""
    return 1 if kind(node.op) == "split" else 0


def _const_ints(graph, tid, what):
    t = graph.t(tid)
    if not t.is_const:
        raise Stop
    return rules.ints(t.data, what)


def pull(graph: Graph, node: Node, p: Piece) -> list[Piece]:
    """The pieces of node's inputs (or fills) that make piece p of one of node's outputs."""
    out = node.outputs.index(p.tensor)
    y = graph.t(p.tensor)
    x = graph.t(node.inputs[0])
    r, op, at = len(x.shape), kind(node.op), node.attrs
    if op == "reshape":
        return _reshape_split(p, y.shape, x.id, x.shape)
    if op == "transpose":
        perm = [norm_axis(v, r) for v in _const_ints(graph, node.inputs[1], "perm")]
        return [_affine(p, x.id, r, [(perm[e], 0, 1) for e in range(r)])]
    if op == "slice":
        begin = _const_ints(graph, node.inputs[1], "begin")
        return [_affine(p, x.id, r, [(e, begin[e], 1) for e in range(r)])]
    if op == "reverse":
        axes = {norm_axis(a, r) for a in _const_ints(graph, node.inputs[1], "axis")}
        return [_affine(p, x.id, r, [(e, x.shape[e] - 1, -1) if e in axes else (e, 0, 1) for e in range(r)])]
    if op == "strided_slice":
        plan, _ = strided_slice_dims(
            x.shape, _const_ints(graph, node.inputs[1], "begin"), _const_ints(graph, node.inputs[2], "end"),
            _const_ints(graph, node.inputs[3], "strides"), *(int(at.get(k, 0) or 0) for k in (
                "begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask", "shrink_axis_mask")),
            bool(at.get("offset", False)))
        eff = [c for _, _, c, _ in plan]                 # the output with shrunk dims kept (size 1)
        q = _reshape(p, y.shape, p.tensor, eff) if list(eff) != list(y.shape) else p
        return [_affine(q, x.id, r, [(d, st, s) for d, st, _, s in plan])]
    if op in ("split", "split_v"):
        xi = data_input(node)
        x = graph.t(node.inputs[xi])
        r = len(x.shape)
        axis = norm_axis(_const_ints(graph, node.inputs[0 if op == "split" else 2], "axis")[0], r)
        if op == "split":
            sizes = [x.shape[axis] // len(node.outputs)] * len(node.outputs)
        else:
            sizes = _const_ints(graph, node.inputs[1], "size_splits")
            if -1 in sizes:
                sizes[sizes.index(-1)] = x.shape[axis] - (sum(sizes) + 1)
        off = sum(sizes[:out])
        return [_affine(p, x.id, r, [(e, off if e == axis else 0, 1) for e in range(r)])]
    if op == "unpack":
        axis = norm_axis(int(at.get("axis", 0) or 0), r)
        q = _reshape(p, y.shape, p.tensor, list(x.shape[:axis]) + [1] + list(x.shape[axis + 1:]))
        return [_affine(q, x.id, r, [(e, out if e == axis else 0, 1) for e in range(r)])]
    if op == "broadcast_to":
        lead = len(y.shape) - r
        return [_affine(p, x.id, r, [(None, 0, 0) if e < lead else (e - lead, 0, int(x.shape[e - lead] != 1))
                                     for e in range(len(y.shape))])]
    if op == "concatenation":
        axis = norm_axis(int(at.get("axis", 0) or 0), len(y.shape))
        offs = np.cumsum([0] + [graph.t(i).shape[axis] for i in node.inputs])
        res = []
        for q, iv in _split(p, axis, offs[1:-1]):
            # empty inputs have equal cuts: searchsorted(side=right) lands past them
            src = node.inputs[iv]
            res.append(_affine(q, src, r, [(e, -int(offs[iv]) if e == axis else 0, 1) for e in range(r)]))
        return res
    if op == "pack":
        axis = norm_axis(int(at.get("axis", 0) or 0), r + 1)
        res = []
        for q, iv in _split(p, axis, list(range(1, len(node.inputs)))):
            if any(g.dim == axis for g in q.digits):
                raise Stop
            maps = [(e if e < axis else e - 1, 0, 1) if e != axis else (None, 0, 0) for e in range(r + 1)]
            res.append(_affine(q, node.inputs[iv], r, maps))
        return res
    if op == "pad":
        pads = np.asarray(graph.t(node.inputs[1]).data).reshape(-1, 2) if graph.t(node.inputs[1]).is_const else None
        if pads is None:
            raise Stop
        value = pad_constant(graph, node)                         # (PADV2's value as LiteRT writes it)
        if value is None:
            raise Stop
        fill = int(np.array([value], dtype=y.dtype).view(np.uint32)[0])
        cur = [p]
        for d in range(r):
            lo = int(pads[d][0])
            nxt = []
            for q in cur:
                if q.tensor < 0:
                    nxt.append(q)
                    continue
                for s, iv in _split(q, d, [lo, lo + x.shape[d]]):
                    nxt.append(Piece(s.digits, s.dst_off, -1, (), fill) if iv != 1 else
                               replace(s, base=tuple(b - lo if e == d else b for e, b in enumerate(s.base))))
            cur = nxt
        return [replace(q, tensor=x.id) if q.tensor >= 0 else q for q in cur]
    if op == "tile":
        cur = [p]
        for d in range(r):
            n, nxt = x.shape[d], []
            if y.shape[d] == n:
                nxt = cur
            else:
                for q in cur:
                    nxt += [replace(s, base=tuple(b - iv * n if e == d else b for e, b in enumerate(s.base)))
                            for s, iv in _split(_tile_digits(q, d, n), d, list(range(n, y.shape[d], n)))]
            cur = nxt
        return [replace(q, tensor=x.id) for q in cur]
    if op == "gather":
        axis = norm_axis(int(at.get("axis", 0) or 0), r)
        if int(at.get("batch_dims", 0) or 0) != 0:
            raise Stop
        it = graph.t(node.inputs[1])
        if not it.is_const or len(it.shape) > 1:
            raise Stop
        idx = [int(v) for v in np.asarray(it.data).reshape(-1)]
        if any(not 0 <= v < x.shape[axis] for v in idx):
            raise Stop
        if not it.shape:
            q = _reshape(p, y.shape, p.tensor, list(x.shape[:axis]) + [1] + list(x.shape[axis + 1:]))
            return [_affine(q, x.id, r, [(e, idx[0] if e == axis else 0, 1) for e in range(r)])]
        runs, j = [], 0                       # maximal arithmetic runs of the indices: (first, step)
        while j < len(idx):
            k = j + 1
            step = idx[k] - idx[j] if k < len(idx) else 0
            while k < len(idx) and idx[k] - idx[k - 1] == step:
                k += 1
            runs.append((j, k, step))
            j = k
        res = []
        for q, iv in _split(p, axis, [a for a, _, _ in runs[1:]]):
            j0, _, step = runs[iv]
            res.append(_affine(q, x.id, r, [(e, idx[j0] - step * j0 if e == axis else 0, step if e == axis else 1)
                                            for e in range(r)]))
        return res
    raise Stop


def _tile_digits(p: Piece, d: int, n: int) -> Piece:
    """A digit walking whole tiles of size n along d (coefficient 1, from a tile start) becomes an
    inner digit over one tile and an outer one that does not move (the tiles repeat)."""
    on = [g for g in p.digits if g.dim == d]
    if len(on) == 1 and on[0].a == 1 and p.base[d] % n == 0 and on[0].n % n == 0 and on[0].n > n:
        g = on[0]
        i = p.digits.index(g)
        digits = list(p.digits)
        digits[i:i + 1] = [Digit(g.n // n, g.dst * n, -1, 0), Digit(n, g.dst, d, 1)]
        base = tuple(0 if e == d else b for e, b in enumerate(p.base))
        return Piece(norm_digits(digits), p.dst_off, p.tensor, base)
    return p
