"""The cooperative-matrix variant of the tiled gemm (shaders/gemm.comp, COOPMAT=1).

For `--precision fp16`, every `gemm` dispatch whose A (x) and B (w) bindings are stored as float16
gets a KernelVariant: A/B tiles in shared memory as float16, products through
VK_KHR_cooperative_matrix 16x16x16 (fp16 inputs, fp32 accumulators), the plain path's epilogue.
The bundle carries both kernels; the runtime (runtime/variants.py) picks this one only on a device
reporting a subgroup-scope VkCooperativeMatrixPropertiesKHR entry 16x16x16 float16*float16+float32
->float32 and the subgroup size the tiles were laid out for (CM_SG), otherwise the plain kernel.
Only A/B already stored as fp16 qualify, so no value is rounded that fp16 storage did not round
already; sums are fp32 as in the plain path.  Any M/N/K: edges are zero-filled on load and masked
on store, exactly as in the plain path.

The tile (subgroups CM_WM x CM_WN, 16x16 tiles per subgroup CM_TM x CM_TN, K chunk BK, shared stages
CM_STAGES) is one of FAMILIES, picked per shape by coop_cost from the throughput each family reached
on the H100 (waves of tiles, padding); a plan that needs more than the portable 32 KiB of shared
memory becomes a variant requiring `shared_memory`, with a 32 KiB plan after it.
"""
from __future__ import annotations

import dataclasses
from functools import lru_cache

from gpuc.compiler.options import current
from gpuc.compiler.codegen.shared_memory import PORTABLE_SMEM

CM = 16                       # M = N = K of the cooperative matrix shape
CM_SG = 32                    # subgroup size the workgroup layout assumes (NVIDIA)
REQUIRES = {"cooperative_matrix": [CM, CM, CM, "float16", "float16", "float32", "float32"], "subgroup_size": CM_SG}
WG_SMEM = PORTABLE_SMEM       # shared memory per workgroup every Vulkan device allows
BIG_SMEM = 48 * 1024          # what NVIDIA (and most desktop GPUs) allow: variants requiring `shared_memory`
GPU_SMS, SM_SMEM, SM_THREADS = 132, 228 * 1024, 2048


@dataclasses.dataclass(frozen=True)
class CoopPlan:
    WM: int
    WN: int
    TM: int
    TN: int
    BK: int
    ST: int = 1               # shared-memory stages (2: double-buffered, one barrier per K chunk)
    KS: int = 1               # K slices across subgroups (gemm.comp CM_KS: KS x WM x WN subgroups)

    @property
    def BM(self) -> int:
        return self.WM * self.TM * CM

    @property
    def BN(self) -> int:
        return self.WN * self.TN * CM

    @property
    def threads(self) -> int:
        return self.WM * self.WN * self.KS * CM_SG

    def smem_bytes(self) -> int:
        """gemm.comp's COOPMAT layout: per stage A [BM][BK+8], B [BK][BN+8] (or [BN][BK+8] for B_T), halves;
        after the K loop the same bytes stage 1 KiB of fp32 accumulator per subgroup (KS > 1: per tile of
        every subgroup, for the sum of the K slices)."""
        b = max(self.BK * (self.BN + 8), self.BN * (self.BK + 8))
        c = 1024 * self.WM * self.WN * (self.KS * self.TM * self.TN if self.KS > 1 else 1)
        return max(self.ST * (2 * self.BM * (self.BK + 8) + 2 * b), c)


