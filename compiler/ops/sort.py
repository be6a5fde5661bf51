"""GPU sort of (key, index) pairs: a segmented bitonic sort (shaders/sort_bitonic.comp).

`bitonic_sort` returns the dispatches that sort SEGS segments of P pairs (P a power of two) held in
one uint32 tensor (key, index word pairs) ascending by key, then index: a stable order for keys made
from the positions' values.  The first dispatch sorts blocks of up to SORT_BLOCK pairs in shared
memory (and may make the keys: `init`); each later stage k > SORT_BLOCK is one global
compare-exchange pass per distance >= SORT_BLOCK, then one shared-memory pass for the rest:
1 + sum over k of (log2(k / SORT_BLOCK) + 1) dispatches (21 for 32768 pairs a segment).
"""
from __future__ import annotations

from gpuc.compiler.codegen.kernel import Kernel
from gpuc.compiler.ops import template

SORT_BLOCK = 512                  # pairs a workgroup sorts in shared memory (BLOCK / 2 invocations)
GLOBAL_LOCAL_X = 256

VARIANTS = {
    "sort_bitonic": (dict(SEGS=2, P=1024, BLOCK=512, K=1024, J=512, N=1000, CB=4, OFF=1, NCLS=3, THR=0.25),
                     {"MODE": [0, 1, 2], "INIT": [0, 1], "PER_SEGMENT": [0, 1]},
                     ["keys", "scores"], {"keys": "uint32"},
                     lambda d: dict(local_x=d["BLOCK"] // 2 if d["MODE"] != 1 else GLOBAL_LOCAL_X,
                                    rw=("keys",) if d["MODE"] or not d["INIT"] else ())),
}


def padded(n: int) -> int:
    """The segment length for n elements: the next power of two, at least 2."""
    p = 2
    while p < n:
        p *= 2
    return p


def bitonic_sort(keys: int, segs: int, p: int, label: str, init: tuple = ()) -> list[Kernel]:
    """Kernels sorting `segs` segments of `p` pairs in tensor `keys` (uint32, 2 * segs * p words).
    init: (extra bindings, defines) of an INIT first pass that makes the keys (sort_bitonic.comp)."""
    if p < 2 or p & (p - 1):
        raise ValueError(f"bitonic segment length {p} is not a power of two >= 2")
    block = min(p, SORT_BLOCK)
    base = dict(SEGS=segs, P=p, BLOCK=block)
    pairs = segs * p // 2
    binds0, defs0 = init if init else ([], {})
    ks = [Kernel("sort_bitonic", [("keys", keys)] + list(binds0), pairs,
                 dict(base, MODE=0, INIT=int(bool(init)), **defs0), f"{label} sort blocks", local_x=block // 2,
                 rw=() if init else ("keys",))]
    k = 2 * block
    while k <= p:
        j = k // 2
        while j >= block:
            ks.append(Kernel("sort_bitonic", [("keys", keys)], pairs, dict(base, MODE=1, K=k, J=j),
                             f"{label} sort stage {k} step {j}", local_x=GLOBAL_LOCAL_X, rw=("keys",)))
            j //= 2
        ks.append(Kernel("sort_bitonic", [("keys", keys)], pairs, dict(base, MODE=2, K=k),
                         f"{label} sort stage {k} local", local_x=block // 2, rw=("keys",)))
        k *= 2
    return ks


template("sort_bitonic", item_major=False, flat=False)   # (its facts: compiler/ops/__init__.py template)
