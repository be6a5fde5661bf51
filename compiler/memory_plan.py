"""Memory planning: arena offsets for every runtime tensor, from program-order lifetimes.

`plan_memory` is what the driver calls on a lowered program.  Greedy best fit (TFLite's and MNN's
approach): tensors in a fixed order each go into the smallest ALIGN-ed gap that fits among the
already placed tensors whose lifetimes intersect their own (else above them); three orders are
tried (by size, by size x lifetime, by lifetime) and the smallest arena kept.  Graph inputs live
from the start, graph outputs to the end.
"""
from __future__ import annotations

from dataclasses import dataclass

from gpuc.compiler.ir import GPU, Graph
from gpuc.compiler.passes.inplace import safe_bindings
from gpuc.runtime.bundle import OFFSET_ALIGN as ALIGN      # the bundle format's tensor offset alignment


def align(n: int, a: int = ALIGN) -> int:
    return (int(n) + a - 1) // a * a


@dataclass
class Placement:
    offset: int
    nbytes: int
    first: int
    last: int


def lifetimes(kernels, runtime_tensors, graph_inputs, graph_outputs):
    """tensor id -> [first, last] kernel index (inputs start at -1, outputs end at len(kernels))."""
    life = {}
    for i, k in enumerate(kernels):
        for _, tid in k.bindings:
            if tid in runtime_tensors:
                lo, hi = life.get(tid, (i, i))
                life[tid] = (min(lo, i), max(hi, i))
    for tid in graph_inputs:
        life[tid] = (-1, life.get(tid, (-1, -1))[1])
    for tid in graph_outputs:
        life[tid] = (life.get(tid, (len(kernels), len(kernels)))[0], len(kernels))
    return life


def _place(order, life: dict, nbytes: dict):
    placed: list[Placement] = []
    result = {}
    for tid in order:
        first, last = life[tid]
        size = align(max(nbytes[tid], 4))
        busy = sorted((p.offset, p.offset + align(p.nbytes)) for p in placed
                      if not (p.last < first or last < p.first))
        offset, best = 0, None
        for lo, hi in busy:                 # best fit among gaps large enough
            if lo - offset >= size and (best is None or lo - offset < best[1]):
                best = (offset, lo - offset)
            offset = max(offset, hi)
        offset = best[0] if best else offset
        p = Placement(offset, max(nbytes[tid], 4), first, last)
        placed.append(p)
        result[tid] = p
    arena = max((p.offset + align(p.nbytes) for p in placed), default=0)
    return result, arena


def plan_arena(life: dict, nbytes: dict):
    """Returns ({tid: Placement}, arena_bytes): the smallest of best-fit placements in three orders:
    by size (largest first), by size x lifetime ("area"), by lifetime then size.  Size order alone
    misses the bound when a long-lived small tensor fragments the space big short-lived ones need
    (mp_selfie_segmentation: 3.28 MB by size, 3.15 MB = the aligned lower bound by area)."""
    def a(t):
        return align(max(nbytes[t], 4))

    def span(t):
        return life[t][1] - life[t][0] + 1
    orders = [lambda t: (-a(t), life[t][0], t), lambda t: (-a(t) * span(t), t), lambda t: (-span(t), -a(t), t)]
    best = None
    for key in orders:
        plan = _place(sorted(life, key=key), life, nbytes)
        if best is None or plan[1] < best[1]:
            best = plan
    return best


def lower_bound(life: dict, nbytes: dict) -> int:
    """Peak over the schedule of live bytes: no plan can use less."""
    if not life:
        return 0
    lo = min(f for f, _ in life.values())
    hi = max(l for _, l in life.values())
    return max(sum(nbytes[t] for t, (f, l) in life.items() if f <= i <= l) for i in range(lo, hi + 1))


def share_in_place(kernels, life: dict, nbytes: dict, dtypes: dict, pairs, keep) -> dict:
    """Apply the in-place pairs (output root, input root) of passes/inplace.py that the schedule
    allows (see there).  Merges each taken output's lifetime into its input's and removes the output
    from `life`; returns {output: input whose bytes it uses} (chains resolved)."""
    writers: dict[int, list[int]] = {}
    for i, k in enumerate(kernels):
        if k.bindings:
            writers.setdefault(k.bindings[0][1], []).append(i)
    host: dict[int, int] = {}

    def root(t):
        while t in host:
            t = host[t]
        return t
    for out, inp in pairs:
        if out in host or out in keep or inp in keep or out not in life or out == inp:
            continue
        x = root(inp)
        if x not in life or nbytes.get(out) != nbytes.get(inp) or dtypes.get(out) != dtypes.get(inp):
            continue
        first = life[out][0]
        if not 0 <= first < len(kernels) or writers.get(out, [None])[0] != first or life[x][1] != first:
            continue
        k = kernels[first]
        allowed = safe_bindings(k.template)
        names = [name for name, t in k.bindings[1:] if t == inp]
        if not names or (allowed is not None and any(nm not in allowed for nm in names)):
            continue
        host[out] = x
        life[x] = (life[x][0], life.pop(out)[1])
    return {o: root(o) for o in host}


@dataclass
class _Use:
    """A program item as the planner sees it: its template (GPU kernels; None for host steps and
    jumps, which no in-place pair may use) and its bindings on storage roots."""
    template: str | None
    bindings: list


@dataclass
class MemoryPlan:
    offsets: dict               # arena tensor (a storage root) -> byte offset
    arena_bytes: int
    lower_bound_bytes: int
    naive_bytes: int            # every arena tensor in its own bytes
    in_place: int               # outputs living in their input's bytes


def plan_memory(graph: Graph, program: list, tensors: list, persistent: list, group_end: list | None = None) -> MemoryPlan:
    """Arena offsets for the runtime tensors among `tensors` (their storage roots), in the order of
    `program` (kernels, host steps, jumps); `persistent` tensors (variables) live for the whole program.
    group_end: per program item the last item of its group (schedule.group_ends): a tensor lives to
    the end of the group of its last use."""
    st = graph.storage
    roots = [t for t in tensors if not graph.t(t).is_const and st(t) == t]
    nbytes = {t: graph.t(t).nbytes for t in tensors}
    uses = [_Use(k.template if k.kind == GPU else None, [(n, st(t)) for n, t in k.bindings]) for k in program]
    life = lifetimes(uses, set(roots), [st(t) for t in graph.inputs] + persistent,
                     [st(t) for t in graph.outputs] + persistent)
    if group_end:
        life = {t: (lo, group_end[hi] if 0 <= hi < len(group_end) else hi) for t, (lo, hi) in life.items()}
    shared = share_in_place(uses, life, nbytes, {t: graph.t(t).dtype for t in tensors},
                            [(st(o), st(i)) for o, i in graph.in_place],
                            {st(t) for t in graph.inputs + graph.outputs} | set(persistent))
    placement, arena = plan_arena(life, nbytes)
    placement.update({o: placement[x] for o, x in shared.items()})     # in place: the input's bytes
    return MemoryPlan({t: p.offset for t, p in placement.items()}, arena, lower_bound(life, nbytes),
                      sum(nbytes[t] for t in roots), len(shared))
