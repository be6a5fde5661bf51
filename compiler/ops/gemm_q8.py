"""Weight-only int8 FULLY_CONNECTED (shaders/gemm_q8.comp): int8 weights with float activations (a
dynamic-range, "hybrid" model, e.g. litert-torch's int8 LLM exports) keep their int8 bytes in the bundle and
are unpacked in registers; the activations are quantized per row on the fly and multiplied in exact int32,
as LiteRT's default CPU path (XNNPACK's qd8-f32-qc8w kernels) computes these FCs.

passes/quant.py asks `keeps_int8(node, graph)` which FCs keep their weights (the rest are dequantized to
float32 at compile time, as before): symmetric int8 weights (every zero point 0), per-tensor or per output
channel (axis 0), float32 input and output, fixed sizes.  Asymmetric weights (a non-zero zero point) and
uint8 / int16 / int4 weights keep the float path.

Three paths by the number of activation rows M (all the same integers, so the same results):
- M = 1 (decode, FLAT): `_flat_plan` sizes workgroups of up to 1024 invocations, TPR of them per output
  channel on consecutive 16-byte weight words, RN channels a workgroup (enough that re-reading and
  quantizing the row per workgroup stays cheap, few enough workgroups that all are resident), weight
  words loaded a batch ahead (the first batch right after the row's loads, before the row is quantized;
  the epilogue's operands and the RMS weights too, so no load waits behind the sums); short rows (a
  channel's words in one batch) on small workgroups of one subgroup a channel, >= 4 a SM;
- 1 < M < TILED_MIN_M: RM rows x RN channels a workgroup, int32 partial sums meeting in shared memory;
- M >= TILED_MIN_M (prefill): the rows quantized once (one dispatch), then 64 x 64 output tiles
  (shaders/gemm_q8_tiled.glsl).
ops/q8_fusion.py may fold an RMS_NORM into the row quantization (RMS_ATTR) and merge the gate / up FCs of
an MLP into one kernel with silu(gate) * up (GLU_ATTR).  Devices with packed int8 dot products
(VK_KHR_shader_integer_dot_product) get the int_dot variants; ahead of them, the prefill tiles run on
s8 x s8 -> s32 cooperative matrices where the device has them (coopmat_int8: ops/gemm_q8_coopmat.py).
"""
from __future__ import annotations

import dataclasses

import numpy as np

from gpuc.compiler.codegen.kernel import Kernel, KernelVariant
from gpuc.compiler.ops import template
from gpuc.compiler.ops.epi_chain import EBIND, apply_chain, sample_chain
from gpuc.compiler.ops.reduce import SUBGROUP_VARIANT
from gpuc.compiler.ops.util import epilogue, size
from gpuc.compiler.ops.gemm_q8_coopmat import coopmat_variants
from gpuc.compiler.options import current
from gpuc.compiler.symbolic import is_sym
from gpuc.compiler.codegen.shared_memory import PORTABLE_SMEM

