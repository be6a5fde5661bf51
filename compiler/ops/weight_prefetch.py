"""The weight-prefetch kernel (shaders/weight_prefetch.comp): loads a byte range of a weight tensor so
that it is in the GPU's L2 cache when a later dispatch streams it.  compiler/prefetch.py decides where
such kernels go (beside an earlier, latency-bound dispatch); this module only builds one.

A prefetch kernel binds one constant tensor (declared volatile readonly: the loads stay though their values
are unused) and no arena bytes: the runtime's barrier plan (runtime/hazards.py) puts no barrier before or after it."""
from __future__ import annotations

from gpuc.compiler.codegen.kernel import Kernel
from gpuc.compiler.ops import template

WORD_BYTES = 16                  # one load: a uvec4
DTYPES = {"uint32": 0, "int32": 0, "float32": 1}   # weight dtypes it reads (FLOATW)

VARIANTS = {
    "weight_prefetch": (dict(BEGIN=2, WORDS=40, U=4), {}, ["w"], {"w": "uint32"},
                        lambda d: dict(vec4=("w",), volatile=("w",))),
    "weight_prefetch:i32": (dict(BEGIN=0, WORDS=40, U=2), {}, ["w"], {"w": "int32"},
                            lambda d: dict(vec4=("w",), volatile=("w",))),
    "weight_prefetch:f32": (dict(BEGIN=1, WORDS=40, U=4, FLOATW=1), {}, ["w"], {"w": "float32"},
                            lambda d: dict(vec4=("w",), volatile=("w",))),
}


def words(graph, tid: int) -> int:
    """16-byte words of constant `tid` a prefetch can read (0: a dtype it does not take)."""
    t = graph.t(tid)
    return t.nbytes // WORD_BYTES if t.dtype in DTYPES else 0


def kernel(graph, tid: int, begin: int, count: int, invocations: int, local: int, unroll: int, label: str) -> Kernel:
    """A kernel loading words [begin, begin + count) of constant `tid` with `invocations` invocations in
    workgroups of `local`, `unroll` loads in flight each."""
    t = graph.t(tid)
    return Kernel("weight_prefetch", [("w", tid)], invocations,
                  dict(BEGIN=begin, WORDS=count, U=unroll, FLOATW=DTYPES[t.dtype]), label,
                  local_x=local, vec4=("w",), volatile=("w",))


template("weight_prefetch", item_major=False, flat=False)
