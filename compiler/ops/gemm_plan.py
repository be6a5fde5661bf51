"""The `gemm` tile planner.  Every non-depthwise conv and every FULLY_CONNECTED is one `gemm` dispatch
(ops/gemm_dispatch.py): out[m, g*GN + n] = sum_k A_g[m, k] * B_g[k, n] with M = N*OH*OW pixels (FC: rows),
GN = CO per group, GK = KH*KW*CI per group.  The tile (BM x BN, register block TM x TN, K chunk BK,
in-workgroup split-K KS) is picked per shape by a rough latency/throughput model of the target GPU
(H100-like: 132 SMs, 2048 threads / 64K registers / 228 KiB shared memory per SM; 32 KiB per workgroup,
the portable limit).  The model only has to rank candidates; all of them are correct for any shape.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from gpuc.compiler.options import current
from gpuc.compiler.codegen.shared_memory import PORTABLE_SMEM

GPU_SMS = 132
SM_THREADS, SM_REGS, SM_SMEM, SM_WGS = 2048, 65536, 228 * 1024, 32
WG_SMEM = PORTABLE_SMEM      # per workgroup: H100 allows 48 KiB, lavapipe and mobile GPUs 32 KiB
MAX_THREADS = 256
GLOBAL_LATENCY = 600        # cycles: a K chunk's global loads are overlapped with the previous chunk
LAUNCH_CYCLES = 1500        # fixed cost of a dispatch (first load, epilogue store, barrier with the next)
L2_BYTES_PER_CYCLE = 2500   # tiles re-read A (once per column tile) and B (once per row tile) through L2
REG_FACTOR = 2              # registers of KS > 1 plans / counted (CompileOptions.reg_factor overrides it).  At 1 the model put 8x8 register blocks with
#                             in-workgroup split-K on most batch-1 transformer GEMMs, 1.3-2x slower than 8x4 ones:
#                             H100 sweep (2026-11-24) of 12 batch-1 FC shapes of 4x-MLP blocks (49..3136 rows,
#                             96..3072 channels), 38 forced plans each: the model's picks summed to 998 us, 809 us
#                             with 2 (best measured: 698 us).  Applied to every plan it also cost a batch-32 CNN of
#                             1x1 / 3x3 / 1x1 bottleneck blocks 15% (large KS=1 tiles).


@dataclass(frozen=True)
class GemmPlan:
    BM: int
    BN: int
    BK: int
    TM: int
    TN: int
    KS: int
    V4: bool = False          # gemm.comp SV4: vec4 shared reads, two stages (KS = 1, TM and TN multiples of 4)

    @property
    def threads(self) -> int:
        return (self.BM // self.TM) * (self.BN // self.TN) * self.KS

    def smem_floats(self) -> int:
        """Shared floats of gemm.comp's layout (SMEM_SIZE there; SV4: smem4)."""
        if self.V4:
            return 2 * self.BK * (self.BM + 4 + self.BN)
        bmt, bnt = self.BM // self.TM, self.BN // self.TN
        sa = self.BK * (self.BM + 1)
        sb = self.BK * self.BN
        ab = self.KS * (sa + (bmt - sa) % 32 + sb + (bnt - sb) % 32)
        return max(ab, self.KS * self.BM * self.BN) if self.KS > 1 else ab


def reg_factor() -> float:
    """The register factor of KS > 1 plans: CompileOptions.reg_factor, else REG_FACTOR."""
    f = current().reg_factor
    return REG_FACTOR if f is None else f


