"""Dispatch order: independent kernels side by side, so that the runtime's barrier plan
(runtime/hazards.py: a barrier only before a dispatch that touches what the ones since the last
barrier wrote, or writes what they read) lets them run together.

`by_levels` gives every GPU kernel of a run between host steps, labels and jumps a level: one more
than the deepest earlier kernel it depends on (it reads or writes what that one writes, or writes
what that one reads; views share their storage's bytes), and orders the run by level, program order
within a level.  Dependencies only ever point to a lower level, so every kernel still follows what
it needs.  Running side by side keeps more tensors alive at once, and a memory plan that reuses the
bytes of a tensor read in a group for one written in it adds a barrier back.  driver.build_bundle
tries program order, level order, and level order planned with every tensor alive to the end of its
group (group_ends), counts the barriers each gets (`barriers`, the runtime's rule over the planned
bytes) and keeps the one with the fewest among those whose arena is at most ARENA_SLACK or
ARENA_SLACK_BYTES larger than program order's.  `--disable-pass schedule_dispatches` keeps program
order.
"""
from __future__ import annotations

from gpuc.compiler.ir import GPU, Graph
from gpuc.runtime import hazards

ARENA_SLACK, ARENA_SLACK_BYTES = 1.05, 1 << 20      # the arena may grow by 5% or 1 MiB


def _access(graph: Graph, k) -> tuple[set, set]:
    """(storages k reads, storages k writes): binding 0 and read-write bindings are written."""
    writes = {graph.storage(k.bindings[0][1])} | {graph.storage(t) for n, t in k.bindings[1:] if n in k.rw}
    reads = {graph.storage(t) for n, t in k.bindings[1:] if n not in k.rw and not graph.t(t).is_const}
    return reads, writes


def depends(graph: Graph, a, b) -> bool:
    """Kernel b reads or writes what kernel a writes, or writes what a reads (tensor storages)."""
    (ra, wa), (rb, wb) = _access(graph, a), _access(graph, b)
    return bool((rb | wb) & wa or wb & ra)


def group_ends(graph: Graph, program: list) -> list[int]:
    """For each program item, the index of the last item of its group: a run of GPU kernels none of
    which depends on another, which the runtime runs without a barrier between them.  The memory plan
    keeps every tensor a group uses alive to the group's end, so that sharing bytes adds no hazard
    inside a group.  Host steps, labels and jumps are groups of their own."""
    ends, start = [], 0
    for i, item in enumerate(program):
        fresh = item.kind != GPU or program[start].kind != GPU or any(
            depends(graph, program[j], item) for j in range(start, i))
        if i and fresh:
            ends += [i - 1] * (i - start)
            start = i
    ends += [len(program) - 1] * (len(program) - start)
    return ends


def levels(graph: Graph, kernels: list) -> list[int]:
    """Each kernel's level in a run of kernels (see the module docstring)."""
    last_writer, readers, out = {}, {}, []
    for k in kernels:
        reads, writes = _access(graph, k)
        lv = max([out[last_writer[t]] + 1 for t in reads | writes if t in last_writer]
                 + [out[j] + 1 for t in writes for j in readers.get(t, ())] + [0])
        i = len(out)
        out.append(lv)
        for t in writes:
            last_writer[t], readers[t] = i, []
        for t in reads - writes:
            readers.setdefault(t, []).append(i)
    return out


def by_levels(graph: Graph, program: list) -> list:
    """`program` with each run of GPU kernels ordered by level (host steps, labels and jumps stay)."""
    out, run = [], []
    for item in program + [None]:
        if item is not None and item.kind == GPU:
            run.append(item)
            continue
        lv = levels(graph, run)
        out += [k for _, _, k in sorted(zip(lv, range(len(run)), run), key=lambda e: (e[0], e[1]))]
        run = []
        if item is not None:
            out.append(item)
    return out


def barriers(graph: Graph, program: list, offsets: dict) -> int:
    """The barriers the runtime's plan (runtime/hazards.py) puts into `program` with arena `offsets`
    (storage -> byte offset); host steps, labels and jumps start afresh."""
    def spans(ts):
        return [(offsets[t], offsets[t] + max(4, graph.t(t).nbytes)) for t in ts if t in offsets]

    count, run = 0, []
    for item in program + [None]:
        if item is not None and item.kind == GPU:
            run.append(tuple(spans(ts) for ts in _access(graph, item)))
            continue
        count, run = count + sum(hazards.plan(run)), []
    return count
