"""GATHER_COPY (internal, made by passes/movement_fold.py): one output written from several sources
through piecewise strided index maps, shaders/gather_copy.comp.

node.attrs["regions"]: [(source input index or -1 for a fill, fill bits, shape, source strides,
source offset, output strides, output offset)] in elements; together they cover the output once.

Dispatches: regions reading at most MAX_SOURCES distinct sources are one dispatch, each source its
own binding.  More sources (CONCATENATION / PACK of 1000 inputs) are still one dispatch when they
all live in the arena: the kernel then binds the whole arena once per storage dtype (one view for
float32 and one for float16 tensors under --precision fp16) and reads each source at its arena
offset, which only the memory plan knows, so the kernel is finished by `resolve` after planning
(driver.build_bundle calls `resolve_arena`); an arena beyond MAX_VIEW_BYTES, which not every
device can bind whole, and constant sources beyond MAX_SOURCES get one dispatch per MAX_SOURCES
sources instead.  Regions live in constant arrays of the shader up to CONST_REGIONS, else in a
table (an int32 constant, one binding).

Wide words: where every region copies whole aligned runs of WORD consecutive elements (its innermost
dim contiguous on both sides, its length a multiple of WORD, every other stride and both offsets
multiples of WORD: a concatenation along the last axis, slices and pads of channel runs), the
bindings are declared as 4-vectors of their storage type (vec4 / f16vec4 / ivec4: 16 bytes, 8 under
float16 storage) and one invocation copies VEC (2 or 1) consecutive words, the regions counted in
words (define VEC; 0: one element per invocation).  Tensor offsets are 256-byte aligned
(runtime/bundle_format.py OFFSET_ALIGN), arena offsets of the whole-arena views too.
"""
from __future__ import annotations

import numpy as np

from gpuc.compiler.codegen.kernel import Kernel
from gpuc.compiler.ew_table import ACT
from gpuc.compiler.ir import GPU, Graph
from gpuc.compiler.ops import ANY_COUNT, NEUTRAL, Why, declare, register, rules, template
from gpuc.compiler.ops.util import checked, known_ints, size
from gpuc.compiler.options import current

MAX_SOURCES = 7
_REGS = dict(VEC=0, NREG=2, RANK=2, TABLE=0, IS_INT=0, R_START=[0, 6], R_SRC=[0, -1], R_FILL="uint[](0u, 2147483648u)",
             R_SOFF=[0, 0], R_DOFF=[0, 6], R_SHAPE=[2, 3, 1, 4], R_SST=[3, 1, 0, 0], R_DST=[3, 1, 4, 1])
_SRCS = [f"s{i}" for i in range(MAX_SOURCES)]
VARIANTS = {       # make shaders: one source, all seven, a region table, int32 data
    "gather_copy": (dict(_REGS, NSRC=1), {"ACT": [0, ACT["RELU"], ACT["TANH"]]}, ["out_", "s0"]),
    "gather_copy:7": (dict(_REGS, NSRC=7), {}, ["out_"] + _SRCS),
    "gather_copy:table": (dict(NSRC=2, NREG=40, RANK=3, TABLE=1, REG_WORDS=14, IS_INT=0), {},
                          ["out_", "s0", "s1", "tab"], {"tab": "int32"}),
    "gather_copy:int": (dict(_REGS, NSRC=3, IS_INT=1), {"ACT": [0, ACT["RELU6"]]}, ["out_", "s0", "s1", "s2"],
                        {n: "int32" for n in ("out_", "s0", "s1", "s2")}),
    # wide words (VEC words of 4 elements per invocation): float32 / float16 storage, int32, a table
    "gather_copy:vec": (dict(_REGS, NSRC=2), {"VEC": [1, 2], "ACT": [0, ACT["RELU"]]}, ["out_", "s0", "s1"], {},
                        lambda d: dict(vec4=("out_", "s0", "s1"))),
    "gather_copy:vec_int": (dict(_REGS, NSRC=2, IS_INT=1), {"VEC": [1, 2], "ACT": [0, ACT["RELU6"]]},
                            ["out_", "s0", "s1"], {n: "int32" for n in ("out_", "s0", "s1")},
                            lambda d: dict(vec4=("out_", "s0", "s1"))),
    "gather_copy:vec_table": (dict(NSRC=2, NREG=40, RANK=3, TABLE=1, REG_WORDS=14, IS_INT=0), {"VEC": [2]},
                              ["out_", "s0", "s1", "tab"], {"tab": "int32"}, lambda d: dict(vec4=("out_", "s0", "s1"))),
}
CONST_REGIONS = 32
ARENA_VIEW = "gpuc:arena"        # name of the whole-arena tensors (one per storage dtype)
MAX_VIEW_BYTES = 1 << 27         # Vulkan's guaranteed maxStorageBufferRange (lavapipe's limit too)
WORD = 4                         # elements of one wide word (a 4-vector binding element)
WIDE = (2, 1)                    # words per invocation, the first that every region allows (the default;
                                 # CompileOptions.copy_words overrides it, read through `words()`)