def gemm_cost(p: GemmPlan, M: int, N: int, K: int, G: int, vec_a: bool, vec_b: bool, im2col: bool,
              factor: float | None = None) -> float:
    """Estimated cycles of one dispatch (only meaningful relative to other plans of the same GEMM);
    factor: the register factor (default reg_factor())."""
    T = p.threads
    smem = 4 * p.smem_floats()
    if smem > WG_SMEM:
        return float("inf")
    bkt = p.BK * p.KS
    va, vb = (4 if vec_a else 1), (4 if vec_b else 1)
    la = -(-bkt * p.BM // va // T)
    lb = -(-bkt * p.BN // vb // T)
    load_instr = la * (6 + va + (10 if im2col else 0)) + lb * (4 + vb)
    shared_reads = (p.TM + p.TN) // 4 if p.V4 else p.TM + p.TN
    iter_instr = load_instr + p.BK * (p.TM * p.TN + shared_reads) + 6
    # registers per invocation: the live values counted here; in-workgroup split-K plans (KS > 1) take
    # REG_FACTOR times that (measured on the H100, benchmarks/archive/gemm_plan_sweep.py)
    regs = p.TM * p.TN + p.TM + p.TN + la * va + lb * vb + (3 * la if im2col else la) + 20
    if p.KS > 1:
        regs *= reg_factor() if factor is None else factor
    nwg = -(-M // p.BM) * -(-N // p.BN) * G
    per_sm = min(SM_THREADS // T, SM_WGS, SM_REGS // (regs * T), SM_SMEM // smem)
    if per_sm < 1:
        return float("inf")
    resident = min(per_sm, -(-nwg // GPU_SMS))
    waves = -(-nwg // (GPU_SMS * per_sm))
    warps_per_sched = resident * (-(-T // 32)) / 4
    iters = -(-K // bkt)
    iter_cycles = max(iter_instr * max(warps_per_sched, 2.0), GLOBAL_LATENCY) + 60
    tail = p.TM * p.TN * 8 * max(warps_per_sched, 1.0)
    if p.KS > 1:
        tail += (p.TM * p.TN + -(-p.BM * p.BN // T) * (p.KS + 8)) * max(warps_per_sched, 2.0) + 60
    traffic = 4 * G * (M * K * -(-N // p.BN) + K * N * -(-M // p.BM) + M * N)
    return max(waves * (iters * iter_cycles + tail), traffic / L2_BYTES_PER_CYCLE) + LAUNCH_CYCLES


def _pow2_upto(limit: int, start: int = 1):
    v = start
    while True:
        yield v
        if v >= limit:
            return
        v *= 2


# SV4 plans (vec4 shared reads, two stages, BK = 8: BK = 16 measured 1.2-1.6x slower) for GEMMs with
# enough tiles to fill the GPU, and the time model that picks among them: per wave of one tile per SM,
# A + B * (K rounded up to 8) microseconds.  Fitted on the H100 (2026-11-24, benchmarks/archive/gemm_plan_sweep.py
# --v4, results/nvidia-h100-2026-11-24-gemm_plan_sweep-sv4.json: 7 shapes, M 1568..100352, N 96..4096,
# K 96..4096); its pick was within 5% of the best measured SV4 plan on each, and 1.1-2.7x faster than the
# SIMT plans the older model picked.  Smaller GEMMs (fewer than SV4_MIN_TILES 64 x 64 tiles) keep the
# model below, whose split-K plans fill the GPU at small M.
SV4_PLANS = ((GemmPlan(64, 128, 8, 8, 8, 1, True), 4.960, 0.05563),
             (GemmPlan(128, 64, 8, 8, 8, 1, True), 4.782, 0.05710),
             (GemmPlan(64, 64, 8, 8, 4, 1, True), 1.489, 0.03144),
             (GemmPlan(64, 64, 8, 4, 8, 1, True), 1.889, 0.03100),
             (GemmPlan(128, 32, 8, 8, 4, 1, True), 1.449, 0.03715),
             (GemmPlan(32, 128, 8, 8, 4, 1, True), 1.949, 0.03419))
SV4_MIN_TILES = 2 * GPU_SMS


def plan_gemm_sv4(M: int, N: int, K: int, G: int = 1) -> GemmPlan | None:
    """The SV4 plan of least modelled time, or None for a GEMM too small for them."""
    if -(-M // 64) * -(-N // 64) * G < SV4_MIN_TILES:
        return None
    k8 = -(-K // 8) * 8
    return min(SV4_PLANS, key=lambda e: -(-M // e[0].BM) * -(-N // e[0].BN) * G * (e[1] + e[2] * k8))[0]


def plan_gemm(M: int, N: int, K: int, G: int = 1, vec_a: bool = False, vec_b: bool = True,
              im2col: bool = False) -> GemmPlan:
    return _plan_gemm(M, N, K, G, vec_a, vec_b, im2col, reg_factor())


@lru_cache(maxsize=4096)
def _plan_gemm(M: int, N: int, K: int, G: int, vec_a: bool, vec_b: bool, im2col: bool, factor: float) -> GemmPlan:
    big = plan_gemm_sv4(M, N, K, G)
    if big is not None:
        return big
    best, best_cost = None, float("inf")
    for BN in _pow2_upto(min(max(N, 4), 128), 4):
        for TN in (1, 2, 4, 8):
            if BN % TN or BN // TN > 64:
                continue
            for BM in _pow2_upto(min(M, 128)):
                for TM in (1, 2, 4, 8):
                    if BM % TM or TM * TN > 64 or TM * TN > BM * BN // 4:
                        continue
                    base = (BM // TM) * (BN // TN)
                    if base > MAX_THREADS:
                        continue
                    for BK in (8, 16):
                        for KS in (1, 2, 4, 8, 16, 32):
                            if base * KS > MAX_THREADS or (KS > 1 and (KS - 1) * BK >= K):
                                break
                            p = GemmPlan(BM, BN, BK, TM, TN, KS)
                            c = gemm_cost(p, M, N, K, G, vec_a, vec_b, im2col, factor)
                            if c < best_cost * 0.999:     # near-ties keep the earlier (smaller) tile
                                best, best_cost = p, c
    return best
