"""Reductions (MEAN SUM REDUCE_MAX REDUCE_MIN REDUCE_PROD) and SOFTMAX.

Long reductions (RCOUNT >= WG_MIN elements per output; SOFTMAX rows of >= 64) use one workgroup per
output / row.  Those kernels carry a `subgroup` variant (runtime/variants.py) that combines through
GL_KHR_shader_subgroup_arithmetic first: the runtime picks it on a device reporting subgroup
arithmetic for compute shaders, else the shared-memory tree runs.  Design: the workgroup size stays
the compile-time one (64 / 128 / 256: a multiple of every power-of-two subgroup size up to it, and a
subgroup larger than the workgroup is simply partly filled); the shader reads gl_SubgroupID and
gl_NumSubgroups, so one SPIR-V module serves every subgroup size and nothing needs choosing per
device at load beyond "has subgroup arithmetic".  Results differ from the tree only by the order of
fp32 additions (max / min: not at all)."""
from __future__ import annotations

import numpy as np

import dataclasses

from gpuc.compiler.codegen.kernel import Kernel, KernelVariant
from gpuc.compiler.ops import BOUNDED, INTEGER, NEUTRAL, SHAPE_ONLY, UNSAFE, Why, declare, register, rules, template
from gpuc.compiler.ops.util import checked, const_input, known_ints, norm_axis, size, strides
from gpuc.compiler.sym_scope import hinted

REDUCE = {"MEAN": 0, "SUM": 1, "REDUCE_MAX": 2, "REDUCE_MIN": 3, "REDUCE_PROD": 4}
WG_MIN = 256                 # reduced elements per output from which a workgroup reduces each output
# Longer reductions than PART_MAX elements an output (a SUM, MEAN or PROD) run in two dispatches: PARTS workgroups an
# output each reduce PART_MAX consecutive elements into float32 partials, then a second reduce combines the parts
# (a MEAN dividing by the whole count).  Without it one workgroup looped over every element of an output, and
# lavapipe's llvmpipe ends a shader's loops after 65,535 passes in all (LP_MAX_TGSI_LOOP_ITERATIONS) and runs on: a
# SUM of 2^25 ones gave 1,048,528.  It also spreads a long reduction over the GPU instead of one workgroup.
# REDUCE_MAX / MIN keep one pass: LiteRT's NaN order (R_NANFOLD below) does not split.
PART_MAX = 1 << 18


def _subgroup_kernel(k):
    return dataclasses.replace(k, defines=dict(k.defines, SUBGROUP=1), variants=[])


SUBGROUP_VARIANT = KernelVariant("subgroup", {"subgroup_arithmetic": True}, _subgroup_kernel)

# The column layout (shaders/reduce.comp COLS) of a sum or mean whose innermost kept axis is the input's
# innermost one (NHWC global pools, squeeze-excite blocks): a workgroup of COLS_LOCAL invocations reduces
# COLS_W consecutive outputs, every subgroup reading consecutive elements.  The other layouts stride C apart
# (one workgroup or invocation per output): on the H100 a batch-32 fp16 mean of [32, 28, 28, 120] over H, W
# took 22 us, 0.3 TB/s.  A `measured` candidate (runtime/tuning.py times it at first load).
COLS_LOCAL = 256


def _cols_fits(d: dict) -> bool:
    """Whether a reduce kernel with defines `d` has the column layout: a sum or mean whose innermost kept axis
    is the input's innermost one."""
    return d["OP"] in (0, 1) and d["K_STRIDES"][-1] == 1


