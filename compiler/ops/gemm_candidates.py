"""Which cooperative-matrix kernels a fp16 gemm carries (ops/gemm_coopmat.py has the plans, the cost model and the
kernel): coopmat_variants for the one dispatch, split_variants for a split-K partial, plain_gemm for a gemm that gets
none; and the measured tile catalogue: 32-column tiles for narrow gemms (NARROW_PLANS), small-M tiles of one or two
16-row blocks (SMALL_PLANS) and mid-size tiles (MID_PLANS) for gemms whose regular tiles leave SMs idle.  A
`measured` candidate is timed against the gemm's other kernels at first load on the device (runtime/tuning.py).
"""
from __future__ import annotations

import dataclasses

from gpuc.compiler.codegen.kernel import KernelVariant
from gpuc.compiler.ops import gemm_coopmat as gc     # (its functions through the module: tests replace them)
from gpuc.compiler.ops.gemm_coopmat import BIG_SMEM, EMULATED_REQUIRES, GPU_SMS, REQUIRES, WG_SMEM, CoopPlan, switch
from gpuc.compiler.options import current


# Tiles 32 columns wide, for gemms of few output channels (a DenseNet's 3x3 convolutions: 32 channels, K = 1152;
# a 1x1 projection to 32): every family of ops/gemm_coopmat.py is 64..256 columns wide, so at N = 32 half its tensor-core work or
# more is padding.  `measured` candidates (runtime/tuning.py times them at load), each within the portable
# shared memory.
NARROW_PLANS = (CoopPlan(4, 1, 2, 2, 32, 2),    # 128 x 32, 4 subgroups of 32 x 32
                CoopPlan(8, 1, 1, 2, 32, 2),    # 128 x 32, 8 subgroups of 16 x 32
                CoopPlan(8, 1, 2, 2, 32, 1),    # 256 x 32, 8 subgroups of 32 x 32, one stage
                CoopPlan(4, 1, 4, 2, 16, 2))    # 256 x 32, 4 subgroups of 64 x 32, BK 16
NARROW_N = 48


def narrow_plans(M: int, N: int) -> list:
    """NARROW_PLANS for a gemm of at most NARROW_N output columns (none under tune_candidates = 0); only
    those whose row tiles are at most half padding."""
    if current().tune_candidates <= 0 or not 16 <= N <= NARROW_N:
        return []
    return [p for p in NARROW_PLANS if 2 * M >= p.BM]


# Small M (batch 1: M = 49..3136 rows of a few tiles): the families of ops/gemm_coopmat.py have too few tiles to fill the GPU
# (`worthwhile` keeps such gemms on the plain kernel).  There the tensor cores are offered as `measured`
# candidates only (runtime/tuning.py times them against the plain kernel at first load): tiles of one or two
# 16-row blocks with 2-4 subgroups across N, on the one dispatch or, where the gemm is split across
# workgroups (ops/gemm_split.py: S groups of depth K / S), on its partial dispatch, whose S groups fill the GPU;
# KS > 1: the workgroup's subgroups also split K (gemm.comp CM_KS), summed in shared memory.
# SMALL_M (CompileOptions.coopmat_small_m overrides it; tune_candidates = 0 also) switches them off: with them the gemm's A and B are stored
# as float16, which the plain kernel reads slower where the measurement keeps it.
SMALL_M = True
SMALL_PLANS = (CoopPlan(1, 4, 1, 1, 32, 2),    # 16 x 64, 4 subgroups
               CoopPlan(1, 4, 1, 2, 32, 2),    # 16 x 128
               CoopPlan(1, 2, 1, 2, 32, 2),    # 16 x 64, 2 subgroups of 16 x 32
               CoopPlan(2, 4, 1, 1, 32, 2),    # 32 x 64
               CoopPlan(2, 2, 1, 1, 32, 2),    # 32 x 32
               CoopPlan(1, 2, 1, 2, 64, 2, 4),  # 16 x 64, 2 x 4 K slices: 8 subgroups
               CoopPlan(1, 4, 1, 1, 64, 2, 2),  # 16 x 64, 4 x 2 K slices
               CoopPlan(1, 4, 1, 2, 32, 2, 2))  # 16 x 128, 4 x 2 K slices
# Mid-size tiles (32..128 rows, 4-8 subgroups of 1-2 x 1-2 blocks): offered beside SMALL_PLANS where the gemm has
# rows for them (batch-1 FCs over 196..3136 pixels), as `measured` candidates too.  SMALL_PLANS re-read B once per
# 16 rows; below MIN_MACS coop_cost ranks only the 128 x 128 families, which leave most SMs idle there.
MID_PLANS = (CoopPlan(2, 2, 2, 2, 32, 2),     # 64 x 64, 4 subgroups of 32 x 32
             CoopPlan(4, 2, 1, 2, 32, 2),     # 64 x 64, 8 subgroups of 16 x 32
             CoopPlan(2, 2, 1, 2, 32, 2),     # 32 x 64, 4 subgroups of 16 x 32
             CoopPlan(4, 2, 2, 2, 32, 2),     # 128 x 64
             CoopPlan(2, 4, 2, 2, 32, 2),     # 64 x 128
             CoopPlan(2, 2, 2, 2, 32, 2, 2))  # 64 x 64, 2 K slices: 8 subgroups