# The tile families, (WM, WN, TM, TN, BK), each with the throughput it reached on the H100 at a few
# depths K (TFLOP/s of the tiles' own area, i.e. padding excluded: the measured rate times the padded /
# real area; benchmarks/archive/coopmat_sweep.py, 2026-11-24: square 4096 and a batch-32 vision
# transformer's FC shapes 100352 x 384 x 96, 100352 x 96 x 384, 25088 x 192 x 768) and how many workgroups an
# SM holds at once
# (by registers: a 4x4 block of accumulators is 128 fp32 registers per invocation; 16 subgroups: 1).
# Small K is where they differ most: the loop is short and the epilogue, the loads' latency and the
# barrier per K chunk weigh; there 128 x 128 tiles (or 16 subgroups) beat 8 subgroups of 64 x 64.
# The smaller tiles: those FC shapes at K <= 384, square 4096 and batch-32 3x3 convolutions of 64 channels
# (K = 576: 128 x 64 and 64 x 64 ran 58 TFLOP/s, 128 x 128 36, gemm_speed.py --sweep) above.
# With the register epilogue (session 4, results/nvidia-h100-2026-11-24-s4-coopmat_sweep.json) 128 x 128
# tiles with BK 16 in two 12 KiB stages beat every other plan on 9 of 12 batch-32 transformer FC shapes
# (e.g. 100352 x 384 x 96: 70.6 TFLOP/s against the planner's 57.9; 6272 x 1152 x 384: 101.6 / 72.5).
RATE_KS = (96, 384, 768, 4096)
FAMILIES = [((4, 4, 2, 4, 16), (43, 105, 77, 136), 1),   # 128 x 256, 16 subgroups of 32 x 64
            ((2, 4, 4, 4, 16), (27, 83, 44, 131), 1),    # 128 x 256, 8 subgroups of 64 x 64
            ((4, 2, 4, 4, 16), (21, 73, 53, 124), 1),    # 256 x 128, 8 subgroups of 64 x 64
            ((4, 4, 4, 2, 16), (34, 86, 68, 68), 1),     # 256 x 128, 16 subgroups of 64 x 32
            ((4, 2, 2, 4, 32), (37, 64, 87, 124), 1),    # 128 x 128, 8 subgroups of 32 x 64
            ((4, 2, 2, 4, 16), (70, 95, 80, 115), 2),    # the same with BK 16: 24 KiB (s4 sweep, below)
            ((4, 2, 2, 2, 32), (26, 40, 55, 55), 2),     # 128 x 64, 8 subgroups of 32 x 32
            ((2, 4, 2, 2, 32), (26, 40, 55, 55), 2),     # 64 x 128
            ((2, 2, 2, 2, 32), (27, 41, 45, 35), 4),     # 64 x 64, 4 subgroups
            ((2, 2, 1, 1, 32), (15, 15, 15, 15), 8)]     # 32 x 32


def family_rate(rates, K: int) -> float:
    """The family's rate at depth K: linear in log K between the measured depths, flat outside."""
    import math
    if K <= RATE_KS[0]:
        return rates[0]
    for (k0, r0), (k1, r1) in zip(zip(RATE_KS, rates), zip(RATE_KS[1:], rates[1:])):
        if K <= k1:
            t = math.log(K / k0) / math.log(k1 / k0)
            return r0 + t * (r1 - r0)
    return rates[-1]