def words() -> tuple:
    """Words per invocation tried, in order of preference: CompileOptions.copy_words, else WIDE."""
    w = current().copy_words
    return WIDE if w is None else w


def _merge(reg):
    """Drop size-1 dims and merge dims contiguous on both sides; dims ordered by output stride."""
    src, fill, shape, sst, soff, dst, doff = reg
    dims = sorted((d for d in zip(shape, sst, dst) if d[0] != 1), key=lambda d: -abs(d[2]))
    merged = []
    for n, a, b in dims:
        if merged and merged[-1][1] == a * n and merged[-1][2] == b * n:
            merged[-1] = (merged[-1][0] * n, a, b)
        else:
            merged.append((n, a, b))
    return (src, fill, [m[0] for m in merged], [m[1] for m in merged], soff, [m[2] for m in merged], doff)


def _wide(reg, n: int) -> bool:
    """Whether merged region `reg` is made of whole runs of n consecutive elements (n a multiple of
    WORD) on both sides, starting at word boundaries."""
    src, _fill, shape, sst, soff, dst, doff = reg
    vals = list(shape) + list(sst) + list(dst) + [soff, doff]
    if not shape or not known_ints(vals):    # (a --dynamic size: scalar)
        return False
    if dst[-1] != 1 or (src >= 0 and sst[-1] != 1) or shape[-1] % n:
        return False
    return all(v % WORD == 0 for v in list(sst[:-1]) + list(dst[:-1]) + [soff, doff])


