"""Native int8 CONV_2D / DEPTHWISE_CONV_2D / FULLY_CONNECTED (shaders/int8_conv.comp): int32 accumulation
of int8 weights (stored as int8) and int8 activations, int32 bias, per-channel (or per-tensor) fixed-point
requantization exactly as LiteRT's builtin x86 kernels compute it (ops/int8_common.py), output zero point
and fused activation clamp.  passes/quant.py native_int8 makes these ops from the TFLite ones.

Kernels: where CIN and COUT are multiples of 4 (not depthwise) and the output fills at least 8 tiles of
64 x 64, the implicit GEMM of shaders/int8_conv_tiled.comp (64 pixels x 64 channels per workgroup, packed
int8 words staged in shared memory, a 4 x 4 register block per invocation; the layer's geometry leads
the qp constant, so one shader module serves every layer), with two variants chosen at load
(runtime/variants.py): `coopmat_int8` (s8 x s8 -> s32 16 x 16 x 32 cooperative matrices, subgroups of
32) and `int_dot` (SPIR-V's packed OpSDot, VK_KHR_shader_integer_dot_product).  An RGB stem conv (CIN
% 4 != 0) of that size gets its input channels padded to 4 with the zero point (an INT8_PAD) and its
filter's with zeros (WIDEN).  Otherwise the flat kernel of shaders/int8_conv.comp: one invocation per
output word (4 int8 outputs), a plain int32 loop; where the input depth is a multiple of 4 the channel
loop reads whole words (4 lanes) and sums 4-lane dot products (DOT4), and where the output depth is
too, an invocation computes one pixel's 4 channels from one read of each input word (OC4), with the
same `int_dot` variant.

Measured candidates (runtime/tuning.py: the device times them at first load, keeps the fastest): the
cooperative-matrix plans CM_PLANS (shaders/int8_conv_cm.comp: 128 x 128 / 128 x 64 / 64 x 128 / 64 x 64 /
32 x 64 tiles, 64-int8 double-buffered K steps, 16-byte staging; where the grid has CM_MIN_GROUPS workgroups)
beside coopmat_int8; for the flat kernel's layers with OC4 (a classifier at a small batch, small
convolutions: their qp carries the tiled kernels' geometry head too) the tiled coopmat_int8 kernel, those
plans, and for plain-GEMM layers (FC, 1x1 stride-1) the split-K kernel of shaders/int8_fc_splitk.comp.
Epilogue (int8_conv_geo.glsl): each invocation finishes whole packed words of 4 channels of a pixel, those
channels' requantization parameters loaded once (q8_cols), not per element.

Residual ADDs (_fuse_residual_adds, a FOLDS step of native_int8): an int8 ADD of a tiled conv's output
(its only use) and a residual of the same shape ready before the conv runs in the conv's epilogue
(int8_conv_geo.glsl q8_store_cols): the conv's requantized int8 value and the residual rescaled and summed
exactly as LiteRT's int8 ADD (int8_eltwise.add_params), written in place of the residual where it dies; the
two inputs' rescalings depend on one byte each, so they are 256-entry tables in shared memory (filled by
the workgroup with the same fixed-point code), and each invocation reads its residual words up front.
"""
from __future__ import annotations

import numpy as np

import dataclasses

from gpuc.compiler.codegen.kernel import Kernel, KernelVariant
from gpuc.compiler.ops import register, template
from gpuc.compiler.ops.int8_facts import declare_int8
from gpuc.compiler.ops.conv import window
from gpuc.compiler.ops.int8_common import (WIDEN, RQ_RUY, RQ_UPWARD, act_range, f32, int8_activation, native_form, per_tensor,
                                           quantize_multiplier, scale_zp)
from gpuc.compiler.ops.math import words
from gpuc.compiler.ops.util import checked, fused_act
from gpuc.compiler.options import current

from gpuc.compiler.ops.int8_common import ADD, CONV, DEPTHWISE, FC, FOLDS, PAD  # noqa: E402 (the int8 op names)
from gpuc.compiler.ops.int8_eltwise import ADD_FIELDS  # noqa: E402
from gpuc.compiler.codegen.shared_memory import PORTABLE_SMEM
_DW = {DEPTHWISE, "DEPTHWISE_CONV_2D"}
_FC = {FC, "FULLY_CONNECTED"}


