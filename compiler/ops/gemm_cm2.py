"""The workgroup-scope cooperative-matrix gemm (shaders/gemm_cm2.spvasm, VK_NV_cooperative_matrix2).

On a device with VK_NV_cooperative_matrix2 (workgroup scope, flexible dimensions, tensor addressing), a
fp16 gemm dispatch whose shape and epilogue fit runs as one workgroup-scope BM x BN accumulator per
workgroup, the K loop in BM x BK by BK x BN float16 tiles loaded straight from the buffers through
tensor layouts (the driver stages and pipelines them; edges are clamped to zero on load and dropped on
store).  It is the first variant of such a dispatch (runtime/variants.py takes the first whose
requirements hold), ahead of the subgroup-scope `coopmat` ones (ops/gemm_coopmat.py), which every
other device with VK_KHR_cooperative_matrix runs.

What fits (`eligible`, judged on the final kernel, after every epilogue fusion): A read directly (no
im2col gather), one group, constant weights re-laid out as [GK][GNP] (B_T=0), and an epilogue of
at most + bias[n], a ReLU-family activation (RELU, RELU_N1_TO_1, RELU6), + residual and a second such
activation (the activations per element: VK_NV_cooperative_matrix2's per-element operations, a requirement
of their own); other activations, chains and fake-quant take the `coopmat` path.
Output, bias and residual may be float16 or float32; sums are fp32.  Which shapes (`worthwhile`: K >=
MIN_K) and which tile (`plan_for`: BIG or SMALL) follow the H100 measurements noted at BIG / SMALL.
"""
from __future__ import annotations

import dataclasses

from gpuc.compiler.codegen.kernel import KernelVariant
from gpuc.compiler.ew_table import ACT
from gpuc.compiler.ops import template
from gpuc.compiler.ops.util import ACT_BOUNDS
from gpuc.compiler.options import current

TEMPLATE = "gemm_cm2"