def _cols_kernel(k):
    d = k.defines
    shape = d["K_SHAPE"]
    if not _cols_fits(d) or not all(isinstance(v, int) for v in shape + [d["RCOUNT"]]):
        return None
    inner = shape[-1]
    w = 32 if inner >= 32 else 16 if inner >= 16 else 8
    outputs = size(shape)
    defines = dict(d, WG_PER_OUT=0, SUBGROUP=0, COLS=1, COLS_W=w, OUTPUTS=outputs)
    return dataclasses.replace(k, defines=defines, invocations=-(-outputs // w) * COLS_LOCAL, local_x=COLS_LOCAL,
                               variants=[], item_inner=0)


COLS_VARIANT = KernelVariant("cols", {}, _cols_kernel, measured=True)

# The same sums with 4 outputs per invocation (shaders/reduce.comp COLS4): where the innermost kept axis is a
# multiple of 4 long and x is read directly (no prologue), each load is a 4-vector of consecutive channels and a
# workgroup takes 4 * C4_GROUPS outputs, C4_GROUPS groups of COLS_LOCAL / C4_GROUPS slices -- twice the workgroups
# of the column layout's 32 outputs.  On the H100 a batch-32 fp16 squeeze-excite mean of [32, 56, 56, 256] over H,
# W took 71 us in the column layout (0.7 TB/s, 2026-11-28); forced, this form took it 76.7 -> 46.2 us and
# [32, 112, 112, 96] 244 -> 70, [32, 14, 14, 1024] 13.1 -> 15.1 (session 19).  A `measured` candidate too.
C4_GROUPS = 4


def _cols4_fits(d: dict) -> bool:
    vals = list(d["K_SHAPE"]) + list(d["K_STRIDES"]) + list(d["R_SHAPE"]) + list(d["R_STRIDES"]) + [d["RCOUNT"]]
    return (_cols_fits(d) and not d.get("PROLOGUE") and known_ints(vals)
            and d["K_SHAPE"][-1] % 4 == 0 and all(v % 4 == 0 for v in list(d["K_STRIDES"])[:-1] + list(d["R_STRIDES"])))


def _cols4_kernel(k):
    d = k.defines
    if not _cols4_fits(d):
        return None
    outputs = size(d["K_SHAPE"])
    defines = dict(d, WG_PER_OUT=0, SUBGROUP=0, COLS=0, COLS4=1, C4_GROUPS=C4_GROUPS, OUTPUTS=outputs)
    return dataclasses.replace(k, defines=defines, invocations=-(-outputs // (4 * C4_GROUPS)) * COLS_LOCAL,
                               local_x=COLS_LOCAL, variants=[], item_inner=0, vec4=("x",))


COLS4_VARIANT = KernelVariant("cols4", {}, _cols4_kernel, measured=True)


def reduce_axes(node, graph):
    x = graph.t(node.inputs[0])
    axes = const_input(node, graph, 1, "reduction axes")
    if axes is None:
        raise ValueError("missing reduction axes input")
    return sorted({norm_axis(int(a), len(x.shape)) for a in np.asarray(axes).reshape(-1)})


@checked
def _check_reduce(node, graph):
    x, y = graph.t(node.inputs[0]), graph.t(node.outputs[0])
    axes = reduce_axes(node, graph)
    kept = [d for i, d in enumerate(x.shape) if i not in axes]
    if size(kept) != y.size:
        return f"output {list(y.shape)} does not match reducing {list(x.shape)} over {axes}"
    if x.size == 0:
        return "empty input"
    return None


@register(*REDUCE, check=_check_reduce, inputs=(2, 2), summary="any axes, keep_dims")
def lower_reduce(node, graph):
    x, y = graph.t(node.inputs[0]), graph.t(node.outputs[0])
    axes = reduce_axes(node, graph)
    st = strides(x.shape)
    keep = [i for i in range(len(x.shape)) if i not in axes]
    defines = dict(OP=REDUCE[node.op],
                   NK=len(keep), K_SHAPE=[x.shape[i] for i in keep] or [1], K_STRIDES=[st[i] for i in keep] or [0],
                   NR=len(axes), R_SHAPE=[x.shape[i] for i in axes] or [1], R_STRIDES=[st[i] for i in axes] or [0],
                   RCOUNT=size([x.shape[i] for i in axes]))
    binds = [("out_", y.id), ("x", x.id)]
    with hinted():                      # (speed only: a dynamic count decides at its bound)
        short = defines["RCOUNT"] < WG_MIN
        local = 256 if defines["RCOUNT"] >= 4096 else 128 if defines["RCOUNT"] >= 1024 else 64
    cols = [COLS_VARIANT] if _cols_fits(defines) and len(x.shape) > 1 else []
    if cols and _cols4_fits(defines):
        cols.append(COLS4_VARIANT)
    if short:
        return [Kernel("reduce", binds, y.size, dict(defines, WG_PER_OUT=0), node.label(), variants=cols)]
    if known_ints([defines["RCOUNT"], y.size]) and defines["RCOUNT"] > PART_MAX and node.op in ("SUM", "MEAN",
                                                                                                  "REDUCE_PROD"):
        return _in_parts(node, graph, defines, binds, y)
    k = Kernel("reduce", binds, y.size * local, dict(defines, WG_PER_OUT=1), node.label(), local_x=local)
    k.variants += [SUBGROUP_VARIANT] + cols
    return [k]


def _in_parts(node, graph, defines: dict, binds: list, y) -> list:
    """A SUM / MEAN / PROD of more than PART_MAX elements an output as two reduce dispatches: PARTS workgroups an
    output reduce PART_MAX elements each into float32 partials [outputs, PARTS] (a MEAN's as sums), then a second
    reduce combines each output's partials (a MEAN divides by the whole count, DIVISOR)."""
    count, outputs = defines["RCOUNT"], y.size
    parts = -(-count // PART_MAX)
    partial = graph.add_fp32_scratch(f"{y.name}/parts{parts}", (outputs * parts,))
    first = Kernel("reduce", [("out_", partial)] + binds[1:], outputs * parts * 256,
                   dict(defines, OP=REDUCE["SUM"] if node.op == "MEAN" else defines["OP"], WG_PER_OUT=1, PARTS=parts,
                        PART=PART_MAX), f"{node.label()}: {parts} parts", local_x=256)
    first.variants.append(SUBGROUP_VARIANT)
    wide = parts >= WG_MIN
    second_d = dict(OP=defines["OP"], NK=1, K_SHAPE=[outputs], K_STRIDES=[parts], NR=1, R_SHAPE=[parts],
                    R_STRIDES=[1], RCOUNT=parts, DIVISOR=count, WG_PER_OUT=int(wide))
    second = Kernel("reduce", [("out_", y.id), ("x", partial)], outputs * (64 if wide else 1), second_d,
                    node.label(), local_x=64)
    if wide:
        second.variants.append(SUBGROUP_VARIANT)
    return [first, second]


def softmax_axis(node, graph) -> int:
    """The axis a SOFTMAX normalizes: the last, as TFLite's; passes/softmax_chain.py records another one
    (attrs["axis"]) for a softmax a converter wrote out over a middle axis."""
    rank = len(graph.t(node.inputs[0]).shape)
    return int(node.attrs.get("axis", -1)) % max(rank, 1)


@checked
def _check_softmax(node, graph):
    x = graph.t(node.inputs[0])
    if not x.shape or x.shape[softmax_axis(node, graph)] < 1:
        return "input must have a non-empty softmax axis"
    return None


@register("SOFTMAX", check=_check_softmax, inputs=(1, 1), summary="last axis (or a written-out softmax's axis), beta")
def lower_softmax(node, graph):
    x, y = graph.t(node.inputs[0]), graph.t(node.outputs[0])
    a = softmax_axis(node, graph)
    d = x.shape[a]
    inner = size(x.shape[a + 1:])
    rows = x.size // d
    with hinted():                                   # (speed only: a dynamic row length decides at its bound)
        wide = d >= 64                               # long rows: one workgroup per row
        local = 128 if d >= 512 else 64
    defines = dict(D=d, BETA=float(node.attrs.get("beta", 1.0)), ROW_PER_GROUP=int(wide), INNER=inner)
    k = Kernel("softmax", [("out_", y.id), ("x", x.id)], rows * local if wide else rows, defines,
               node.label(), local_x=local if wide else 64)
    if wide:
        k.variants.append(SUBGROUP_VARIANT)
    return [k]


# --- facts (compiler/ops/__init__.py FACT_FIELDS) ---------------------------------------------------
_NUMPY = {"SUM": np.sum, "REDUCE_PROD": np.prod, "REDUCE_MAX": np.max, "REDUCE_MIN": np.min, "MEAN": None}
for _op, _fn in _NUMPY.items():
    declare(_op, shape=rules.reduce(_fn), exact=SHAPE_ONLY if _fn is None else INTEGER, sym_shape="reduce",
            batch=("axis_input", 1, "axes", 0, True), pieces=Why("computes values"),
            fp16=UNSAFE if _op in ("SUM", "REDUCE_PROD") else NEUTRAL, in_place=False, templates=("reduce",),
            flops=lambda node, graph: graph.t(node.inputs[0]).size, cpu=_op)
declare("SOFTMAX", shape=rules.same_shape, exact=SHAPE_ONLY, sym_shape="same", batch="softmax",
        pieces=Why("computes values"), fp16=BOUNDED, in_place=False, templates=("softmax",), flops=rules.per_output,
        cpu=Why("no CPU kernel: the GPU runs every float SOFTMAX"))
template("reduce", item_major=False, flat=False)
template("softmax", item_major=True, flat=False)