def _filter(node, graph):
    if len(node.inputs) < 2 or node.inputs[1] < 0:
        raise ValueError("missing filter input")
    f = graph.t(node.inputs[1])
    if not f.is_const or f.dtype != "int8" or f.quant is None or not f.quant.scale.size:
        raise ValueError(f"filter {f.name!r} must be a constant int8 tensor with scales")
    if f.quant.zero_point.size and np.any(f.quant.zero_point != 0):
        raise ValueError(f"filter {f.name!r} has nonzero zero points (LiteRT's int8 kernels take symmetric filters)")
    return f


def _own_out(node, graph):
    """The conv's own output tensor: its output, or where a residual ADD is fused (_fuse_residual_adds)
    the tensor the conv produced before, whose grid its requantization keeps."""
    return graph.t(node.attrs.get(MID, node.outputs[0]))


def _plan(node, graph) -> tuple[dict, object, int]:
    """(defines without the requantization ones, filter tensor, output channels)."""
    x, y = graph.t(node.inputs[0]), _own_out(node, graph)
    if not (int8_activation(graph, x.id) and int8_activation(graph, y.id)):
        raise ValueError("input and output must be per-tensor quantized int8")
    f = _filter(node, graph)
    act = fused_act(node)
    if act not in (0, 1, 2, 3):
        raise ValueError(f"fused activation {act} not supported")
    if node.op in _FC:
        if len(f.shape) != 2 or int(node.attrs.get("weights_format", 0)) != 0:
            raise ValueError(f"weights {f.name!r} must be 2-D in the default format")
        co, k = f.shape
        if x.size % k or y.size != x.size // k * co:
            raise ValueError(f"input {list(x.shape)} and output {list(y.shape)} do not fit weights {list(f.shape)}")
        geo = dict(N=x.size // k, H=1, W=1, OH=1, OW=1, SH=1, SW=1, DH=1, DW=1, PT=0, PL=0)
        d = dict(geo, CIN=k, COUT=co, KH=1, KW=1, DM=1, DEPTHWISE=0)
    else:
        if len(f.shape) != 4:
            raise ValueError(f"filter {f.name!r} must be 4-D")
        geo, ci, co = window(node, graph, f.shape[1], f.shape[2])
        dw = node.op in _DW
        if dw and (f.shape[0] != 1 or f.shape[3] != co or co % ci):
            raise ValueError(f"depthwise filter {list(f.shape)} does not fit input channels {ci} -> {co}")
        if not dw and (f.shape[0] != co or f.shape[3] != ci):
            raise ValueError(f"filter {list(f.shape)} does not fit input channels {ci} -> {co} (grouped: not in int8)")
        d = dict(geo, CIN=ci, COUT=co, KH=int(f.shape[1]), KW=int(f.shape[2]), DM=co // ci if dw else 1,
                 DEPTHWISE=int(dw))
    if f.quant.scale.size not in (1, co):
        raise ValueError(f"filter {f.name!r} has {f.quant.scale.size} scales for {co} channels")
    if node.op not in _FC and (len(node.inputs) < 3 or node.inputs[2] < 0):
        raise ValueError("an int8 convolution needs a bias (LiteRT's kernel requires one)")
    if len(node.inputs) > 2 and node.inputs[2] >= 0:
        b = graph.t(node.inputs[2])
        if not b.is_const or b.dtype != "int32" or b.size != co:
            raise ValueError(f"bias {b.name!r} must be a constant int32 of {co} values")
    return d, f, co


def _params(node, graph, f, co, vec4: bool) -> np.ndarray:
    """int32 [4, co]: bias, multiplier, shift, sum of each output channel's weights (VEC4)."""
    x, y = graph.t(node.inputs[0]), _own_out(node, graph)
    sx, _ = scale_zp(x)
    sy, _ = scale_zp(y)
    scales = np.broadcast_to(f.quant.scale.astype(np.float32), (co,))
    qp = np.zeros((4, co), np.int64)
    if len(node.inputs) > 2 and node.inputs[2] >= 0:
        qp[0] = np.asarray(graph.t(node.inputs[2]).data, np.int64).reshape(-1)
    for c in range(co):
        if node.op in _FC and f.quant.scale.size == 1:
            # FULLY_CONNECTED per-tensor: GetQuantizedConvolutionMultipler (the scale product in float)
            real = f32(np.float32(sx) * np.float32(scales[c])) / sy
        else:
            real = sx * float(scales[c]) / sy
        qp[1, c], qp[2, c] = quantize_multiplier(real)
    if vec4:
        w = np.asarray(f.data, np.int64).reshape(co, -1)
        qp[3] = w.sum(axis=1)
    return qp.astype(np.int32)


@checked
def _check(node, graph):
    _plan(node, graph)
    return None


@register(CONV, DEPTHWISE, FC, check=_check, dtypes=("int8",), inputs=(2, 3), optional=(2,), quantized_io=True,
          summary="internal: native int8 conv / depthwise / fully connected (passes/quant.py native_int8)")
def lower_int8_conv(node, graph):
    d, f, co = _plan(node, graph)
    x, y = graph.t(node.inputs[0]), _own_out(node, graph)
    _, zx = scale_zp(x)
    _, zy = scale_zp(y)
    vec4 = not d["DEPTHWISE"] and d["CIN"] % 4 == 0
    qp = _params(node, graph, f, co, vec4)
    lo, hi = act_range(fused_act(node), y)
    xz = (zx & 0xFF) * 0x01010101
    d.update(VEC4=int(vec4), OC4=int(vec4 and co % 4 == 0), IN_OFF=-zx, OUT_ZP=zy, ACT_MIN=lo, ACT_MAX=hi, NOUT=y.size,
             RQ_MODE=RQ_UPWARD if d["DEPTHWISE"] else RQ_RUY, RQ_SPLIT=co // 8 * 8,
             XZ_WORD=int(np.uint32(xz).view(np.int32)))
    taps = d["KH"] * d["KW"] * (1 if d["DEPTHWISE"] else d["CIN"])
    gm = y.size // co
    res = node.epilogue.residual
    tiled = _tiled(d, y.size, res is not None)
    if res is not None and not tiled:
        raise ValueError(f"{node.label()}: a fused residual ADD needs the tiled kernel")
    if d["OC4"]:    # the layer's geometry leads qp (int8_conv_geo.glsl G_*): one tiled module for all layers
        g = dict(d, CW=d["CIN"] // 4, GM=gm, KWORDS=taps // 4, TILES_N=-(-co // TILE["BN"]))
        ra = node.attrs.get(RES_ADD) or dict.fromkeys(ADD_FIELDS, 0)
        head = [g[k] for k in GEOMETRY] + [ra[k] for k in ADD_FIELDS]
        head = np.array(head + [0] * (QP0 - len(head)), np.int64)
        qp = np.concatenate([head, qp.reshape(-1).astype(np.int64)]).astype(np.int32)
    qpt = graph.add_const(f"{y.name}#int8_qp", qp)
    binds = [("out_", words(graph, node.outputs[0])), ("x", words(graph, x.id)), ("w", words(graph, f.id)), ("qp", qpt)]
    if res is not None:
        binds.append(("res", words(graph, res)))
    if tiled:
        k = Kernel("int8_conv_tiled", binds, -(-gm // TILE["BM"]) * g["TILES_N"] * TILE_LOCAL,
                   dict(TILE, RQ_MODE=RQ_RUY, VEC4=1, DEPTHWISE=0, RESIDUAL=int(res is not None)), node.label(), local_x=TILE_LOCAL,
                   flops=2 * y.size * taps, item_inner=0)
        k.variants += [COOPMAT_EMU_VARIANT if emulate() else COOPMAT_VARIANT] + cm_variants(gm, co, d["CIN"] // 4)
    else:
        k = Kernel("int8_conv", binds, -(-y.size // 4), dict(d, QP0=QP0 if d["OC4"] else 0), node.label(),
                   flops=2 * y.size * taps)
    if vec4:
        k.variants.append(DOT_VARIANT)
    if d["OC4"] and not tiled:      # (its qp has the tiled kernels' head: they are candidates)
        k.variants += [_tiled_candidate(gm, co, taps), *cm_variants(gm, co, d["CIN"] // 4), *_splitk_candidate(d, gm, co)]
    if emulate():                   # (tests: the EMU forms first)
        k.variants.sort(key=lambda v: not v.name.endswith("_emu"))
    return [k]


def _tiled_candidate(gm: int, co: int, taps: int) -> KernelVariant:
    """The 64 x 64 cooperative-matrix tiled kernel for a layer the flat kernel takes (a fully connected layer at
    a small batch, a small convolution), as a `measured` candidate."""
    def make(k):
        return dataclasses.replace(k, template="int8_conv_tiled", invocations=-(-gm // TILE["BM"]) * -(-co // TILE["BN"])
                                   * TILE_LOCAL, local_x=TILE_LOCAL, variants=[], item_inner=0,
                                   defines=dict(TILE, RQ_MODE=RQ_RUY, VEC4=1, DEPTHWISE=0, RESIDUAL=0, COOPMAT=1,
                                                BK=TILE_CM_BK))
    return KernelVariant("coopmat_int8_tiled", COOPMAT_VARIANT.requires, make, measured=measured())


# the implicit-GEMM kernel (shaders/int8_conv_tiled.comp) takes convolutions / fully connected layers with
# CIN and COUT multiples of 4 (OC4) and outputs for at least 8 tiles' workgroups; smaller ones keep the flat
# kernel, one invocation per output word, which spreads a small layer over more of the GPU
TILE = dict(BM=64, BN=64, BK=8)                 # (each invocation: a 4 x 4 block of pixels x channels)
TILE_CM_BK = 16         # the cooperative-matrix form's K step in words: two 32-int8 products a subgroup per barrier
TILE_LOCAL = (TILE["BM"] // 4) * (TILE["BN"] // 4)
TILED_MIN_OUTPUTS = 8 * TILE["BM"] * TILE["BN"]
# qp's leading ints for the tiled kernel, in its G_* order, then a fused residual ADD's ADD_FIELDS (G_R_*)
GEOMETRY = ("N", "H", "W", "CW", "OH", "OW", "COUT", "KH", "KW", "SH", "SW", "DH", "DW", "PT", "PL", "IN_OFF", "OUT_ZP",
            "ACT_MIN", "ACT_MAX", "XZ_WORD", "GM", "KWORDS", "TILES_N")
QP0 = 36
MID, RES_ADD = "int8_own_output", "int8_residual_add"       # attrs of a conv with a fused ADD


def _tiled(d: dict, outputs: int, residual: bool = False) -> bool:
    """Whether a layer of defines `d` (_plan's, with OC4) and `outputs` int8 outputs takes the tiled kernel
    (always where a residual ADD is fused: only it has that epilogue)."""
    return bool(d["OC4"]) and (outputs >= TILED_MIN_OUTPUTS or residual)


def _fuse_residual_adds(graph) -> None:
    """Fold each int8 ADD of two equal-shape activations into the epilogue of the tiled CONV_2D producing
    one of them (its only use, not a graph output) when the other is ready before that conv: the conv's
    int8 value (its own requantization, in registers) and the residual are then added exactly as LiteRT's
    int8 ADD does (ops/int8_eltwise.py add_params), one dispatch and one int8 tensor fewer."""
    from gpuc.compiler.ops.int8_eltwise import add_params, equal_add
    pos = {id(n): i for i, n in enumerate(graph.nodes)}
    made = {t: n for n in graph.nodes for t in n.outputs if t >= 0}
    uses: dict[int, int] = {}
    for n in graph.nodes:
        for t in list(n.inputs) + n.epilogue.reads():
            uses[t] = uses.get(t, 0) + 1
    keep = set(graph.outputs)
    for add in list(graph.nodes):
        if add.op != ADD or len(add.inputs) != 2 or len(add.outputs) != 1 or add.epilogue.reads() \
                or not equal_add(add, graph):
            continue
        for side in (0, 1):
            c, r = add.inputs[side], add.inputs[1 - side]
            conv = made.get(c)
            if c == r or conv is None or r in conv.inputs or conv.op != CONV or conv.epilogue.reads() or len(conv.outputs) != 1 \
                    or uses.get(c) != 1 or c in keep or MID in conv.attrs:
                continue
            if r in made and pos[id(made[r])] > pos[id(conv)]:
                continue                            # the residual is computed after the conv
            try:
                d, _, _ = _plan(conv, graph)
            except ValueError:
                continue
            y = graph.t(c)
            if not (d["CIN"] % 4 == 0 and _tiled(dict(d, OC4=int(d["COUT"] % 4 == 0 and not d["DEPTHWISE"])), y.size)):
                continue
            conv.attrs[RES_ADD] = add_params(y, graph.t(r), graph.t(add.outputs[0]), fused_act(add))
            conv.attrs[MID] = c
            conv.epilogue.residual = r
            conv.outputs = [add.outputs[0]]
            made[add.outputs[0]] = conv
            graph.nodes.remove(add)
            break


def _dot_kernel(k):
    return dataclasses.replace(k, defines=dict(k.defines, DOT_EXT=1), variants=[])


DOT_VARIANT = KernelVariant("int_dot", {"integer_dot_product": True}, _dot_kernel)


def _coopmat_kernel(k, emu: int = 0):
    return dataclasses.replace(k, defines=dict(k.defines, COOPMAT=1, BK=TILE_CM_BK, EMU=emu), variants=[])


# the tiled kernel's s8 x s8 -> s32 cooperative-matrix form (shaders/int8_conv_tiled.comp COOPMAT: 16 x 16 x 32
# subgroup-scope matrices, 8 subgroups of 32 per 64 x 64 tile); before int_dot (the first the device meets)
COOPMAT_VARIANT = KernelVariant("coopmat_int8", {"cooperative_matrix": [16, 16, 32, "sint8", "sint8", "sint32", "sint32"],
                                                 "subgroup_size": 32}, _coopmat_kernel)
# its form with the products by scalar DOT4 (shaders/int8_conv_tiled.comp EMU), in its place under
# CompileOptions.int8_emulate (tests on any device)
COOPMAT_EMU_VARIANT = KernelVariant("coopmat_int8_emu", {}, lambda k: _coopmat_kernel(k, 1))


# Tile plans of the cooperative-matrix kernel (shaders/int8_conv_cm.comp: SGM x SGN subgroups of 32, BK-word K
# steps, two shared buffers staged as 8-word K slices), offered beside coopmat_int8 as `measured` candidates
# (runtime/tuning.py: the device times them at first load and keeps the fastest).  Shared memory: the staging, which
# the epilogue's strips and a fused residual's tables reuse after the K loop (cm_smem): at most 32 KiB for these
# plans.  (H100, rows padded to BK + 4 words, before the strip epilogue: 128 x 128 / 128 x 64 / 64 x 128
# ran 1.5-3x slower than coopmat_int8, whose 8-word rows give its fragment loads a 32-byte stride.)
CM_PLANS = {
    "coopmat_int8_128x128": dict(BM=128, BN=128, BK=16, SGM=2, SGN=4),
    "coopmat_int8_128x64": dict(BM=128, BN=64, BK=16, SGM=4, SGN=2),
    "coopmat_int8_64x128": dict(BM=64, BN=128, BK=16, SGM=2, SGN=4),
    # coopmat_int8's tile and subgroup layout with this kernel's 128-int8 double-buffered K steps (a quarter of
    # the steps of coopmat_int8 before its 64-int8 ones, each a global-load latency and barriers: its 14 x 14
    # and 7 x 7 layers at batch 32 ran a few workgroups per SM, latency-bound), 16-byte staging and strip
    # epilogue; half the pixels with 4 subgroups of 2 x 2 fragments (twice the workgroups)
    "coopmat_int8_64x64": dict(BM=64, BN=64, BK=32, SGM=4, SGN=2),
    "coopmat_int8_32x64": dict(BM=32, BN=64, BK=32, SGM=2, SGN=2),
}
# a plan is offered where its grid has at least this many workgroups: with fewer a big GPU idles (H100, 132 SMs:
# the 128 x 128 plan's 52-workgroup grid of a 7 x 7 layer at batch 32 ran 2.7x slower than 64 x 64's 200), and
# small layers' candidates would grow the bundle for nothing (CompileOptions.int8_emulate: every plan, for tests)
CM_MIN_GROUPS = 128
CM_PORTABLE_SMEM = PORTABLE_SMEM    # what every Vulkan device allows; a plan needing more requires `shared_memory`


def cm_smem(plan: dict) -> int:
    """A CM_PLANS plan's shared memory in bytes: shaders/int8_conv_cm.comp's one array, two staging buffers of
    BM + BN rows of BK words (the epilogue's strips and a fused residual's 512-entry tables reuse it)."""
    return 2 * (plan["BM"] + plan["BN"]) * plan["BK"] * 4


def cm_declared_smem(plan: dict) -> int | None:
    """The `shared_memory` a CM_PLANS plan's variant requires: its cm_smem where over CM_PORTABLE_SMEM, else None."""
    return cm_smem(plan) if cm_smem(plan) > CM_PORTABLE_SMEM else None
CM_MEASURED = True      # (False: each plan is a first choice where the device meets it, for checking a plan;
#                          CompileOptions.int8_measured overrides it)


def measured() -> bool:
    """Whether the int8 tile plans are `measured` variants: CompileOptions.int8_measured, else CM_MEASURED."""
    m = current().int8_measured
    return CM_MEASURED if m is None else m


def emulate() -> bool:
    """CompileOptions.int8_emulate (tests): the cooperative-matrix kernels' EMU forms (scalar products, any
    device) in place of theirs and first, every tile plan offered whatever its grid."""
    return current().int8_emulate


def cm_variants(gm: int, co: int, cw: int) -> list:
    """The CM_PLANS variants of a tiled layer of gm pixels by co channels, cw words a window position (those
    whose channel tile is used at least half, with CM_MIN_GROUPS workgroups); 16-byte staging where cw % 4 == 0;
    a plan of more than 32 KiB of shared memory requires it (the EMU forms too: a device allowing less refuses it)."""
    out, emu = [], emulate()
    for name, plan in CM_PLANS.items():
        nt = plan["SGM"] * plan["SGN"] * 32
        groups = -(-gm // plan["BM"]) * -(-co // plan["BN"])
        if co < plan["BN"] // 2 or groups < (1 if emu else CM_MIN_GROUPS):
            continue

        def make(k, plan=plan, nt=nt, groups=groups):
            v4 = int(cw % 4 == 0)
            d = dict(plan, EMU=int(emu), RESIDUAL=k.defines.get("RESIDUAL", 0), RQ_MODE=RQ_RUY, VEC4=1, DEPTHWISE=0,
                     V4=v4)
            return dataclasses.replace(k, template="int8_conv_cm", invocations=groups * nt, local_x=nt, defines=d,
                                       variants=[], item_inner=0, vec4=("x", "w") if v4 else ())
        req = {} if emu else {"cooperative_matrix": COOPMAT_VARIANT.requires["cooperative_matrix"], "subgroup_size": 32}
        if cm_declared_smem(plan):
            req["shared_memory"] = cm_declared_smem(plan)
        out.append(KernelVariant(name + ("_emu" if emu else ""), req, make, measured=measured() and not emu))
    return out


def _splitk_candidate(d: dict, gm: int, co: int) -> list:
    """shaders/int8_fc_splitk.comp (K split over a workgroup of 64) for a plain-GEMM layer (FULLY_CONNECTED, a
    1x1 stride-1 unpadded conv) the flat kernel takes, as a `measured` candidate (with DOT_EXT where the device
    has packed dot products)."""
    if (d["KH"], d["KW"], d["SH"], d["SW"], d["PT"], d["PL"]) != (1, 1, 1, 1, 0, 0) or d["OH"] != d["H"] \
            or d["OW"] != d["W"]:
        return []
    pix = 8 if gm >= 8 else 1

    def make(k, dot=0):
        return dataclasses.replace(k, template="int8_fc_splitk", invocations=-(-gm // pix) * (co // 4) * 64, local_x=64,
                                   variants=[], item_inner=0, defines=dict(PIX=pix, RQ_MODE=RQ_RUY, VEC4=1, DEPTHWISE=0,
                                                                           RESIDUAL=0, DOT_EXT=dot))
    return [KernelVariant("int8_splitk_dot", {"integer_dot_product": True}, lambda k: make(k, 1), measured=measured()),
            KernelVariant("int8_splitk", {}, make, measured=measured())]


def _flops(node, graph):
    f = graph.t(node.inputs[1]).shape
    taps = int(np.prod(f[1:])) if len(f) == 4 and node.op != DEPTHWISE else (f[-1] if len(f) == 2 else f[1] * f[2])
    return 2 * graph.t(node.outputs[0]).size * taps


def _cm_fields(d: dict) -> dict:
    """An int8_conv_cm VARIANTS entry's Kernel fields: local size, vec4 bindings, the shared memory its plan declares."""
    return {"local_x": d["SGM"] * d["SGN"] * 32, "vec4": ("x", "w") if d["V4"] else (),
            "shared_memory": cm_declared_smem(d)}


_BASE = dict(N=1, H=5, W=5, CIN=4, OH=5, OW=5, COUT=6, KH=3, KW=3, SH=1, SW=1, DH=1, DW=1, PT=1, PL=1, DM=1, QP0=0,
             IN_OFF=3, OUT_ZP=-2, ACT_MIN=-128, ACT_MAX=127, NOUT=150, RQ_SPLIT=0, XZ_WORD=-50529028, OC4=0)
VARIANTS = {
    "int8_conv": (_BASE, {"VEC4": [0, 1], "DEPTHWISE": [0, 1], "RQ_MODE": [0, 1, 2], "OC4": [0, 1]}, ["out_", "x", "w", "qp"],
                  {"out_": "uint32", "x": "uint32", "w": "uint32", "qp": "int32"}),
    "int8_conv_tiled": (dict(TILE, VEC4=1, DEPTHWISE=0, RQ_MODE=1, RESIDUAL=0),
                        {"DOT_EXT": [0, 1]}, ["out_", "x", "w", "qp"],
                        {"out_": "uint32", "x": "uint32", "w": "uint32", "qp": "int32"}, lambda d: {"local_x": TILE_LOCAL}),
    "int8_conv_tiled:res": (dict(TILE, VEC4=1, DEPTHWISE=0, RQ_MODE=1, RESIDUAL=1),
                            {"DOT_EXT": [0, 1], "COOPMAT": [0, 1]}, ["out_", "x", "w", "qp", "res"],
                            {"out_": "uint32", "x": "uint32", "w": "uint32", "qp": "int32", "res": "uint32"},
                            lambda d: {"local_x": TILE_LOCAL}),
    "int8_conv_tiled:coopmat": (dict(TILE, VEC4=1, DEPTHWISE=0, RQ_MODE=1, COOPMAT=1, RESIDUAL=0), {"BK": [8, TILE_CM_BK]},
                                ["out_", "x", "w", "qp"], {"out_": "uint32", "x": "uint32", "w": "uint32", "qp": "int32"},
                                lambda d: {"local_x": TILE_LOCAL}),
    "int8_conv_cm": (dict(CM_PLANS["coopmat_int8_128x128"], EMU=1, VEC4=1, DEPTHWISE=0, RQ_MODE=1, RESIDUAL=0, V4=1),
                     {"EMU": [0, 1], "RESIDUAL": [0, 1], "V4": [0, 1]}, ["out_", "x", "w", "qp", "res"],
                     {"out_": "uint32", "x": "uint32", "w": "uint32", "qp": "int32", "res": "uint32"},
                     _cm_fields),
    "int8_conv_cm:64": (dict(CM_PLANS["coopmat_int8_128x64"], EMU=0, VEC4=1, DEPTHWISE=0, RQ_MODE=1, RESIDUAL=1),
                        {"V4": [0, 1]}, ["out_", "x", "w", "qp", "res"],
                        {"out_": "uint32", "x": "uint32", "w": "uint32", "qp": "int32", "res": "uint32"},
                        _cm_fields),
    "int8_conv_cm:64x128": (dict(CM_PLANS["coopmat_int8_64x128"], EMU=0, VEC4=1, DEPTHWISE=0, RQ_MODE=1, RESIDUAL=0),
                            {"V4": [0, 1]}, ["out_", "x", "w", "qp"],
                            {"out_": "uint32", "x": "uint32", "w": "uint32", "qp": "int32"},
                            _cm_fields),
    "int8_conv_cm:64x64": (dict(CM_PLANS["coopmat_int8_64x64"], SGM=2, SGN=2, EMU=0, VEC4=1, DEPTHWISE=0, RQ_MODE=1, RESIDUAL=1),
                           {"V4": [0, 1]}, ["out_", "x", "w", "qp", "res"],
                           {"out_": "uint32", "x": "uint32", "w": "uint32", "qp": "int32", "res": "uint32"},
                           _cm_fields),
    "int8_fc_splitk": (dict(PIX=8, RQ_MODE=1, VEC4=1, DEPTHWISE=0, RESIDUAL=0, DOT_EXT=0), {"PIX": [1, 8], "DOT_EXT": [0, 1]},
                       ["out_", "x", "w", "qp"], {"out_": "uint32", "x": "uint32", "w": "uint32", "qp": "int32"},
                       lambda d: {"local_x": 64}),
    "int8_conv:dot": (dict(_BASE, VEC4=1, DOT_EXT=1, DEPTHWISE=0, RQ_MODE=1, OC4=1), {}, ["out_", "x", "w", "qp"],
                      {"out_": "uint32", "x": "uint32", "w": "uint32", "qp": "int32"}),
}

def _widen(node, graph) -> None:
    """A CONV_2D whose input depth is not a multiple of 4 (an RGB stem) with enough outputs for the tiled
    kernel: its input's channels padded to a multiple of 4 with the zero point (an INT8_PAD before it) and
    its filter's with zeros, which add nothing, so the word-wise tiled kernel takes it."""
    x, f, y = graph.t(node.inputs[0]), graph.t(node.inputs[1]), graph.t(node.outputs[0])
    if len(x.shape) != 4 or len(f.shape) != 4 or x.shape[3] % 4 == 0 or f.shape[0] % 4 \
            or y.size < TILED_MIN_OUTPUTS or f.data is None:          # (a folded H / W pad stays as it is)
        return
    from gpuc.compiler.ir import Node
    ci = int(x.shape[3])
    c4 = -(-ci // 4) * 4
    xp = graph.add_tensor(f"{x.name}#c{c4}", (*x.shape[:3], c4), "int8", quant=x.quant)
    pads = graph.add_const(f"{x.name}#c{c4}_pads", np.array([[0, 0], [0, 0], [0, 0], [0, c4 - ci]], np.int32))
    zp = graph.add_const(f"{x.name}#c{c4}_zp", np.array([scale_zp(x)[1]], np.int8))
    wd = np.zeros((*f.shape[:3], c4), np.int8)
    wd[..., :ci] = np.asarray(f.data, np.int8)
    wt = graph.add_tensor(f"{f.name}#c{c4}", wd.shape, "int8", wd, quant=f.quant)
    graph.nodes.insert(graph.nodes.index(node), Node(PAD, [x.id, pads, zp], [xp], index=node.index))
    node.inputs = [xp, wt] + list(node.inputs[2:])


WIDEN[CONV] = _widen
FOLDS.append(_fuse_residual_adds)
native_form(("CONV_2D", CONV), ("DEPTHWISE_CONV_2D", DEPTHWISE), ("FULLY_CONNECTED", FC), check=_check)

declare_int8(CONV, DEPTHWISE, FC, templates=("int8_conv", "int8_conv_tiled", "int8_conv_cm",
             "int8_fc_splitk"), flops=_flops)
template("int8_conv", item_major=False, flat=True)
template("int8_conv_tiled", item_major=False, flat=False, in_place=("res",))   # (res read right before out_ is written)
template("int8_conv_cm", item_major=False, flat=False, in_place=("res",))
template("int8_fc_splitk", item_major=False, flat=False)
