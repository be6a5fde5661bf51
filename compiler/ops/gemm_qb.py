"""FULLY_CONNECTED over blockwise int4 weights in one kernel (shaders/gemm_qb.comp): litert-torch's
dynamic_int4_block32 / _block128 exports.  compiler/frontend/blockwise.py reads the int4 values and their
bf16-rounded block scales at import and, where `attach` accepts an FC, flags it (QB_ATTR) with int4 constants
made here: the weights as they are stored ([N, K / 8] uint32, 8 nibbles a word, the low nibble first), the
block scales [N, K / block] float32 and the blocks' weight sums [N, K / block] int32.  The kernel quantizes
each activation row to int8 in its prologue exactly as shaders/gemm_q8.comp does (XNNPACK's qd8 formula),
takes each block's int32 dot product, and sums the blocks' float(acc - zp * wsum) * scale, then times 1 / s
plus the bias: XNNPACK's qd8-f32-qb4w arithmetic (the block sums in a tree instead of in order: float rounding).
The bundle keeps 4 bits a weight (the float rewrite of compiler/ops/blockwise_fc.py: 32) and an FC is one
dispatch, its fused activation included.  FCs it does not take (a block not a multiple of 32, weights outside
-8..7, symbolic sizes) keep that rewrite.
"""
from __future__ import annotations

import numpy as np

from gpuc.compiler.codegen.kernel import Kernel
from gpuc.compiler.ops import template
from gpuc.compiler.ops.epi_chain import EBIND, apply_chain, sample_chain
from gpuc.compiler.ops.util import epilogue, size
from gpuc.compiler.symbolic import is_sym
from gpuc.compiler.codegen.shared_memory import PORTABLE_SMEM

QB_ATTR = "qb4_weights"         # (float weight id it stands for, packed id, scales id, sums id, block)
LOCAL = 64
WORD = 32                       # int4 weights a 16-byte word
GPU_SMS = 132                   # (H100) workgroups to fill the GPU: RN grows while >= 2 an SM remain
MAX_PASSES = 8                  # channel rounds a workgroup (RN = rounds * channels at once; loads all unrolled)
MAX_SUMS = 16                   # rounds x rows: float sums an invocation holds (and reduces in shared memory)
MAX_RM = 8                      # rows a workgroup (each weight word loaded once for them)
SMEM = PORTABLE_SMEM            # shared memory a workgroup takes at most (smem_bytes): every Vulkan device allows it


