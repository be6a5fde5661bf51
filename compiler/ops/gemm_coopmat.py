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

The tile (subgroups CM_WM x CM_WN, 16x16 tiles per subgroup CM_TM x CM_TN, K chunk BK) is picked
by a rough model of an H100-like GPU (conv.py's constants): enough workgroups to fill the SMs,
little padding waste, larger per-subgroup blocks to amortise fragment loads.
"""
from __future__ import annotations

import dataclasses
import os
from functools import lru_cache

from gpuc.compiler.codegen.kernel import KernelVariant

CM = 16                       # M = N = K of the cooperative matrix shape
CM_SG = 32                    # subgroup size the workgroup layout assumes (NVIDIA)
REQUIRES = {"cooperative_matrix": [CM, CM, CM, "float16", "float16", "float32", "float32"], "subgroup_size": CM_SG}
WG_SMEM = 32 * 1024
GPU_SMS, SM_SMEM, SM_THREADS = 132, 228 * 1024, 2048


@dataclasses.dataclass(frozen=True)
class CoopPlan:
    WM: int
    WN: int
    TM: int
    TN: int
    BK: int

    @property
    def BM(self) -> int:
        return self.WM * self.TM * CM

    @property
    def BN(self) -> int:
        return self.WN * self.TN * CM

    @property
    def threads(self) -> int:
        return self.WM * self.WN * CM_SG

    def smem_bytes(self) -> int:
        return 2 * self.BM * (self.BK + 8) + 2 * self.BK * (self.BN + 8) + 4 * self.WM * self.WN * 256


def coop_cost(p: CoopPlan, M: int, N: int, K: int, G: int) -> float:
    smem = p.smem_bytes()
    if smem > WG_SMEM:
        return float("inf")
    tiles = -(-M // p.BM) * -(-N // p.BN) * G
    per_sm = max(1, min(SM_SMEM // smem, SM_THREADS // p.threads, 16))
    waves = -(-tiles // (GPU_SMS * per_sm))
    kiters = -(-K // p.BK)
    nw = p.WM * p.WN
    # per K chunk: global->shared staging (elements per invocation) + fragment loads + mma per subgroup
    stage = (p.BM + p.BN) * p.BK / p.threads * 4
    mma = (p.TM * p.TN * 8 + (p.TM + p.TN) * 6) * (p.BK // CM)
    chunk = max(stage + mma * max(1.0, per_sm * nw / 16), 300) + 40
    epi = p.TM * p.TN * (256 // CM_SG) * 12
    traffic = 2 * G * (M * K * -(-N // p.BN) + K * N * -(-M // p.BM)) + 4 * M * N * G
    return max(waves * (kiters * chunk + epi), traffic / 2500) + 1500


@lru_cache(maxsize=4096)
def plan_coopmat(M: int, N: int, K: int, G: int = 1) -> CoopPlan:
    best, best_cost = None, float("inf")
    for wm, wn in ((1, 1), (2, 1), (1, 2), (2, 2), (4, 1), (1, 4), (4, 2), (2, 4)):
        for tm in (1, 2, 4):
            for tn in (1, 2, 4):
                if tm * tn > 8:
                    continue
                for bk in (16, 32):
                    p = CoopPlan(wm, wn, tm, tn, bk)
                    c = coop_cost(p, M, N, K, G)
                    if c < best_cost * 0.999:
                        best, best_cost = p, c
    return best


def coopmat_kernel(k):
    """The COOPMAT=1 kernel for the plain gemm kernel `k` (same bindings, epilogue defines).
    GPUC_TEST_COOPMAT_EMULATE=1 (tests): the emulated path (CM_EMULATE) under the requirements
    EMULATED_REQUIRES, so that lavapipe runs and checks the variant's tiling and epilogue."""
    d = dict(k.defines)
    if os.environ.get("GPUC_TEST_COOPMAT_EMULATE", "") not in ("", "0"):
        d["CM_EMULATE"] = 1
    p = plan_coopmat(d["GM"], d["GN"], d["GK"], d["GROUPS"])
    tiles_m, tiles_n = -(-d["GM"] // p.BM), -(-d["GN"] // p.BN)
    nwg = tiles_m * tiles_n * d["GROUPS"]
    defines = dict(d, COOPMAT=1, CM_WM=p.WM, CM_WN=p.WN, CM_TM=p.TM, CM_TN=p.TN, CM_SG=CM_SG, BM=p.BM, BN=p.BN,
                   BK=p.BK, KS=1, TM=1, TN=1, TILES_M=tiles_m, TILES_N=tiles_n, NWG=nwg)
    return dataclasses.replace(k, defines=defines, invocations=nwg * p.threads, local_x=p.threads, variants=[],
                               item_inner=tiles_n if d["GROUPS"] == 1 else 0)


EMULATED_REQUIRES = {"fp16_storage": True}


# Measured on the H100 (benchmarks/coopmat_check.py, 2026-11-23): the variant lost on every
# MobileNetV2 gemm (0.21x..1.14x; M*N*K <= 19M: too little work per dispatch to pay for staging the
# tiles), and won 1.7x at 1024^3 and 15x at 2048^3 / 4096^3.
MIN_DIM = 64
MIN_MACS = 1 << 28


def worthwhile(M: int, N: int, K: int) -> bool:
    """Tensor cores pay only where a 16x16x16 block is mostly real work (a matrix-vector product or a
    sliver of N or K stays on the plain kernel, which reads the same bytes without padding every row
    to 16) and where the GEMM is big enough to amortise staging fp16 tiles in shared memory."""
    return min(M, N, K) >= MIN_DIM and M * N * K >= MIN_MACS


def coopmat_variant(M: int, N: int, K: int) -> KernelVariant | None:
    """The variant a fp16 gemm kernel of this (per-group) shape carries, or None
    (under GPUC_TEST_COOPMAT_EMULATE: the emulated one, for every shape)."""
    emulate = os.environ.get("GPUC_TEST_COOPMAT_EMULATE", "") not in ("", "0")
    if not emulate and not worthwhile(M, N, K):
        return None
    return KernelVariant("coopmat", EMULATED_REQUIRES if emulate else REQUIRES, coopmat_kernel, f16_bindings=("x", "w"))

_G = dict(N=1, H=5, W=6, OH=3, OW=3, KW=3, SH=2, SW=2, DH=1, DW=1, PT=1, PL=1, FQ_SCALE=0.0235, FQ_ZP=-5,
          FQ_MIN=-128, FQ_MAX=127, FQM_SCALE=0.031, FQM_ZP=3, FQM_MIN=-128, FQM_MAX=127, FQM=1,
          GM=9, GN=6, GK=36, GROUPS=2, LDA=8, LDC=12, GNP=8, CIG=4, COOPMAT=1, CM_WM=2, CM_WN=1, CM_TM=1,
          CM_TN=2, CM_SG=CM_SG, BM=32, BN=32, BK=32, KS=1, TM=1, TN=1, TILES_M=1, TILES_N=1, NWG=2)
# `make shaders`: the coopmat path of gemm.comp, with A and B stored as float16 (the only way it is used)
VARIANTS = {
    "gemm:coopmat": (_G, {"IM2COL": [0, 1], "VEC_A": [0, 1], "B_T": [0, 1], "HAS_BIAS": [0, 1], "RESIDUAL": [0, 1],
                          "ACT": [0, 3], "FQ": [0, 1], "CM_EMULATE": [0, 1]},
                     ["out_", "x", "w", "bias", "res"], {"x": "float16", "w": "float16"},
                     lambda d: dict(local_x=d["CM_WM"] * d["CM_WN"] * d["CM_SG"],
                                    vec4=tuple(n for n, on in (("x", d["VEC_A"]), ("w", not d["B_T"])) if on))),
}
