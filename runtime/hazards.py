"""Which dispatches need a barrier before them: the one home of the rule, used by the runtime when it
records command buffers (runtime/commands.py) and by the compiler when it picks a dispatch order
(compiler/schedule.py).  No Vulkan here.

A dispatch waits for the ones since the last barrier only when it reads or writes bytes one of them
wrote, or writes bytes one of them read.  Which bindings a shader writes comes from its SPIR-V
(runtime/spirv.py: every binding not `readonly`), the bytes from the tensor table; weights are never
written.
"""
from __future__ import annotations

from gpuc.runtime import spirv
from gpuc.runtime.bundle_format import ARENA


def plan(accesses, every: bool = False) -> list[bool]:
    """accesses: per dispatch of a run, ([byte ranges it reads], [ranges it writes]) as (start, end).
    Whether each waits for the ones before it (the first: never; every: all the others)."""
    need, pending_r, pending_w = [], [], []
    for i, (reads, writes) in enumerate(accesses):
        hazard = i > 0 and (every or _overlap(reads + writes, pending_w) or _overlap(writes, pending_r))
        if hazard:
            pending_r, pending_w = [], []
        need.append(hazard)
        pending_r, pending_w = pending_r + reads, pending_w + writes
    return need


def arena_access(bundle) -> list:
    """Per dispatch of `bundle`: ([arena byte ranges it reads], [ranges it writes])."""
    written, out = {}, []
    for d in bundle.dispatches:
        sh = bundle.shaders[d.shader]
        if d.shader not in written:
            written[d.shader] = spirv.written_bindings(sh.spirv, sh.bindings)
        reads, writes = [], []
        for slot, ti in enumerate(d.bindings):
            t = bundle.tensors[ti]
            if t.memory == ARENA:
                (writes if slot in written[d.shader] else reads).append((t.offset, t.offset + max(4, t.nbytes)))
        out.append((reads, writes))
    return out


def _overlap(ranges, others) -> bool:
    return any(a < d and c < b for a, b in ranges for c, d in others)