def attach(g, n, vals: np.ndarray, scales: np.ndarray, block: int) -> bool:
    """Flag FC `n` (its weight input the float32 dequantization of int4 values `vals` [N, K] with bf16 block
    scales `scales` [N * K / block]) for the kernel; False (nothing changed) where it does not apply."""
    if n.op != "FULLY_CONNECTED" or len(n.inputs) < 2 or len(n.outputs) != 1:
        return False
    if int(n.attrs.get("weights_format", 0)) != 0:
        return False
    x, w, y = g.t(n.inputs[0]), g.t(n.inputs[1]), g.t(n.outputs[0])
    if x.dtype != "float32" or y.dtype != "float32" or len(w.shape) != 2 or not x.shape:
        return False
    if any(is_sym(d) for d in tuple(x.shape) + tuple(y.shape)):
        return False
    nn, k = w.shape
    if block % WORD or k % block or x.size % k or vals.min(initial=0) < -8 or vals.max(initial=0) > 7:
        return False
    if smem_bytes(1, k, _tpc(k // block), LOCAL // _tpc(k // block)) > SMEM:    # (K over about 31,990 int8)
        return False
    if len(n.inputs) > 2 and n.inputs[2] >= 0 and g.t(n.inputs[2]).dtype != "float32":
        return False
    n.attrs[QB_ATTR] = (n.inputs[1],) + _consts(g, n.inputs[1], vals, scales, block) + (block,)
    return True


def _consts(g, w_id, vals, scales, block):
    memo = g.memo.relayout
    key = (w_id, "qb4")
    if key not in memo:
        w = g.t(w_id)
        nn, k = w.shape
        q = np.asarray(vals, np.int8).reshape(nn, k)
        nib = (q.reshape(-1) & 0xF).astype(np.uint8)
        packed = (nib[0::2] | (nib[1::2] << 4)).astype(np.uint8).view(np.uint32).reshape(nn, k // 8)
        sums = q.reshape(nn, k // block, block).astype(np.int32).sum(2).astype(np.int32)
        memo[key] = (g.add_const(f"{w.name}/qb4", np.ascontiguousarray(packed)),
                     g.add_const(f"{w.name}/qb4_scale", np.ascontiguousarray(scales, np.float32).reshape(nn, -1)),
                     g.add_const(f"{w.name}/qb4_sum", sums))
    return memo[key]


def applies(node) -> bool:
    """Whether `node` (a FULLY_CONNECTED) runs on gemm_qb: flagged, and still over the weights it was flagged for."""
    qb = node.attrs.get(QB_ATTR)
    return bool(qb) and len(node.inputs) > 1 and node.inputs[1] == qb[0]


def smem_bytes(rm: int, k: int, tpc: int, rn: int) -> int:
    """Shared memory of shaders/gemm_qb.comp: RM quantized rows of K int8, the min / max reduction (LOCAL each),
    the partial sums (RN / (LOCAL / TPC) rounds x RM rows x LOCAL) and each row's scale and zero point."""
    return rm * k + 4 * (2 * LOCAL + rn // (LOCAL // tpc) * rm * LOCAL + 2 * rm)


def _tpc(nb: int) -> int:
    return min(LOCAL, 1 << max(0, (nb - 1).bit_length()))


def _plan(m: int, n: int, k: int, nb: int) -> tuple[int, int, int]:
    """(TPC, RM, RN): TPC invocations a channel (the blocks of a row, up to the workgroup), RM rows (as many
    as shared memory holds, up to MAX_RM), RN channels a workgroup (more passes while >= 2 workgroups an SM
    remain and shared memory holds their sums): within SMEM bytes (smem_bytes)."""
    tpc = _tpc(nb)
    cpp = LOCAL // tpc
    rm = max(1, min(MAX_RM, m))
    while rm > 1 and smem_bytes(rm, k, tpc, cpp) > SMEM:
        rm -= 1
    tiles_m = -(-m // rm)
    passes = 1
    while passes * 2 <= min(MAX_PASSES, MAX_SUMS // rm) and tiles_m * -(-n // (cpp * passes * 2)) >= 2 * GPU_SMS \
            and smem_bytes(rm, k, tpc, cpp * passes * 2) <= SMEM:
        passes *= 2
    return tpc, rm, cpp * passes


def qb_kernels(node, graph, bias) -> list:
    """One gemm_qb dispatch for FULLY_CONNECTED `node` (flagged by `attach`)."""
    _, w_id, s_id, sum_id, block = node.attrs[QB_ATTR]
    n, k = graph.t(node.inputs[1]).shape
    m = size(graph.t(node.outputs[0]).shape) // n
    nb = k // block
    tpc, rm, rn = _plan(m, n, k, nb)
    tiles_n = -(-n // rn)
    binds = [("out_", node.outputs[0]), ("x", node.inputs[0]), ("w", w_id), ("ws", s_id), ("wsum", sum_id)]
    if bias is not None:
        binds.append(("bias", bias))
    defines = dict(GM=m, GN=n, GK=k, KQ=k // WORD, BW=block // WORD, NB=nb, TPC=tpc, RM=rm, RN=rn, TILES_N=tiles_n,
                   HAS_BIAS=int(bias is not None), **epilogue(node, binds, ignore=()))
    kern = Kernel("gemm_qb", binds, -(-m // rm) * tiles_n * LOCAL, defines, node.label(), local_x=LOCAL, vec4=("w",),
                  item_inner=0)
    return [apply_chain(kern, node, graph)]


template("gemm_qb", item_major=False, flat=False, in_place=("res",))

_QB = dict(GM=3, GN=5, GK=64, KQ=2, BW=1, NB=2, TPC=2, RM=2, RN=64, TILES_N=1)
_TYPES = {"w": "uint32", "wsum": "int32"}
VARIANTS = {
    "gemm_qb": (_QB, {"HAS_BIAS": [0, 1], "RESIDUAL": [0, 1], "ACT": [0, 1]},
                ["out_", "x", "w", "ws", "wsum", "bias", "res"], _TYPES, lambda d: dict(local_x=LOCAL, vec4=("w",))),
    "gemm_qb:chain": (dict(_QB, **sample_chain(3), BW=4, NB=1, TPC=1, GK=128, KQ=4), {"RM": [1, 3]},
                      ["out_", "x", "w", "ws", "wsum"] + EBIND[:2], _TYPES, lambda d: dict(local_x=LOCAL, vec4=("w",))),
}
# `make shaders` and the shared-memory check (tests/compiler/test_shared_memory.py): the plan of a 4096-wide prefill FC
# (7 rows of 4,096 int8 at once: close to SMEM)
_TPC, _RM, _RN = _plan(64, 4096, 4096, 4096 // 32)
VARIANTS["gemm_qb:most_smem"] = (dict(_QB, GM=64, GN=4096, GK=4096, KQ=128, BW=1, NB=128, TPC=_TPC, RM=_RM, RN=_RN,
                                      TILES_N=-(-4096 // _RN)), {"HAS_BIAS": [0, 1]},
                                 ["out_", "x", "w", "ws", "wsum", "bias"], _TYPES,
                                 lambda d: dict(local_x=LOCAL, vec4=("w",)))