ATTR = "int8_weights"           # node.attrs flag set by passes/quant.py: lower with gemm_q8
RMS_ATTR = "q8_rms"             # (norm weight tensor, eps): input 0 is RMS-normalized first (ops/q8_fusion.py)
GLU_ATTR = "q8_glu"             # (up weight tensor, up bias tensor or -1): silu(x W^T) * (x Wu^T) (ops/q8_fusion.py)
SMEM_WORDS = 4096               # quantized rows per workgroup: RM * K bytes <= 16 KiB of shared memory
MAX_RM = 8                      # rows per workgroup (each 16-byte weight word is reused across them)
LOCAL = 64
FLAT_WORDS = 8                  # one row: 16-byte weight words a batch of one invocation (x2 in flight)
MIN_TPR = 32                    # one row: fewest invocations per channel (a subgroup sums a channel)
FLAT_ROW_BYTES = 16             # one row: channels a workgroup reads >= this many bytes per row float
FLAT_RESIDENT = 1024            # one row: invocations an SM holds at once (~64 registers each)
SMEM = PORTABLE_SMEM            # shared memory a row kernel (Q8_MODE 0) takes at most: every Vulkan device allows it
TILED_MIN_M = 16                # rows from which the rows are quantized once and output tiled (prefill)
TILE = 64                       # rows and channels of a tiled workgroup (shaders/gemm_q8_tiled.glsl BM, BN)
GPU_SMS = 132                   # (H100) workgroups to fill the GPU: prefer RN giving >= 2 per SM
SHORT_LOCAL = 128               # one row, short rows: the largest workgroup of the one-batch plan (0: off)
FLAT_XFIRST = 1                 # one row: the row's loads issued ahead of the first weight batch's
FLAT_EPF = 1                    # one row: the epilogue's operands loaded before phase 1, not after the sums
PF_WORDS = 16                   # 16-byte weight words an invocation loads ahead of phase 1 (64 registers)
# one row: the plan of FLAT_ROW_BYTES_ALT, where it differs, as a measured candidate (runtime/tuning.py keeps it where
# the device runs it faster).  More workgroups, each re-reading the row for fewer channels: on the H200 (2026-11-28,
# a 1.5B decoder's decode step, each value forced for every one-row FC) the long-row down projection (1536 x 8960)
# took 9.18 us at 16 (128 workgroups), 8.63 at 8 (192), 8.27 at 4 (384); the other FCs' plans were the same; 32: no
# change.  The H100 fitted 16 (session 9), hence measured, not the rule.  Offered, the first load's tuning took it
# for all 28 down projections (8.31 us each) and the whole step from 1.2245 to 1.1937 ms.
FLAT_ROW_BYTES_ALT = 4


