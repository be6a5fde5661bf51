"""Weight prefetch: a kernel that streams a large weight (an LLM decode step's int8 GEMVs, a batch-1
network's late layers) waits for memory at the HBM's bandwidth, while the latency-bound dispatches
before it (attention over a short cache, small GEMVs, norms) leave that bandwidth idle.  `insert`
puts, beside such an earlier dispatch, a kernel that only reads the weight (compiler/ops/weight_prefetch.py),
so the weight is in the L2 cache when its consumer runs.  The prefetch touches no arena bytes: the
runtime's barrier plan (runtime/hazards.py) puts no barrier before or after it, so it runs concurrently
with the dispatches of its phase (those between two barriers), and the next barrier waits for it too.

Policy (CompileOptions.weight_prefetch, a text of key=value pairs, or off):
- a kernel *streams* the constant bindings its lowering names in Kernel.streams (read whole, once: a
  GEMV's weights) of at least min_mb MiB, where its constant bytes are at least `ratio` x the arena bytes
  it binds;
- its prefetch runs `lead` phases earlier in the same straight-line run of dispatches (never before the
  run's first phase), reading the first `frac` of each streamed weight;
- prefetched bytes not yet consumed stay within budget_mb MiB (about the L2 cache; the rest of a weight that
  does not fit is not prefetched);
- a prefetch kernel has `groups` workgroups of `local` invocations with `unroll` loads in flight each.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from gpuc.compiler import schedule
from gpuc.compiler.ir import GPU
from gpuc.compiler.ops import weight_prefetch
from gpuc.errors import GpucError

MIB = 1 << 20


@dataclass(frozen=True)
class Policy:
    lead: int = 3
    frac: float = 1.0
    min_mb: float = 4.0
    ratio: float = 8.0
    budget_mb: float = 40.0
    groups: int = 132
    local: int = 256
    unroll: int = 4


DEFAULT = None                   # off unless CompileOptions.weight_prefetch says otherwise


def parse(text) -> Policy | None:
    """The policy of CompileOptions.weight_prefetch: None / "" / "off" / "0": none; "on": the defaults;
    else "key=value,..." over Policy's fields.  Bad text raises GpucError naming the key."""
    if text is None:
        text = DEFAULT
    if text in (None, "", "off", "0", False):
        return None
    if text in ("on", "1", True):
        return Policy()
    fields = {f.name: f.type for f in dataclasses.fields(Policy)}
    got = {}
    for part in str(text).split(","):
        key, _, val = part.partition("=")
        key = key.strip()
        if key not in fields or not val:
            raise GpucError(f"compile option weight_prefetch: {part!r} is not key=value with key one of "
                            f"{', '.join(fields)}")
        try:
            v = float(val) if fields[key] == "float" else int(val)
        except ValueError:
            raise GpucError(f"compile option weight_prefetch: {key}={val!r} is not a number") from None
        if v < 0 or (key in ("groups", "local", "unroll") and v < 1) or (key == "frac" and v > 1):
            raise GpucError(f"compile option weight_prefetch: {key}={val} is out of range")
        got[key] = v
    return Policy(**got)


def streamed(graph, k, pol: Policy) -> list[int]:
    """The constants kernel k streams (its `streams` bindings: read whole, once) of at least min_mb MiB,
    where its constant bytes are at least `ratio` x the arena bytes it binds."""
    names = set(getattr(k, "streams", ()))
    consts, arena, big = [], 0, []
    for name, t in k.bindings:
        tt = graph.t(t)
        if tt.is_const:
            consts.append(t)
            if name in names and tt.nbytes >= pol.min_mb * MIB and weight_prefetch.words(graph, t):
                big.append(t)
        else:
            arena += tt.nbytes
    if not big or sum(graph.t(t).nbytes for t in dict.fromkeys(consts)) < pol.ratio * max(arena, 1):
        return []
    return list(dict.fromkeys(big))


def insert(graph, program: list, offsets: dict, pol: Policy | None) -> tuple[list, dict]:
    """(program with the prefetch kernels, stats {prefetches, prefetch_bytes})."""
    stats = {"prefetches": 0, "prefetch_bytes": 0}
    if pol is None:
        return program, stats
    out, run = [], []
    for item in program + [None]:
        if item is not None and item.kind == GPU:
            run.append(item)
            continue
        out += _run(graph, run, offsets, pol, stats)
        run = []
        if item is not None:
            out.append(item)
    return out, stats


def _run(graph, run: list, offsets: dict, pol: Policy, stats: dict) -> list:
    if len(run) < 2:
        return run
    phase, p = [], -1
    for b in schedule.barrier_plan(graph, run, offsets):
        p += 1 if (b or p < 0) else 0
        phase.append(p)
    budget = pol.budget_mb * MIB
    held = []                                   # (anchor phase, consumer phase, bytes) assigned so far
    after = {}                                  # anchor phase -> prefetch kernels
    for k, ph in zip(run, phase):
        anchor = max(0, ph - pol.lead)
        if anchor >= ph:
            continue
        for t in streamed(graph, k, pol):
            words = int(weight_prefetch.words(graph, t) * pol.frac)
            inflight = sum(b for a, c, b in held if a <= ph and c >= anchor)
            words = min(words, int(max(0, budget - inflight) // weight_prefetch.WORD_BYTES))
            if words * weight_prefetch.WORD_BYTES < pol.min_mb * MIB:
                continue
            held.append((anchor, ph, words * weight_prefetch.WORD_BYTES))
            after.setdefault(anchor, []).append(weight_prefetch.kernel(
                graph, t, 0, words, pol.groups * pol.local, pol.local, pol.unroll,
                f"prefetch of {graph.t(t).name} for {k.label}"))
            stats["prefetches"] += 1
            stats["prefetch_bytes"] += words * weight_prefetch.WORD_BYTES
    out = []
    for i, (k, ph) in enumerate(zip(run, phase)):
        out.append(k)
        if i + 1 == len(run) or phase[i + 1] != ph:
            out += after.get(ph, [])
    return out