MID_CANDIDATES = 3           # how many MID_PLANS (least padded work per subgroup first) a gemm carries
#                             (CompileOptions.coopmat_mid_candidates overrides it)
SMALL_MIN_MACS = 1 << 24     # below it (narrow inverted-residual CNNs' batch-1 gemms) the old variant lost on every
#                             shape (H100 notes at MIN_MACS) and float16 storage would slow the plain kernel kept


def _small_blocks(M: int, N: int, K: int) -> bool:
    """The small-M plans are on (SMALL_M, tune_candidates) and their 16x16x16 blocks mostly real work (N, K >= 32,
    M >= 16)."""
    o = current()
    return switch(o.coopmat_small_m, SMALL_M) and o.tune_candidates > 0 and min(N, K) >= 32 and M >= 16


def small_m(M: int, N: int, K: int, G: int = 1, gather: bool = False) -> bool:
    """Whether a fp16 gemm of this shape carries small-M cooperative-matrix candidates (see SMALL_M): where
    the regular variants are not offered, the 16x16x16 blocks are mostly real work (_small_blocks),
    A is loaded as vectors and the product is big enough for staging fp16 tiles to pay."""
    return (_small_blocks(M, N, K) and not current().coopmat_emulate and not gather
            and M * N * K * G >= SMALL_MIN_MACS and not gc.worthwhile(M, N, K, G, gather))