@dataclasses.dataclass(frozen=True)
class Cm2Plan:
    BM: int
    BN: int
    BK: int
    invocations: int

    def tiles(self, M: int, N: int) -> int:
        """Workgroups (output tiles) of an M x N gemm."""
        return -(-M // self.BM) * -(-N // self.BN)


# Tiles, measured on the H100 (2026-11-24).  BIG: 128 x 256 by 256 invocations, BK 32, where the tiles fill
# the GPU twice over and K >= 1024: at 4096^3 274-294 TFLOP/s (128 x 128 by 128 invocations 266-288,
# 256 x 128 242-270, 64 x 64 163-168; the subgroup-scope `coopmat` kernel 135), 8192^3 297 (141), 4096 x
# 4096 x 1024 198 (126), 3072^3 197 (106) (benchmarks/archive/coopmat2_sweep.py).  Larger tiles or BK 64 by 128
# invocations collapsed (20-100: the accumulator no longer fits).  SMALL: 64 x 64 by 128 invocations,
# everywhere else with K >= MIN_K: in a 7x7-depthwise CNN and a windowed-attention transformer at batch 32
# (benchmarks/archive/coopmat2_models_ab.py, each layer shape summed over the model) it took 6272 x 384 x 1536
# 942 -> 690 us and 627 -> 462, 25088 x 192 x 768 302 -> 265, 1568 x 768 x 3072 297 -> 240, 1568 x 3072 x 768
# 240 -> 215, 6272 x 384 x 768 58 -> 46, equal or better than 128 x 128 by 256 invocations on most; with
# K <= 384 it lost everywhere (6272 x 1536 x 384 674 -> 717, 100352 x 384 x 96 307 -> 505, 25088 x 768 x 192
# 249 -> 347).
BIG = Cm2Plan(128, 256, 32, 256)
SMALL = Cm2Plan(64, 64, 32, 128)
# Other tiles each eligible gemm carries as `measured` candidates (runtime/tuning.py times them at first load):
# the rule above was fitted on few shapes, and a batch-32 vision transformer's FCs (6304 x 2304 x 768, 6304 x
# 3072 x 768) ran SMALL at 128 TFLOP/s on the H100 where cuBLAS ran 550; 128 x 128 by 128 invocations reached
# 266-288 at 4096^3.  Off (CompileOptions.tune_candidates = 0) with the other measured plans.  BK 64 and 96-row
# tiles: in a sweep of that transformer's FC shapes (H100, 2026-11-28, every eligible plan forced, with bias)
# 6304 x 768 x 3072 ran 151 TFLOP/s as 128 x 128 x 64 by 256 invocations and 142 as 96 x 128 x 32 by 128, against
# 111-125 for the plans above; 6304 x 3072 x 768 140 as 96 x 128, 146 as BIG.
# BK 64 only at depth K >= DEEP_K: re-measured (H100, 2026-11-28, session 19) it lost at K = 768 (6304 x 3072 x 768
# 133 TFLOP/s against BIG's 145, 6304 x 768 x 768 44 against 71) and won at 3072 (151 against 123), so shallower gemms
# no longer spend first-load tuning time on it.
ALTERNATIVES = (BIG, Cm2Plan(128, 128, 32, 128), Cm2Plan(128, 128, 32, 256), SMALL, Cm2Plan(128, 128, 64, 256),
                Cm2Plan(96, 128, 32, 128))
MIN_WAVES, BIG_K, MIN_K, SMS, DEEP_K = 2, 1024, 768, 132, 1536
ALIGN = True                       # tell the driver where rows start 16-byte aligned (benchmarks A/B it)


# activation code (compiler/ew_table.py) -> (clamps, low, high) of the template's per-element function
ACTS = {ACT[name]: (int(hi is not None), lo, 0.0 if hi is None else hi) for name, (lo, hi) in ACT_BOUNDS.items()}


def act_defines(code: int, prefix: str) -> dict | None:
    """The template's defines for activation `code` after the bias (ACT) or the residual (ACT2); None where it
    has none of ACTS' form."""
    if not code:
        return {f"{prefix}_ON": 0, f"{prefix}_CLAMP": 0, f"{prefix}_LO": 0.0, f"{prefix}_HI": 0.0}
    if code not in ACTS:
        return None
    clamp, lo, hi = ACTS[code]
    return {f"{prefix}_ON": 1, f"{prefix}_CLAMP": clamp, f"{prefix}_LO": lo, f"{prefix}_HI": hi}


# A gemm with an activation offers this kernel only as measured candidates (runtime/tuning.py keeps one where it is
# faster), after its subgroup-scope ones (ops/gemm_dispatch.py): by default every tile, as for other gemms
# (CompileOptions.cm2_act_candidates: 0 none, 1 the rule's plan, 2 every tile; a forced cm2_plan takes it).  H100,
# 2026-11-28, session 19, batch-32 fp16 GPU time, one load each: the layers that took it were faster in both CNNs
# measured (an Inception-style CNN's 16 ReLU 1x1 convolutions 784 -> 446 us, a bottleneck CNN's 3 162 -> 143), and
# the Inception-style run 6.058 -> 5.883 ms; but the bottleneck CNN's first-load tuning kept slower plans for layers
# this does not touch (3.832 and 3.926 ms in two loads, against 3.742-3.745 without), so it was off.  H200, session
# 20 (each load with the tuning cache cleared, tuned run GPU time, without -> with): the bottleneck CNN 3.747-3.756
# -> 3.713-3.715 ms in three loads each, the Inception-style one 6.054-6.056 -> 5.868-5.905, a basic-block CNN
# 1.832-1.834 -> 1.833, a dense-block CNN 5.160-5.293 -> 5.179-5.181, an Inception-v1-style one 2.025-2.029 ->
# 2.032-2.036 (two loads each): never the H100's loss, so on.


def _mem(aligned: bool) -> str:
    return "Aligned 16" if aligned and ALIGN else "None"


def _epilogue_acts(d: dict) -> dict | None:
    """The template's ACT_* and ACT2_* defines for the plain gemm kernel's defines `d`; None where either
    activation has none of ACTS' form."""
    a1, a2 = act_defines(d.get("ACT", 0), "ACT"), act_defines(d.get("ACT2", 0), "ACT2")
    return None if a1 is None or a2 is None else {**a1, **a2}


def eligible(d: dict) -> bool:
    """Whether the plain gemm kernel with defines `d` has a gemm_cm2 form."""
    return (not d.get("IM2COL") and d.get("GROUPS", 1) == 1 and not d.get("B_T") and not d.get("FQ")
            and not d.get("EPI_CHAIN") and _epilogue_acts(d) is not None)


def plan_for(M: int, N: int, K: int) -> Cm2Plan:
    """CompileOptions.cm2_plan where given (benchmarks, tests: every eligible gemm with that plan)."""
    force = current().cm2_plan
    if force is not None:
        return force
    big_tiles = BIG.tiles(M, N)
    return BIG if big_tiles >= MIN_WAVES * SMS and K >= BIG_K else SMALL


def fills(M: int, N: int, K: int) -> bool:
    """Whether plan_for's tiles fill the GPU at least once (SMS)."""
    return plan_for(M, N, K).tiles(M, N) >= SMS


def worthwhile(M: int, N: int, K: int) -> bool:
    """Where the workgroup-scope kernel beat the subgroup-scope one on the H100 (the notes above)."""
    return current().cm2_plan is not None or K >= MIN_K


def cm2_kernel(k, plan: Cm2Plan | None = None, acts: bool = False):
    """The gemm_cm2 kernel for plain gemm kernel `k` (same bindings) tiled by `plan` (default plan_for's),
    or None where it does not fit; `acts`: the variant requires the per-element operations (else an
    epilogue with an activation does not fit either)."""
    d = k.defines
    if not eligible(d):
        return None
    act_d = _epilogue_acts(d)
    if (act_d["ACT_ON"] or act_d["ACT2_ON"]) and not acts:
        return None
    p = plan or plan_for(d["GM"], d["GN"], d["GK"])
    tiles_m, tiles_n = -(-d["GM"] // p.BM), -(-d["GN"] // p.BN)
    defines = dict(GM=d["GM"], GN=d["GN"], GK=d["GK"], LDA=d["LDA"], LDC=d["LDC"], GNP=d["GNP"], BM=p.BM, BN=p.BN,
                   BK=p.BK, TILES_N=tiles_n, NWG=tiles_m * tiles_n, HAS_BIAS=int(bool(d.get("HAS_BIAS"))),
                   RESIDUAL=int(bool(d.get("RESIDUAL"))), K_FULL=d["GK"] // p.BK * p.BK, MEM_A=_mem(d["LDA"] % 8 == 0),
                   MEM_B=_mem(d["GNP"] % 8 == 0), MEM_C=_mem(d["LDC"] % 8 == 0), **act_d)
    return dataclasses.replace(k, template=TEMPLATE, defines=defines, invocations=tiles_m * tiles_n * p.invocations,
                               local_x=p.invocations, vec4=(), variants=[], item_inner=tiles_n)


def requires(M: int, N: int, K: int, plan: Cm2Plan | None = None, acts: bool = False) -> dict:
    p = plan or plan_for(M, N, K)
    r = {"cooperative_matrix2": [p.BM, p.BN, p.BK, p.invocations], "fp16_storage": True}
    if acts:
        r["cooperative_matrix2_per_element"] = True
    return r


def cm2_variants(M: int, N: int, K: int, acts: bool = False) -> list:
    """[the gemm_cm2 variant, then the ALTERNATIVES tiles as measured candidates] for a gemm of this shape
    where it pays; whether the final kernel has that form (`eligible`: no im2col, one group, constant
    weights, a plain epilogue) is decided when it is made.  An alternative is offered where its tiles fill
    the GPU at least once (SMS), it is not the rule's own plan, and its BK is 32 or K >= DEEP_K.  `acts`:
    the gemm's epilogue has an activation: the variants then require the per-element operations; with
    CompileOptions.cm2_plan forcing a plan, that one first, else CompileOptions.cm2_act_candidates measured
    candidates (every tile by default, see the note above)."""
    if not worthwhile(M, N, K):
        return []
    forced = current().cm2_plan is not None
    n_acts = current().cm2_act_candidates
    if acts and not forced and (n_acts <= 0 or current().tune_candidates <= 0):
        return []
    first = plan_for(M, N, K)
    out = [KernelVariant("coopmat2", requires(M, N, K, acts=acts), lambda k: cm2_kernel(k, None, acts),
                         f16_bindings=("x", "w"), measured=acts and not forced)]
    if acts and not forced and n_acts == 1:
        return out
    if not forced and current().tune_candidates > 0:
        for p in ALTERNATIVES:
            if p != first and p.tiles(M, N) >= SMS and (p.BK <= 32 or K >= DEEP_K):
                out.append(KernelVariant("coopmat2", requires(M, N, K, p, acts), lambda k, p=p: cm2_kernel(k, p, acts),
                                         f16_bindings=("x", "w"), measured=True))
    return out


_S = dict(GM=40, GN=24, GK=48, LDA=48, LDC=24, GNP=24, BM=32, BN=16, BK=16, TILES_N=2, NWG=4, MEM_A="Aligned 16",
          MEM_B="None", MEM_C="Aligned 16", K_FULL=48, ACT_CLAMP=1, ACT_LO=0.0, ACT_HI=6.0, ACT2_CLAMP=0, ACT2_LO=0.0,
          ACT2_HI=0.0)
_PATHS = {"HAS_BIAS": [0, 1], "RESIDUAL": [0, 1], "ACT_ON": [0, 1], "ACT2_ON": [0, 1]}
# `make shaders`: every path of the template, float16 and float32 output / bias / residual
VARIANTS = {
    "gemm_cm2": (_S, _PATHS, ["out_", "x", "w", "bias", "res"], {"x": "float16", "w": "float16"},
                 lambda d: dict(local_x=128)),
    "gemm_cm2:f16": (_S, _PATHS, ["out_", "x", "w", "bias", "res"],
                     {"out_": "float16", "x": "float16", "w": "float16", "bias": "float16", "res": "float16"},
                     lambda d: dict(local_x=128)),
}


template(TEMPLATE, item_major=False, flat=False)   # (a variant of gemm's dispatches, chosen at load)
