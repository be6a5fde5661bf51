"""StridedView: a tensor as a strided view of a contiguous source, composed through data movement
(RESHAPE, TRANSPOSE, slices, size-1 broadcasts), and the batch / bias index terms the fused attention
kernel (passes/attention.py, ops/attention.py) reads such a view with.  Any step that leaves the view
not strided raises pattern.NoMatch."""
from __future__ import annotations

import numpy as np

from gpuc.compiler.pattern import NoMatch

MAX_TERMS = 8                # batch index terms of one operand's view (the kernel's limit)


class StridedView:
    """A tensor as a strided view of a contiguous source: per logical dim, its atoms (size, stride) in
    row-major order (an empty list: a dim of size 1).  RESHAPE regroups atoms (splitting one where a
    dim boundary falls inside it), TRANSPOSE permutes the dims."""

    def __init__(self, shape):
        self.off = 0
        st, dims = 1, []
        for d in reversed(shape):
            dims.append([(int(d), st)] if d != 1 else [])
            st *= int(d)
        self.dims = dims[::-1]

    def transpose(self, perm):
        self.dims = [self.dims[p] for p in perm]

    def select(self, axis, start, count, step=1):
        """Elements start, start + step, ... (count of them) of dim `axis` (a SLICE / split)."""
        full = int(np.prod([s for s, _ in self.dims[axis]], dtype=np.int64)) if self.dims[axis] else 1
        if start == 0 and count == full and step == 1:
            return
        if step < 1 or count < 1 or start < 0 or start + (count - 1) * step >= full:
            raise NoMatch
        t = self.stride(axis)
        self.off += start * t
        self.dims[axis] = [(count, t * step)] if count > 1 else []

    def reshape(self, shape):
        atoms = [a for d in self.dims for a in d]
        dims = []
        for n in shape:
            n, dim, got = int(n), [], 1
            while got < n:
                if not atoms:
                    raise NoMatch
                s, t = atoms[0]
                need = n // got
                if n % got:
                    raise NoMatch
                if s <= need and need % s == 0:
                    dim.append(atoms.pop(0))
                    got *= s
                elif s % need == 0:                      # split the atom: outer part here, inner stays
                    dim.append((need, t * (s // need)))
                    atoms[0] = (s // need, t)
                    got *= need
                else:
                    raise NoMatch
            dims.append(dim)
        if atoms:
            raise NoMatch
        self.dims = dims

    def broadcast(self, shape):
        """BROADCAST_TO / TILE of size-1 dims: right-aligned against `shape`, a dim of size 1 that grows to n
        reads its one element n times (an atom of stride 0)."""
        if len(shape) < len(self.dims):
            raise NoMatch
        self.dims = [[] for _ in range(len(shape) - len(self.dims))] + self.dims
        for a, n in enumerate(shape):
            if int(n) != 1 and not self.dims[a]:
                self.dims[a] = [(int(n), 0)]

    def stride(self, axis):
        """The one stride of a dim (its atoms merged), 0 for a dim of size 1; NoMatch if not strided."""
        atoms = self.dims[axis]
        if not atoms:
            return 0
        for (s0, t0), (s1, t1) in zip(atoms, atoms[1:]):
            if t0 != s1 * t1:
                raise NoMatch
        return atoms[-1][1]

    def batch_terms(self, batch_shape):
        """(div, mod, stride) triples: the offset of output batch b is sum(((b // div) % mod) * stride),
        this view's leading dims (all but the last two) broadcast against `batch_shape`."""
        mine = self.dims[:-2]
        if len(mine) > len(batch_shape):
            if any(self.dims[i] for i in range(len(mine) - len(batch_shape))):
                raise NoMatch
            mine = mine[len(mine) - len(batch_shape):]
        mine = [[]] * (len(batch_shape) - len(mine)) + list(mine)
        terms, p = [], 1
        for atoms, n in zip(reversed(mine), reversed(batch_shape)):
            size = int(np.prod([s for s, _ in atoms], dtype=np.int64)) if atoms else 1
            if size not in (1, n):
                raise NoMatch
            inner = 1
            for s, t in reversed(atoms if size == n else []):
                terms.append((p * inner, s, t))
                inner *= s
            p *= int(n)
        merged = []                                      # adjacent terms that are one stride
        for d, m, t in terms:
            if t == 0:                                   # a broadcast: every batch reads the same
                continue
            if merged and merged[-1][0] * merged[-1][1] == d and merged[-1][2] * merged[-1][1] == t:
                d0, m0, t0 = merged.pop()
                merged.append((d0, m0 * m, t0))
            else:
                merged.append((d, m, t))
        if len(merged) > MAX_TERMS:
            raise NoMatch
        return merged


def bias_terms(bshape, shape):
    """Row terms (over the flat row index of `shape`[:-1]) and the column stride of a tensor of shape
    `bshape` broadcast to `shape` (its last axis is the key axis)."""
    if len(bshape) > len(shape):
        if any(d != 1 for d in bshape[:len(bshape) - len(shape)]):
            raise NoMatch
        bshape = bshape[len(bshape) - len(shape):]
    bs = [1] * (len(shape) - len(bshape)) + [int(d) for d in bshape]
    if any(b not in (1, s) for b, s in zip(bs, shape)):
        raise NoMatch
    st, acc = [], 1
    for d in reversed(bs):
        st.append(acc)
        acc *= d
    st = st[::-1]
    terms, p = [], 1
    for a in range(len(shape) - 2, -1, -1):
        if bs[a] != 1:
            terms.append((p, int(shape[a]), st[a]))
        p *= int(shape[a])
    return terms, (st[-1] if bs[-1] != 1 else 0)