def coop_cost(p: CoopPlan, rate: float, resident: int, M: int, N: int, K: int, G: int) -> float:
    """Relative time: waves of `resident` tiles per SM, each tile BM x BN x K at the family's rate."""
    tiles = -(-M // p.BM) * -(-N // p.BN) * G
    waves = -(-tiles // (GPU_SMS * resident))
    return waves * resident * p.BM * p.BN * K / rate


def _fitting_plans(M: int, N: int, K: int, G: int, smem_limit: int):
    """(coop_cost, plan) of each family whose tiles fit `smem_limit`: double-buffered (ST=2) where that
    fits, else one buffer.  Under the portable limit (WG_SMEM) only families of at most 256
    invocations (8 subgroups); the 16-subgroup ones are for devices allowing BIG_SMEM."""
    for (wm, wn, tm, tn, bk), rates, resident in FAMILIES:
        if smem_limit <= WG_SMEM and wm * wn * CM_SG > 256:
            continue
        rate = family_rate(rates, K)
        for p in (CoopPlan(wm, wn, tm, tn, bk, 2), CoopPlan(wm, wn, tm, tn, bk, 1), CoopPlan(wm, wn, tm, tn, 16, 1)):
            if p.smem_bytes() <= smem_limit:
                yield coop_cost(p, rate * (1.0 if p.ST == 2 else 0.9), resident, M, N, K, G), p
                break


@lru_cache(maxsize=4096)
def plan_coopmat(M: int, N: int, K: int, G: int = 1, smem_limit: int = WG_SMEM) -> CoopPlan:
    """The cheapest of _fitting_plans (the first of those within 0.1% of each other)."""
    best, best_cost = None, float("inf")
    for c, p in _fitting_plans(M, N, K, G, smem_limit):
        if c < best_cost * 0.999:
            best, best_cost = p, c
    return best


# defaults; CompileOptions.coopmat_vec8 / coopmat_direct / coopmat_reg_chain override them (benchmarks A/B, tests)
VEC8 = True        # 16-byte loads (two f16vec4) of A and B rows where they are aligned
DIRECT = True      # full accumulator tiles get their epilogue in registers and go straight to the output
# ... also where a fused chain runs last.  Off: on the H100 (benchmarks/archive/coopmat_epilogue_ab.py, 2026-11-24,
# a batch-32 fp16 CNN of FC + GELU blocks) the register epilogue took the FC + bias + GELU-chain layers
# from 356 to 500 us, while bias / residual epilogues gained (the whole run: staged 6.83 ms, register 7.31,
# register without chains 6.11).  Tests switch it on to check the chain loads.
REG_CHAIN = False


def switch(value, default: bool) -> bool:
    return default if value is None else value


def vector_widths(d: dict) -> tuple[int, int]:
    """(CM_AV, CM_BV): halves per A / B load of the COOPMAT kernel with plain-kernel defines `d`: 8 where
    every group of 8 consecutive k (A) / n (B, B_T=0) starts 16-byte aligned and lies inside a row."""
    if not switch(current().coopmat_vec8, VEC8):
        return 4, 4
    cig = d.get("CIG", d["GK"])
    a8 = bool(d["VEC_A"]) and d["GK"] % 8 == 0 and d["LDA"] % 8 == 0 and (
        (not d.get("IM2COL") and d["GROUPS"] == 1) or cig % 8 == 0)
    b8 = not d["B_T"] and d["GNP"] % 8 == 0
    return (8 if a8 else 4), (8 if b8 else 4)


def direct_store(d: dict) -> bool:
    """Full tiles take the register epilogue (gemm.comp cm_epilogue) and are stored straight to the output:
    no fake-quant, a chain only under REG_CHAIN and where each input is read as a matrix (EPI_TILE,
    ops/epi_chain.py), the
    output's rows (and so the residual's) 16-byte aligned as float16 (LDC and the group offset multiples
    of 8 elements), no LayerNorm folded in (LN_FOLD).  Otherwise every tile is staged through shared memory
    for `finish`."""
    o = current()
    chain = switch(o.coopmat_reg_chain, REG_CHAIN)
    return (switch(o.coopmat_direct, DIRECT) and not d.get("FQ") and not d.get("LN_FOLD")
            and (not d.get("EPI_CHAIN") or chain and bool(d.get("EPI_TILE")))
            and d["LDC"] % 8 == 0 and (d["GROUPS"] == 1 or d["GN"] % 8 == 0))


def alternative_plans(M: int, N: int, K: int, G: int, n: int) -> list:
    """The `n` plans coop_cost ranks next after the plan of each shared-memory limit (BIG_SMEM or
    WG_SMEM): the candidates a device measures against the cost model's pick (runtime/tuning.py)."""
    picked = {plan_coopmat(M, N, K, G, BIG_SMEM), plan_coopmat(M, N, K, G, WG_SMEM)}
    ranked = sorted(_fitting_plans(M, N, K, G, BIG_SMEM), key=lambda cp: cp[0])
    return [p for _, p in ranked if p not in picked][:n]


def coopmat_kernel(k, smem_limit: int = WG_SMEM, plan: CoopPlan | None = None):
    """The COOPMAT=1 kernel for the plain gemm kernel `k` (same bindings, epilogue defines), tiled
    for `smem_limit` bytes of shared memory per workgroup.
    CompileOptions.coopmat_emulate (tests): the emulated path (CM_EMULATE) under the requirements
    EMULATED_REQUIRES, so that lavapipe runs and checks the variant's tiling and epilogue."""
    d = dict(k.defines)
    if current().coopmat_emulate:
        d["CM_EMULATE"] = 1
    p = plan or plan_coopmat(d["GM"], d["GN"], d["GK"], d["GROUPS"], smem_limit)
    tiles_m, tiles_n = -(-d["GM"] // p.BM), -(-d["GN"] // p.BN)
    nwg = tiles_m * tiles_n * d["GROUPS"]
    av, bv = vector_widths(d)
    if d.get("LN_FOLD"):     # a LayerNorm folded in (ops/ln_fold.py): its row statistics in shared memory,
        if p.smem_bytes() + ln_reserve_bytes(p.BM) > smem_limit or 16 * p.BM * p.BK // av > p.smem_bytes():
            return None      # ... and each A slot's 4 partial sums in the staging bytes
    defines = dict(d, COOPMAT=1, CM_WM=p.WM, CM_WN=p.WN, CM_TM=p.TM, CM_TN=p.TN, CM_SG=CM_SG, BM=p.BM, BN=p.BN,
                   BK=p.BK, CM_STAGES=p.ST, CM_KS=p.KS, CM_AV=av, CM_BV=bv, CM_DIRECT=int(direct_store(d)), KS=1, TM=1, TN=1,
                   TILES_M=tiles_m, TILES_N=tiles_n, NWG=nwg)
    return dataclasses.replace(k, defines=defines, invocations=nwg * p.threads, local_x=p.threads, variants=[],
                               item_inner=tiles_n * d["GROUPS"])


EMULATED_REQUIRES = {"fp16_storage": True}

# --precision fp16 storage wishes of gemm kernels (passes/precision.py assign_storage).  The plain
# kernel ran slower with float16 tensors than with float32 ones on the H100 (batch 1, 2026-11-24,
# benchmarks/archive/fp16_plain_ab.py and profile_dump.py, the gemms of three networks: 7x7-depthwise CNN
# 1069 -> 1367 us, windowed-attention transformer 1133 -> 1426, bottleneck CNN 1070 -> 1205), so a gemm
# without the coopmat variant asks for float32
# everywhere; one with it needs x and w in float16 (the variant exists only then).
# CompileOptions.fp16_plain_gemms (GPUC_FP16_PLAIN_GEMMS=1) stores them as float16 all the same (a smaller
# arena; tests of the float16 storage paths use it).
def plain_fp32() -> bool:
    return not current().fp16_plain_gemms


def gemm_shape(node, graph):
    """(M, N, K, G, gather) of the `gemm` dispatch that node's lowering makes (ops/conv.py gemm_kernels:
    CONV_2D, FULLY_CONNECTED, BATCH_MATMUL with a constant 2-D right-hand side), None for any other node
    or where the shapes do not fit (the lowering's own checks report those)."""
    try:
        ins = [graph.t(i) for i in node.inputs if i >= 0]
        y = graph.t(node.outputs[0])
        if node.op == "FULLY_CONNECTED":
            o, k = ins[1].shape
            return y.size // o, o, k, 1, False
        if node.op == "CONV_2D":
            x, f = ins[0], ins[1]
            n, h, w, ci = x.shape
            co, kh, kw, cig = f.shape
            g = ci // cig
            a = node.attrs
            pointwise = (kh == kw == 1 and int(a.get("stride_h", 1)) == int(a.get("stride_w", 1)) == 1
                         and node.epilogue.pad is None and tuple(y.shape[1:3]) == (h, w))
            vec_a = (kh * kw * cig) % 4 == 0 and ci % 4 == 0 and (g == 1 or cig % 4 == 0) and (pointwise or cig % 4 == 0)
            return y.shape[0] * y.shape[1] * y.shape[2], co // g, kh * kw * cig, g, not pointwise and not vec_a
        if node.op == "BATCH_MATMUL" and len(ins) == 2 and ins[1].is_const and not node.attrs.get("adj_x") \
                and all(d == 1 for d in ins[1].shape[:-2]):
            n = ins[1].shape[-2] if node.attrs.get("adj_y") else ins[1].shape[-1]
            return y.size // n, n, ins[0].shape[-1], 1, False
    except (ValueError, IndexError, ZeroDivisionError, TypeError):
        return None
    return None


GEMM_OPS = ("FULLY_CONNECTED", "CONV_2D", "BATCH_MATMUL")


def gemm_shape_kind(node, graph) -> bool:
    """Whether node lowers to `gemm` at all, judged without sizes (dynamic dims)."""
    if node.op == "BATCH_MATMUL":
        b = graph.t(node.inputs[1])
        return b.is_const and not node.attrs.get("adj_x") and all(d == 1 for d in b.shape[:-2])
    return True


def ln_reserve_bytes(bm: int) -> int:
    """Shared memory a LayerNorm folded into the gemm (ops/ln_fold.py) adds to a tile of `bm` rows (gemm.comp
    ln_sh: mean and 1 / std per row)."""
    return 8 * bm


def storage_wishes(k) -> tuple[tuple, tuple]:
    """(binding names of kernel `k` that should stay float32, binding names that must be float16)."""
    if k.template != "gemm":
        return (), ()
    need = tuple(n for v in k.variants for n in v.f16_bindings)
    if need:
        return (), need
    return (tuple(n for n, _ in k.bindings) if plain_fp32() else ()), ()


# Measured on the H100 (benchmarks/gemm_speed.py --batch 1 --fp16-plain, 2026-11-24, before the
# tile families above): the variant won on batch-1 bottleneck-CNN layers down to 3136 x 64 x 256 and
# 49 x 2048 x 512 (up to 2x) and lost where few 64 x 64 tiles exist (196 x 256 x 1024: 16 tiles,
# 0.8x; 49 x 512 x 2048: 8 tiles, 0.7x) and on the 7x7 stem with CI = 3 (scalar gathers, 0.7x);
# 3136 x 64 x 64 and 256^3 tied.  Narrow inverted-residual batch-1 gemms (K <= 16, < 24 tiles or < 2^24 MACs; the
# old variant lost on every one, benchmarks/coopmat_check.py 2026-11-23) keep the plain kernel.
MIN_DIM = 32
MIN_MACS = 1 << 27     # 2^24 put batch-1 FC layers of 3136 x 384 x 96 (115M MACs each) on it: fp16 took 2.82 ms
#                        of GPU time against fp32's 1.50 (H100, harness, 2026-11-24); every batch-32 CNN layer
#                        measured (>= 1.6G MACs) keeps the tensor cores
MIN_TILES = 24
SKIP_GATHER = True


def worthwhile(M: int, N: int, K: int, G: int = 1, gather: bool = False, dim: int | None = None) -> bool:
    """Tensor cores pay only where a 16x16x16 block is mostly real work (a matrix-vector product or a
    sliver of N or K stays on the plain kernel, which reads the same bytes without padding every row
    to 16), where the GEMM is big enough to amortise staging fp16 tiles in shared memory, and where
    it has enough 64 x 64 tiles to fill the GPU (the plain kernel splits K over a workgroup; this
    one does not).  `gather`: im2col loads element by element (CI % 4 != 0): the plain kernel won.
    Measured on the H100 (benchmarks/gemm_speed.py --batch 1 --fp16-plain, bottleneck-CNN layer shapes).
    `dim`: the fewest columns and depth (default MIN_DIM; `slim` asks with SLIM_DIM)."""
    tiles = -(-M // 64) * -(-N // 64) * G
    return (M >= MIN_DIM and min(N, K) >= (MIN_DIM if dim is None else dim) and M * N * K * G >= MIN_MACS
            and tiles >= MIN_TILES and not (gather and SKIP_GATHER))


_G = dict(N=1, H=5, W=6, OH=3, OW=3, KW=3, SH=2, SW=2, DH=1, DW=1, PT=1, PL=1, FQ_SCALE=0.0235, FQ_ZP=-5,
          FQ_MIN=-128, FQ_MAX=127, FQM_SCALE=0.031, FQM_ZP=3, FQM_MIN=-128, FQM_MAX=127, FQM=1,
          GM=9, GN=6, GK=36, GROUPS=2, LDA=8, LDC=12, GNP=8, CIG=4, COOPMAT=1, CM_WM=2, CM_WN=1, CM_TM=1,
          CM_TN=2, CM_SG=CM_SG, BM=32, BN=32, BK=32, KS=1, TM=1, TN=1, TILES_M=1, TILES_N=1, NWG=2)
# `make shaders`: the coopmat path of gemm.comp, with A and B stored as float16 (the only way it is used)
VARIANTS = {
    "gemm:coopmat": (_G, {"IM2COL": [0, 1], "VEC_A": [0, 1], "B_T": [0, 1], "HAS_BIAS": [0, 1], "RESIDUAL": [0, 1],
                          "ACT": [0, 3], "FQ": [0, 1], "CM_EMULATE": [0, 1], "CM_STAGES": [1, 2]},
                     ["out_", "x", "w", "bias", "res"], {"x": "float16", "w": "float16"},
                     lambda d: dict(local_x=d["CM_WM"] * d["CM_WN"] * d["CM_SG"],
                                    vec4=tuple(n for n, on in (("x", d["VEC_A"]), ("w", not d["B_T"])) if on))),
    # 16-byte loads (CM_AV / CM_BV = 8) and the direct accumulator store (aligned sample geometry)
    "gemm:coopmat8": (dict(_G, GK=32, LDA=16, LDC=16, CIG=8, GNP=8, VEC_A=1, CM_AV=8, HAS_BIAS=0, RESIDUAL=0),
                      {"IM2COL": [0, 1], "B_T": [0, 1], "CM_BV": [4, 8], "CM_DIRECT": [0, 1], "CM_EMULATE": [0, 1],
                       "CM_STAGES": [1, 2]},
                      ["out_", "x", "w"], {"x": "float16", "w": "float16"},
                      lambda d: dict(local_x=d["CM_WM"] * d["CM_WN"] * d["CM_SG"],
                                     vec4=("x",) if d["B_T"] else ("x", "w"))),
    # the small-M tiles (SMALL_PLANS: one 16-row block, subgroups across N) as split-K partials (GROUPS = S,
    # output float32 scratch, no epilogue)
    "gemm:coopmat_small": (dict(_G, GK=32, LDA=16, LDC=64, CIG=8, GNP=8, VEC_A=1, CM_AV=8, HAS_BIAS=0, RESIDUAL=0,
                                CM_WM=1, CM_WN=4, CM_TN=1, BM=16, BN=64, CM_STAGES=2),
                           {"IM2COL": [0, 1], "CM_BV": [4, 8], "CM_DIRECT": [0, 1], "CM_EMULATE": [0, 1],
                            "CM_KS": [1, 2]},
                           ["out_", "x", "w"], {"x": "float16", "w": "float16"},
                           lambda d: dict(local_x=d["CM_WM"] * d["CM_WN"] * d.get("CM_KS", 1) * d["CM_SG"],
                                          vec4=("x", "w"))),
    # the register epilogue (CM_DIRECT) with bias, activation and residual, float16 and float32 operands
    "gemm:coopmat_epi": (dict(_G, GK=32, LDA=16, LDC=16, CIG=8, GNP=8, VEC_A=1, CM_AV=8, CM_BV=8, CM_DIRECT=1),
                         {"HAS_BIAS": [0, 1], "RESIDUAL": [0, 1], "ACT": [0, 3], "CM_EMULATE": [0, 1]},
                         ["out_", "x", "w", "bias", "res"], {"x": "float16", "w": "float16", "res": "float16"},
                         lambda d: dict(local_x=d["CM_WM"] * d["CM_WN"] * d["CM_SG"], vec4=("x", "w"))),
}