def _in_words(reg, vec: int):
    """Region `reg` counted in words, one invocation per `vec` consecutive words of its innermost dim."""
    src, fill, shape, sst, soff, dst, doff = reg
    return (src, fill, list(shape[:-1]) + [shape[-1] // (WORD * vec)],
            [int(a) // WORD for a in sst[:-1]] + [vec if src >= 0 else 0], int(soff) // WORD,
            [int(b) // WORD for b in dst[:-1]] + [vec], int(doff) // WORD)


@checked
def _check(node, graph):
    regs = node.attrs.get("regions")
    y = graph.t(node.outputs[0])
    if not regs or sum(size(r[2]) for r in regs) != y.size:
        return "regions do not cover the output"
    if any(graph.t(i).dtype != y.dtype for i in node.inputs):
        return "sources and output differ in dtype"
    return None


@register("GATHER_COPY", check=_check, dtypes=("float32", "int32"), inputs=(1, ANY_COUNT),
          summary="internal: a folded chain of data-movement ops, one dispatch (passes/movement_fold.py)")
def lower_gather_copy(node, graph):
    y, act = node.outputs[0], int(node.attrs.get("act", 0))
    regs = [_merge(r) for r in node.attrs["regions"] if size(r[2])]
    srcs = list(node.inputs)
    used = list(dict.fromkeys(r[0] for r in regs if r[0] >= 0))
    if len(used) <= MAX_SOURCES:
        return [_kernel(graph, y, [srcs[i] for i in used], [_renumber(r, used) for r in regs], node.label(), act)]
    if not any(graph.t(srcs[i]).is_const for i in used):
        k = Kernel("gather_copy", [("out_", y)] + [(f"s{j}", srcs[i]) for j, i in enumerate(used)],
                   sum(size(r[2]) for r in regs), {"ACT": act}, node.label())
        k.resolve = lambda graph, offsets, view, regs=regs, srcs=srcs, k=k: _arena_kernels(graph, k, regs, srcs,
                                                                                           offsets, view)
        return [k]
    return _grouped(graph, y, regs, srcs, used, node.label(), act)


def _grouped(graph: Graph, y: int, regs: list, srcs: list, used: list, label: str, act: int) -> list[Kernel]:
    """One dispatch per MAX_SOURCES sources (the fills go with the first)."""
    kernels, fills = [], [r for r in regs if r[0] < 0]
    for g in range(0, len(used), MAX_SOURCES):
        part = used[g:g + MAX_SOURCES]
        mine = [_renumber(r, part) for r in regs if r[0] in part] + (fills if g == 0 else [])
        kernels.append(_kernel(graph, y, [srcs[i] for i in part], mine, label, act))
    return kernels


def _renumber(reg, order):
    return (order.index(reg[0]) if reg[0] >= 0 else -1,) + tuple(reg[1:])


def _kernel(graph: Graph, y: int, sources: list, regs: list, label: str, act: int = 0) -> Kernel:
    """A gather_copy dispatch over `regs` (source numbers index `sources`, bound s0, s1, ...); act:
    the activation code of the chain's last op (a CONCATENATION's fused activation).  Wide words
    (the module docstring) where every region allows them."""
    regs = sorted(regs, key=lambda r: r[6])
    vec = next((v for v in words() if all(_wide(r, WORD * v) for r in regs)), 0)
    if vec:
        regs = [_in_words(r, vec) for r in regs]
    rank = max([len(r[2]) for r in regs] + [1])
    pad = [(s, f, [1] * (rank - len(sh)) + list(sh), [0] * (rank - len(sh)) + list(a), so,
            [0] * (rank - len(sh)) + list(b), do) for s, f, sh, a, so, b, do in regs]
    starts = np.cumsum([0] + [size(r[2]) for r in pad])[:-1]
    defines = dict(VEC=vec, NSRC=max(1, len(sources)), NREG=len(pad), RANK=rank, ACT=act,
                   IS_INT=int(graph.t(y).dtype.startswith("int")), TABLE=int(len(pad) > CONST_REGIONS))
    binds = [("out_", y)] + [(f"s{j}", t) for j, t in enumerate(sources)]
    if defines["TABLE"]:
        rows = [[int(st), s, int(np.array([f], np.uint32).view(np.int32)[0]), so, do]
                + list(sh) + list(a) + list(b) for st, (s, f, sh, a, so, b, do) in zip(starts, pad)]
        tab = np.asarray(rows, dtype=np.int64)
        if np.abs(tab).max() >= 1 << 31:
            raise ValueError(f"{label}: index beyond int32")
        defines["REG_WORDS"] = tab.shape[1]
        binds.append(("tab", graph.add_const(f"{label}/regions", tab.astype(np.int32).reshape(-1))))
    else:
        defines.update(R_START=[int(s) for s in starts], R_SRC=[r[0] for r in pad],
                       R_FILL="uint[](" + ", ".join(f"{int(r[1])}u" for r in pad) + ")",
                       R_SOFF=[r[4] for r in pad], R_DOFF=[r[6] for r in pad],
                       R_SHAPE=[v for r in pad for v in r[2]], R_SST=[v for r in pad for v in r[3]],
                       R_DST=[v for r in pad for v in r[5]])
    return Kernel("gather_copy", binds, int(sum(size(r[2]) for r in pad)), defines, label,
                  vec4=tuple(n for n, _ in binds if n != "tab") if vec else ())


def _arena_kernels(graph: Graph, k: Kernel, regs: list, srcs: list, offsets: dict, view) -> list[Kernel]:
    """The dispatch of a many-source kernel once the arena is planned: each source read through the
    whole-arena view of its storage dtype, at its arena offset (view returns None for an arena larger
    than every Vulkan device can bind: then one dispatch per MAX_SOURCES sources)."""
    if view("float32") is None:
        used = list(dict.fromkeys(r[0] for r in regs if r[0] >= 0))
        ks = _grouped(graph, k.bindings[0][1], regs, srcs, used, k.label, k.defines["ACT"])
        ks[0].flops = k.flops
        return ks
    views, out = [], []
    for s, f, sh, a, so, b, do in regs:
        if s < 0:
            out.append((s, f, sh, a, so, b, do))
            continue
        t = graph.storage(srcs[s])
        v = view(graph.t(srcs[s]).dtype)
        if v not in views:
            views.append(v)
        item = np.dtype(graph.t(srcs[s]).dtype).itemsize
        out.append((views.index(v), f, sh, a, so + offsets[t] // item, b, do))
    kr = _kernel(graph, k.bindings[0][1], views, out, k.label, k.defines["ACT"])
    kr.flops = k.flops
    return [kr]


def resolve_arena(graph: Graph, program: list, offsets: dict, arena_bytes: int) -> tuple[list, list]:
    """Finish the kernels that read the arena whole (see the module docstring): (program, tensors the
    finished kernels add: whole-arena views and region tables).  Sets each view's offset (0) and size."""
    views: dict = {}

    def view(dtype):
        if arena_bytes > MAX_VIEW_BYTES:
            return None
        if dtype not in views:
            item = np.dtype(dtype).itemsize
            views[dtype] = graph.add_tensor(f"{ARENA_VIEW}:{dtype}", (arena_bytes // item,), dtype)
            offsets[views[dtype]] = 0
        return views[dtype]
    out, added = [], []
    for k in program:
        if k.kind == GPU and k.resolve is not None:
            ks = k.resolve(graph, offsets, view)
            added += [t for kr in ks for _, t in kr.bindings[1:]]
            out += ks
            continue
        out.append(k)
    return out, list(dict.fromkeys(added))


# --- facts (compiler/ops/__init__.py FACT_FIELDS) ---------------------------------------------------
_MADE = Why("an internal op passes/movement_fold.py makes after shapes are propagated and the graph batched")
declare("GATHER_COPY", shape=_MADE, exact=_MADE, sym_shape=_MADE, batch=_MADE, pieces=Why("made by movement folding itself"),
        fp16=NEUTRAL, in_place=False, templates=("gather_copy", "fill"), flops=rules.per_output,
        cpu=Why("internal op: no CPU kernel (the unfolded ops have theirs)"))
template("gather_copy", item_major=False, flat=True)
