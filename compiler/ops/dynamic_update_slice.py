"""DYNAMIC_UPDATE_SLICE (shaders/dynamic_update_slice.comp): out = operand with `update` written at
`start_indices`, each start clamped to [0, operand dim - update dim] as LiteRT's kernel clamps it.

When the output lives in the operand's bytes (a KV cache threaded through a signature as state:
compiler/signatures.py aliases the output to the operand) the kernel writes the update in place and
nothing else moves; otherwise a copy of the operand into the output is dispatched first.
Data: 4-byte (float32, int32), float16 storage and int64 (as word pairs); start indices int32 or
int64, constant or computed at run time.
"""
from __future__ import annotations

import numpy as np

from gpuc.compiler.codegen.kernel import Kernel
from gpuc.compiler.ops import NEUTRAL, SHAPE_ONLY, Why, declare, register, rules, template
from gpuc.compiler.ops.math import words
from gpuc.compiler.ops.shape import copy_kernel
from gpuc.compiler.ops.util import checked, size, strides

DTYPES = ("float32", "int32", "float16", "int64")

VARIANTS = {
    "dynamic_update_slice": (dict(RANK=3, UPD_SHAPE=[1, 2, 4], OUT_STRIDES=[32, 4, 1], MAX_START=[0, 6, 0],
                                  NSTART=3), {"IDX64": [0, 1]}, ["out_", "upd", "start"], {"start": "int32"}),
    "dynamic_update_slice:src": (dict(RANK=3, UPD_SHAPE=[1, 2, 4], OUT_STRIDES=[32, 4, 1], MAX_START=[0, 6, 0],
                                      NSTART=3, UPD_ROW=4, UPD_W=12, UPD_BEGIN=8), {}, ["out_", "upd", "start"],
                                 {"start": "int32"}),
}


class _Update:
    """The update as the kernel reads it: tensor `src`, or (attrs upd_src = (row, w, begin), made by
    ops/kv_write.py) element f of an update of shape upd_shape at src[(f // row) * w + begin + f % row]."""

    def __init__(self, node, graph):
        t = graph.t(node.inputs[1])
        self.id, self.dtype, self.name = t.id, t.dtype, t.name
        self.src = node.attrs.get("upd_src")
        self.shape = tuple(node.attrs["upd_shape"]) if self.src else tuple(t.shape)
        self.size = size(list(self.shape)) if self.shape else 1
        if self.src:
            row, w, begin = self.src
            if row < 1 or begin < 0 or begin + row > w or self.size % row or t.size != self.size // row * w:
                raise ValueError(f"update of {list(self.shape)} read from {t.name!r} {list(t.shape)} at "
                                 f"(row {row}, width {w}, begin {begin}) does not fit")


def _plan(node, graph):
    x, s = graph.t(node.inputs[0]), graph.t(node.inputs[2])
    u = _Update(node, graph)
    y = graph.t(node.outputs[0])
    if x.dtype != y.dtype or u.dtype != y.dtype:
        raise ValueError(f"operand {x.dtype}, update {u.dtype} and output {y.dtype} must have one dtype")
    if y.dtype not in DTYPES:
        raise ValueError(f"dtype {y.dtype} not supported (supported: {', '.join(DTYPES)})")
    if tuple(x.shape) != tuple(y.shape):
        raise ValueError(f"output {list(y.shape)} differs from the operand {list(x.shape)}")
    if not x.shape:
        raise ValueError("a rank-0 operand has nothing to update")
    if len(u.shape) != len(x.shape):
        raise ValueError(f"update rank {len(u.shape)} differs from the operand rank {len(x.shape)}")
    if any(ud > xd for ud, xd in zip(u.shape, x.shape)):
        raise ValueError(f"update {list(u.shape)} is larger than the operand {list(x.shape)}")
    if s.dtype not in ("int32", "int64") or len(s.shape) != 1 or s.shape[0] != len(x.shape):
        raise ValueError(f"start_indices must be a 1-D int32/int64 of {len(x.shape)} values "
                         f"(got {s.dtype} {list(s.shape)})")
    return x, u, s, y


def _start(graph, s) -> tuple[int, int]:
    """(tensor to bind as int32 starts, IDX64)."""
    if s.is_const:          # clamp at compile time as the kernel would: the constant becomes int32
        v = np.asarray(s.data, np.int64).reshape(-1)
        return graph.add_const(f"{s.name}/int32", np.clip(v, -1, 1 << 30).astype(np.int32)), 0
    if s.dtype == "int64":
        view = graph.add_tensor(f"{s.name}/int32_pairs", [2 * s.size], "int32")
        graph.aliases[view] = s.id
        return view, 1
    return s.id, 0


def in_place(graph, node) -> bool:
    """True when the output lives in the operand's bytes (the update is then all that is written)."""
    return graph.storage(node.outputs[0]) == graph.storage(node.inputs[0])


@register("DYNAMIC_UPDATE_SLICE", check=checked(lambda n, g: _plan(n, g) and None), dtypes=DTYPES, inputs=(3, 3),
          summary="start indices clamped as LiteRT's; in place where the output takes the operand's bytes "
                  "(a KV cache threaded as state), else a copy first")
def lower_dynamic_update_slice(node, graph):
    x, u, s, y = _plan(node, graph)
    kernels = []
    pair = np.dtype(y.dtype).itemsize == 8
    if not in_place(graph, node) and y.size:
        src, dst = words(graph, x.id), words(graph, y.id)     # whole words (float16, int64 too)
        n = graph.t(src).size
        kernels.append(copy_kernel(src, dst, [n], [1], [1], label=f"{node.label()}: operand copy"))
    if u.size == 0:
        return kernels
    start, is64 = _start(graph, s)
    shape, ostr = list(u.shape) or [1], strides(x.shape) or [1]
    max_start = [int(a - b) for a, b in zip(x.shape, u.shape)] or [0]
    out, upd = y.id, u.id
    if u.src and pair:
        raise ValueError("an update read from a wider source takes 4-byte elements")
    if u.src:
        d_src = dict(UPD_ROW=int(u.src[0]), UPD_W=int(u.src[1]), UPD_BEGIN=int(u.src[2]))
    else:
        d_src = {}
    if pair:                # int64: (low, high) words, a last dim of 2 without a start
        out, upd = words(graph, y.id), words(graph, u.id)
        shape, ostr, max_start = shape + [2], [2 * v for v in ostr] + [1], max_start + [0]
    d = dict(RANK=len(shape), UPD_SHAPE=shape, OUT_STRIDES=ostr, MAX_START=max_start, NSTART=max(len(x.shape), 1),
             IDX64=is64, **d_src)
    kernels.append(Kernel("dynamic_update_slice", [("out_", out), ("upd", upd), ("start", start)],
                          size(shape), d, node.label()))
    return kernels


# --- facts (compiler/ops/__init__.py FACT_FIELDS) ---------------------------------------------------
declare("DYNAMIC_UPDATE_SLICE", shape=rules.same_shape, exact=SHAPE_ONLY, sym_shape=Why("no dynamic-size rule yet"),
        batch=Why("no batch rule yet: its start indices address the whole operand"),
        pieces=Why("writes a runtime-addressed window"), fp16=NEUTRAL,
        in_place=False, templates=("dynamic_update_slice", "copy_nd"), flops=rules.per_output,
        cpu=Why("no CPU kernel: the GPU takes every dtype gpuc runs it in"))
declare("DYNAMIC_UPDATE_SLICE", updates_in_place=True)    # (compiler/signatures.py: KV-cache state)
template("dynamic_update_slice", item_major=False, flat=False)