def keeps_int8(node, graph) -> bool:
    """Whether `node` is a FULLY_CONNECTED that gemm_q8 can run with its int8 weights as they are."""
    if node.op != "FULLY_CONNECTED" or len(node.inputs) < 2 or node.inputs[1] < 0 or len(node.outputs) != 1:
        return False
    x, w, y = graph.t(node.inputs[0]), graph.t(node.inputs[1]), graph.t(node.outputs[0])
    if int(node.attrs.get("weights_format", 0)) != 0 or not w.is_const or w.dtype != "int8":
        return False
    q = w.quant
    if q is None or len(w.shape) != 2 or q.scale.size not in (1, w.shape[0]) or w.data.size == 0:
        return False
    if q.zero_point.size and np.any(np.asarray(q.zero_point) != 0):
        return False
    if q.scale.size > 1 and int(getattr(q, "axis", 0) or 0) != 0:
        return False
    if not np.all(np.isfinite(q.scale)) or np.any(np.asarray(q.scale) <= 0):
        return False
    if x.dtype != "float32" or y.dtype != "float32" or x.quant is not None or y.quant is not None:
        return False
    if any(is_sym(d) for d in tuple(x.shape) + tuple(y.shape)):
        return False
    if len(node.inputs) > 2 and node.inputs[2] >= 0:
        b = graph.t(node.inputs[2])
        if b.dtype != "float32" or b.quant is not None:
            return False
    return x.size % w.shape[1] == 0 and smem_bytes(-(-w.shape[1] // 16), 1, 8, LOCAL) <= SMEM   # (K < ~31,900)


def smem_bytes(kq: int, rm: int, rn: int, local: int) -> int:
    """Shared memory of shaders/gemm_q8.comp's row kernels (Q8_MODE 0) at most (with RMS and GLU): RM quantized
    rows of KQ 16-byte words, the min / max and RMS reductions (a float each an invocation), the int32 sums of
    RM x RN outputs (gate and up) and each row's scale and zero point."""
    return 16 * rm * kq + 12 * local + 8 * rm * rn + 8 * rm


def _consts(graph, w_id: int):
    """The packed weights [N][KQ] uvec4 (as uint32 [N, KQ*4]), per-channel scales [N] and weight sums [N]
    (memoized per weight tensor: FCs sharing weights share them)."""
    memo = graph.memo.relayout
    key = (w_id, "q8")
    if key not in memo:
        w = graph.t(w_id)
        packed, scale, kq = packed_rows(graph, w_id)
        q = np.asarray(w.data, np.int8).reshape(w.shape[0], -1)
        memo[key] = (packed, scale, graph.add_const(f"{w.name}/q8_sum", q.astype(np.int32).sum(1).astype(np.int32)),
                     kq)
    return memo[key]


def packed_rows(graph, w_id: int):
    """Int8 constant `w_id` [N, ...] as rows of 16-byte words (uint32 [N, KQ*4], each row zero-padded to KQ
    words) and its per-row float32 scales [N]: (packed id, scales id, KQ).  Memoized per tensor, so an
    embedding table tied to the int8 LM head (ops/gather.py) is stored once."""
    memo = graph.memo.relayout
    key = (w_id, "q8_rows")
    if key not in memo:
        w = graph.t(w_id)
        q = np.asarray(w.data, np.int8).reshape(w.shape[0], -1)
        n, k = q.shape
        kq = -(-k // 16)
        packed = np.zeros((n, kq * 16), np.int8)
        packed[:, :k] = q
        scale = np.broadcast_to(np.asarray(w.quant.scale, np.float32).reshape(-1), (n,))
        memo[key] = (graph.add_const(f"{w.name}/q8", packed.view(np.uint32).reshape(n, kq * 4)),
                     graph.add_const(f"{w.name}/q8_scale", np.ascontiguousarray(scale, np.float32)), kq)
    return memo[key]


def _tile(m: int, n: int, kq: int) -> tuple[int, int]:
    rm = max(1, min(MAX_RM, m, SMEM_WORDS // (kq * 4)))
    tiles_m = -(-m // rm)
    for rn in (8, 4, 2):
        if tiles_m * -(-n // rn) >= 2 * GPU_SMS:
            return rm, rn
    return rm, 1


def _flat_plan(n: int, kq: int, per: int, row_bytes: int | None = None) -> tuple[int, int, int, int]:
    """(local, TPR, RN, HB) for one activation row (FLAT, shaders/gemm_q8.comp): RN channels a workgroup,
    TPR invocations each, batches of HB channels.  Every workgroup reads and quantizes the whole row (4 bytes
    a float), so RN * per >= FLAT_ROW_BYTES where that still leaves >= 4 workgroups an SM, and >= GPU_SMS
    workgroups where N allows; then the widest workgroup (most bytes in flight an SM) whose channel slots
    divide RN without fewer workgroups than that (-15%) or more than fit at once (FLAT_RESIDENT an SM),
    and whose channels keep at least half their TPR invocations loading.
    A short row (all of a channel's words in one batch of MIN_TPR invocations) spread over >= 4 workgroups an
    SM of at most SHORT_LOCAL invocations instead: one subgroup a channel, no batches, small workgroups
    (cheap barriers, several an SM overlapping their prologues; the H100: qkv / o of a 1.5B decoder -1 us).
    row_bytes: FLAT_ROW_BYTES's stand-in (FLAT_ROW_BYTES_ALT: the measured candidate, `row_plan_variant`)."""
    if MIN_TPR * max(1, FLAT_WORDS // per) >= kq:
        rn = 1 << (-(-n // (4 * GPU_SMS)) - 1).bit_length()
        if rn * MIN_TPR <= SHORT_LOCAL and smem_bytes(kq, 1, max(rn, 64 // MIN_TPR), max(64, rn * MIN_TPR)) <= SMEM:
            return max(64, rn * MIN_TPR), MIN_TPR, max(rn, 64 // MIN_TPR), 1
    rn0 = max(-(-(row_bytes or FLAT_ROW_BYTES) // per), -(-n // (4 * GPU_SMS)))
    if -(-n // rn0) < GPU_SMS:
        rn0 = -(-n // GPU_SMS)
    rn0 = max(1, min(rn0, (SMEM - smem_bytes(kq, 1, 0, 64)) // 8))     # (the last resort's sums fit: keeps_int8)
    least = min(GPU_SMS, -(-n // rn0))
    xw = max(64, 1 << (kq * 4 // 16 - 1).bit_length())      # (<= 16 row words an invocation in registers)
    plan = None
    for local in (1024, 512, 256, 128, 64):
        if local < xw or (local > 4 * rn0 * kq * per and local > 64):   # (<= 4 invocations a weight word)
            continue
        if smem_bytes(kq, 1, rn0, local) > SMEM:                       # (the row, reductions, sums)
            continue
        words = max(1, FLAT_WORDS // per // (2 if local > 512 else 1))  # (1024 invocations: <= 64 registers)
        tpr = min(MIN_TPR, local)
        while tpr < local and -(-kq // tpr) > words:
            tpr *= 2
        for tpr in range(tpr.bit_length() - 1, local.bit_length()):
            tpr = 1 << tpr
            cpp = local // tpr
            rn = -(-rn0 // cpp) * cpp
            g = -(-n // rn)
            if tpr >= 2 * kq and tpr > MIN_TPR:     # (most lanes idle: few words in flight)
                continue
            if 20 * g >= 17 * least and g * local <= FLAT_RESIDENT * GPU_SMS and smem_bytes(kq, 1, rn, local) <= SMEM:
                ch, wpc = rn // cpp, -(-kq // tpr)
                hb = max(h for h in range(1, ch + 1) if ch % h == 0 and h * wpc <= max(words, wpc))
                return local, tpr, rn, hb
            plan = plan or (local, local, rn0, 1)
    # (a row too long for a workgroup of xw invocations within SMEM: the widest that fits, a channel at a time)
    return plan or next((lo, lo, rn0, 1) for lo in (1024, 512, 256, 128, 64)
                        if lo == 64 or smem_bytes(kq, 1, rn0, lo) <= SMEM)


def q8_kernels(node, graph, bias) -> list:
    """One gemm_q8 dispatch for FULLY_CONNECTED `node` (its weights int8: keeps_int8)."""
    w = graph.t(node.inputs[1])
    n, k = w.shape
    m = size(graph.t(node.outputs[0]).shape) // n
    w_id, s_id, sum_id, kq = _consts(graph, node.inputs[1])
    binds = [("out_", node.outputs[0]), ("x", node.inputs[0]), ("w", w_id), ("ws", s_id), ("wsum", sum_id)]
    if bias is not None:
        binds.append(("bias", bias))
    if m >= TILED_MIN_M:
        return _tiled(node, graph, binds, m, n, k, kq)
    per = 2 if node.attrs.get(GLU_ATTR) else 1
    flat = m == 1
    if flat:
        local, tpr, rn, hb = _flat_plan(n, kq, per)
        rm = 1
    else:
        (rm, rn), local = _tile(m, n, kq), LOCAL
    tiles_m, tiles_n = -(-m // rm), -(-n // rn)
    defines = dict(GM=m, GN=n, GK=k, KQ=kq, RM=rm, RN=rn, TILES_N=tiles_n, HAS_BIAS=int(bias is not None),
                   **epilogue(node, binds, ignore=()))
    if node.attrs.get(RMS_ATTR):
        nw, eps = node.attrs[RMS_ATTR]
        binds.append(("nw", nw))
        defines.update(RMS=1, EPS=float(eps))
    _glu(node, graph, binds, defines, kq)
    if flat:
        defines.update(FLAT=1, TPR=tpr, HB=hb, XFIRST=FLAT_XFIRST, EPF=FLAT_EPF)
    else:
        defines["PF"] = min(-(-kq // LOCAL), max(1, PF_WORDS // (rn * per)))
    kern = Kernel("gemm_q8", binds, tiles_m * tiles_n * local, defines, node.label(), local_x=local,
                  vec4=("w", "wu"), item_inner=0)
    kern.variants += [SUBGROUP_DOT_VARIANT, DOT_VARIANT, SUBGROUP_VARIANT]    # (the first the device meets)
    if flat:
        kern.variants += row_plan_variant(n, kq, per, (local, tpr, rn, hb))
    return [apply_chain(kern, node, graph)]


def row_plan_variant(n: int, kq: int, per: int, plan: tuple) -> list:
    """[the one-row kernel on _flat_plan's FLAT_ROW_BYTES_ALT plan, packed dot products and subgroup sums, as a
    measured candidate] where that plan differs from `plan`; [] under CompileOptions.tune_candidates 0."""
    alt = _flat_plan(n, kq, per, FLAT_ROW_BYTES_ALT)
    if alt == plan or current().tune_candidates <= 0:
        return []
    local, tpr, rn, hb = alt
    tiles_n = -(-n // rn)

    def make(k):
        return dataclasses.replace(k, defines=dict(k.defines, RN=rn, TILES_N=tiles_n, TPR=tpr, HB=hb, SUBGROUP=1,
                                                   DOT_EXT=1), invocations=tiles_n * local, local_x=local, variants=[])
    return [KernelVariant("q8_row_plan", dict(SUBGROUP_DOT_VARIANT.requires), make, measured=True)]


def _glu(node, graph, binds, defines, kq) -> None:
    if node.attrs.get(GLU_ATTR):
        wu, ub = node.attrs[GLU_ATTR]
        u_id, us_id, usum_id, ukq = _consts(graph, wu)
        assert ukq == kq, "gate and up weights of one shape"
        binds += [("wu", u_id), ("wus", us_id), ("wusum", usum_id)] + ([("ubias", ub)] if ub >= 0 else [])
        defines.update(GLU=1, HAS_UBIAS=int(ub >= 0))


def _tiled(node, graph, binds, m, n, k, kq) -> list:
    """Many rows (prefill): the rows quantized once (Q8_MODE 1), then 64 x 64 output tiles (Q8_MODE 2)."""
    y = graph.t(node.outputs[0])
    # (the rows, then their scales: gemm_q8_tiled.glsl XQ_ROW / XQ_SC; whole 16-byte words for uvec4 reads)
    rows = graph.add_tensor(f"{y.name}/q8_rows", (m, kq * 4 + 4), "uint32")
    rb = [("out_", rows), ("x", node.inputs[0])]
    rd = dict(GM=m, GK=k, KQ=kq, RM=1, RN=1, Q8_MODE=1)
    if node.attrs.get(RMS_ATTR):
        nw, eps = node.attrs[RMS_ATTR]
        rb.append(("nw", nw))
        rd.update(RMS=1, EPS=float(eps))
    quant = Kernel("gemm_q8", rb, m * LOCAL, rd, f"{node.label()}: rows quantized", local_x=LOCAL, item_inner=0)
    quant.variants.append(SUBGROUP_VARIANT)
    binds = [("out_", binds[0][1]), ("xq", rows)] + binds[2:]
    tiles_n = -(-n // TILE)
    defines = dict(GM=m, GN=n, GK=k, KQ=kq, RM=1, RN=1, TILES_N=tiles_n, HAS_BIAS=int(any(b == "bias" for b, _ in binds)),
                   Q8_MODE=2, **epilogue(node, binds, ignore=()))
    _glu(node, graph, binds, defines, kq)
    kern = Kernel("gemm_q8", binds, -(-m // TILE) * tiles_n * 256, defines, node.label(), local_x=256,
                  vec4=("w", "wu"), item_inner=0)
    kern.variants += [*coopmat_variants(), DOT_VARIANT]    # (int8 tensor cores: ops/gemm_q8_coopmat.py)
    return [quant, apply_chain(kern, node, graph)]


def _with(**defines):
    return lambda k: dataclasses.replace(k, defines=dict(k.defines, **defines), variants=[])


# packed int8 dot products (VK_KHR_shader_integer_dot_product: OpSDot, the same int32 sums), with subgroups or not
SUBGROUP_DOT_VARIANT = KernelVariant("subgroup_int_dot", {"subgroup_arithmetic": True, "integer_dot_product": True},
                                     _with(SUBGROUP=1, DOT_EXT=1))
DOT_VARIANT = KernelVariant("int_dot", {"integer_dot_product": True}, _with(DOT_EXT=1))


def dequantized_weights(graph, w_id: int) -> int:
    """A float32 copy of int8 weights `w_id` (a consumer that cannot read them as int8)."""
    from gpuc.compiler.passes.fold import dequantize
    memo = graph.memo.relayout
    key = (w_id, "dequantized")
    if key not in memo:
        t = graph.t(w_id)
        memo[key] = graph.add_const(f"{t.name}/f32", np.asarray(dequantize(t), np.float32))
    return memo[key]


template("gemm_q8", item_major=False, flat=False, in_place=("res",))

_Q8 = dict(GM=3, GN=5, GK=40, KQ=3, RM=2, RN=4, TILES_N=2)
_TYPES = {"w": "uint32", "wsum": "int32", "wu": "uint32", "wusum": "int32"}
VARIANTS = {
    "gemm_q8": (_Q8, {"HAS_BIAS": [0, 1], "RESIDUAL": [0, 1], "ACT": [0, 1, 3], "ACT2": [0, 1], "SUBGROUP": [0, 1]},
                ["out_", "x", "w", "ws", "wsum", "bias", "res"], _TYPES,
                lambda d: dict(local_x=LOCAL, vec4=("w",))),
    "gemm_q8:fused": (dict(_Q8, RMS=1, EPS=1e-6, GLU=1, PF=1), {"HAS_UBIAS": [0, 1], "SUBGROUP": [0, 1],
                                                                 "DOT_EXT": [0, 1]},
                      ["out_", "x", "w", "ws", "wsum", "nw", "wu", "wus", "wusum", "ubias"], _TYPES,
                      lambda d: dict(local_x=LOCAL, vec4=("w", "wu"))),
    "gemm_q8:flat": (dict(_Q8, GM=1, RM=1, RN=8, FLAT=1, TPR=32, HB=2, RMS=1, EPS=1e-6, XFIRST=1, HAS_BIAS=1,
                          RESIDUAL=1),
                     {"GLU": [0, 1], "SUBGROUP": [0, 1], "DOT_EXT": [0, 1], "EPF": [0, 1]},
                     ["out_", "x", "w", "ws", "wsum", "bias", "res", "nw", "wu", "wus", "wusum"], _TYPES,
                     lambda d: dict(local_x=128, vec4=("w", "wu"))),
    "gemm_q8:rows": (dict(GM=3, GK=40, KQ=3, RM=1, RN=1, Q8_MODE=1, RMS=1, EPS=1e-6), {"SUBGROUP": [0, 1]},
                     ["out_", "x", "nw"], {"out_": "uint32"}, lambda d: dict(local_x=LOCAL)),
    "gemm_q8:tiled": (dict(_Q8, RM=1, RN=1, Q8_MODE=2, HAS_BIAS=1, RESIDUAL=1, **sample_chain(3)),
                      {"GLU": [0, 1], "DOT_EXT": [0, 1]},
                      ["out_", "xq", "w", "ws", "wsum", "bias", "res", "wu", "wus", "wusum"] + EBIND[:2],
                      dict(_TYPES, xq="uint32"), lambda d: dict(local_x=256, vec4=("w", "wu"))),
    "gemm_q8:rms_chain": (dict(_Q8, **sample_chain(3), RMS=1, EPS=1e-6), {"SUBGROUP": [0, 1]},
                          ["out_", "x", "w", "ws", "wsum", "nw"] + EBIND[:2], _TYPES,
                          lambda d: dict(local_x=LOCAL, vec4=("w",))),
    "gemm_q8:chain": (dict(_Q8, **sample_chain(3), PF=1), {"SUBGROUP": [0, 1]},
                      ["out_", "x", "w", "ws", "wsum"] + EBIND[:2], _TYPES,
                      lambda d: dict(local_x=LOCAL, vec4=("w",))),
}
# `make shaders` and the shared-memory check (tests/compiler/test_shared_memory.py): the one-row plan of a 24,576-wide
# row (close to SMEM), with the RMS prologue and GLU's sums
_FL = dict(zip(("local", "TPR", "RN", "HB"), _flat_plan(4096, 1536, 1)))
VARIANTS["gemm_q8:flat_most_smem"] = (
    dict(VARIANTS["gemm_q8:flat"][0], GN=4096, GK=24576, KQ=1536, TILES_N=-(-4096 // _FL["RN"]), RN=_FL["RN"],
         TPR=_FL["TPR"], HB=_FL["HB"]), {"GLU": [0, 1]}, VARIANTS["gemm_q8:flat"][2], _TYPES,
    lambda d: dict(local_x=_FL["local"], vec4=("w", "wu")))