def underfilled(M: int, N: int, K: int, G: int) -> bool:
    """Whether the cost model's plan leaves SMs idle: fewer tiles than GPU_SMS (a batch-1 transformer's FC of
    197 rows and K = 3072 took 12 tiles of 128 x 128, 116 us on the H100, where coop_cost, which charges a
    lone tile as a fraction of a full SM, saw no loss), where the small-M plans could take it (_small_blocks)."""
    p = gc.plan_coopmat(M, N, K, G, BIG_SMEM)
    return -(-M // p.BM) * -(-N // p.BN) * G < GPU_SMS and _small_blocks(M, N, K)


def small_plans(M: int, N: int, K: int, G: int, n: int, plans=None) -> list:
    """The `n` SMALL_PLANS (or `plans`) of least padded work per subgroup (waves of one tile per SM, each
    tile's 16x16x16 blocks over its subgroups), ties to the larger tile; only plans whose K slices have
    work (BK / KS steps of 16 within K) and whose row blocks are at most half padding."""
    def cost(p):
        tiles = -(-M // p.BM) * -(-N // p.BN) * G
        return -(-tiles // GPU_SMS) * p.BM * p.BN * -(-K // p.BK) * p.BK / (p.WM * p.WN * p.KS), -p.BM * p.BN
    return sorted((p for p in (SMALL_PLANS if plans is None else plans)
                   if (p.KS == 1 or K >= p.BK) and (p.BM <= 16 or 2 * M >= p.BM)), key=cost)[:n]


def small_candidates(M: int, N: int, K: int, G: int) -> list:
    """The small-M plans a gemm carries: tune_candidates + 1 of SMALL_PLANS, MID_CANDIDATES of MID_PLANS, and
    the NARROW_PLANS where N is narrow."""
    o = current()
    mid = MID_CANDIDATES if o.coopmat_mid_candidates is None else o.coopmat_mid_candidates
    return (small_plans(M, N, K, G, max(o.tune_candidates, 1) + 1) + small_plans(M, N, K, G, mid, MID_PLANS)
            + narrow_plans(M, N))


def split_variants(M: int, N: int, K: int, S: int, gather: bool = False, idle: bool = False) -> list:
    """Cooperative-matrix candidates for the partial dispatch of a gemm split S ways across workgroups
    (ops/gemm_split.py: S groups of the M x N x K product, no epilogue); `idle`: the whole gemm's own
    plans were `underfilled` (it has tensor cores whatever small_m says).  Under
    CompileOptions.coopmat_emulate (tests): the emulated kernel with the first small plan, chosen."""
    if current().coopmat_emulate:
        p = small_plans(M, N, K, S, 1)[0]
        return [KernelVariant("coopmat", EMULATED_REQUIRES, lambda k: gc.coopmat_kernel(k, WG_SMEM, p),
                              f16_bindings=("x", "w"))]
    if not (idle or small_m(M, N, K * S, 1, gather)):
        return []
    return measured(small_candidates(M, N, K, S))


def small_m_variants(M: int, N: int, K: int, G: int = 1, gather: bool = False) -> list:
    """The small-M candidates of a one-dispatch fp16 gemm ([] where small_m says none)."""
    if not small_m(M, N, K, G, gather):
        return []
    return measured(small_candidates(M, N, K, G))


def measured(plans) -> list:
    return [KernelVariant("coopmat", REQUIRES, lambda k, p=p: gc.coopmat_kernel(k, WG_SMEM, p), f16_bindings=("x", "w"),
                          measured=True) for p in plans]


def coopmat_variants(M: int, N: int, K: int, G: int = 1, gather: bool = False) -> list:
    """The variants a fp16 gemm kernel of this (per-group) shape carries, best first: tiled for
    BIG_SMEM bytes of shared memory where that plan needs more than the portable WG_SMEM (requiring
    the device to allow it), then tiled for WG_SMEM, then CompileOptions.tune_candidates other tile
    plans as `measured` candidates (runtime/tuning.py times them on the device at first load); none
    where tensor cores do not pay
    (under CompileOptions.coopmat_emulate: the emulated WG_SMEM one, for every shape)."""
    if current().coopmat_emulate:
        return [KernelVariant("coopmat", EMULATED_REQUIRES, gc.coopmat_kernel, f16_bindings=("x", "w"))]
    if not gc.worthwhile(M, N, K, G, gather):
        if (gather and GATHER_MEASURED and gc.worthwhile(M, N, K, G)      # big element-gathered convolutions
                or not gather and slim(M, N, K, G)):                  # ... and big gemms of 16..31 columns or depth
            return [dataclasses.replace(v, measured=True) for v in _plan_variants(M, N, K, G)]
        return []
    return _plan_variants(M, N, K, G)


# Gemms whose only shortfall is N or K of 16..31 (MIN_DIM): a 1x1 convolution from 16 channels, a 3x3 one to 24
# (inverted-residual and fused-MBConv CNNs at batch 32: 401k x 64 x 16 took 141 us on the plain kernel on the H100,
# 0.9 TB/s of its float32 tensors; 100k x 24 x 216 260 us, 16 TFLOP/s) carry the variants as `measured` candidates
# (the 32-column NARROW_PLANS among them), taken where timing them at load finds them faster.
SLIM_DIM = 16


def slim(M: int, N: int, K: int, G: int = 1) -> bool:
    """Whether worthwhile fails only for N or K in SLIM_DIM..MIN_DIM - 1 (not for a gather)."""
    return min(N, K) < gc.MIN_DIM and gc.worthwhile(M, N, K, G, dim=SLIM_DIM)


# Convolutions whose im2col loads gather element by element (CI % 4 != 0: an RGB stem) keep the plain kernel
# by default (SKIP_GATHER: it won at batch 1); where the gemm is big enough for the tensor cores otherwise
# (worthwhile without the gather: a batch-32 7x7 stem, 401k x 64 x 147, 361 us on the plain kernel on the
# H100) they carry the variants as `measured` candidates, taken where timing them at load finds them faster
# (that stem 359 -> 289 us, a batch-32 fp16 bottleneck CNN 3.862 -> 3.817 ms: benchmarks/archive/stem_pool_ab.py).
GATHER_MEASURED = True


def _plan_variants(M: int, N: int, K: int, G: int) -> list:
    """coopmat_variants' list for a shape where tensor cores pay (the cost model's plans first)."""
    out = []
    big = gc.plan_coopmat(M, N, K, G, BIG_SMEM)
    if big.smem_bytes() > WG_SMEM or big.threads > 256:
        out.append(KernelVariant("coopmat", dict(REQUIRES, shared_memory=BIG_SMEM),
                                 lambda k: gc.coopmat_kernel(k, BIG_SMEM), f16_bindings=("x", "w")))
    out.append(KernelVariant("coopmat", REQUIRES, gc.coopmat_kernel, f16_bindings=("x", "w")))
    for p in gc.alternative_plans(M, N, K, G, current().tune_candidates):   # measured on the device at load
        big = p.smem_bytes() > WG_SMEM or p.threads > 256
        out.append(KernelVariant("coopmat", dict(REQUIRES, shared_memory=BIG_SMEM) if big else REQUIRES,
                                 lambda k, p=p, lim=BIG_SMEM if big else WG_SMEM: gc.coopmat_kernel(k, lim, p),
                                 f16_bindings=("x", "w"), measured=True))
    if underfilled(M, N, K, G):          # few big tiles: the small-M plans too, measured (the narrow ones among them)
        out += measured(small_candidates(M, N, K, G))
    else:
        out += measured(narrow_plans(M, N))
    return out


def plain_gemm(node, graph) -> bool:
    """The node lowers to a gemm that gets no coopmat variant under --precision fp16 (a dynamic dim:
    never one, ops/conv.py gemm_kernels)."""
    if not gc.plain_fp32() or node.op not in gc.GEMM_OPS:
        return False
    from gpuc.compiler.symbolic import is_sym
    if any(i >= 0 and any(is_sym(d) for d in graph.t(i).shape) for i in list(node.inputs) + list(node.outputs)):
        return gc.gemm_shape_kind(node, graph)
    s = gc.gemm_shape(node, graph)
    return (s is not None and min(s[:3]) > 0 and not coopmat_variants(*s[:4], gather=s[4])
            and not small_m(*s[:4], gather=s[4]))
