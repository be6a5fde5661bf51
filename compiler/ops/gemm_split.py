"""Split-K across workgroups: a gemm with too few output tiles to fill the GPU (batch-1 transformer layers:
M = 49..196 rows against K = 768..3072) becomes two dispatches.  The first computes S partial products,
each over K / S of the depth, as S groups of the one gemm (gemm.comp's GROUPS: group s reads A's columns
and B's rows [s*K/S, (s+1)*K/S), both laid out so that this is the group offset) into a float32 scratch
tensor [M, S*N]; the second (gemm.comp SPLIT_REDUCE = S) sums the S partials of each output in order
and runs the gemm's whole epilogue (bias, activation, residual, chain, fake-quant) on the sum.

Only where the groups can express the split: one group of constant weights, fixed sizes, and either
A read as rows (FC, 1x1 convolutions: B [K][GNP] as it is, S dividing K into multiples of 8) or an
implicit-GEMM convolution (im2col gather), split by input channels: a convolution over CI channels is
the grouped convolution of S groups of CI / S channels each writing all N outputs, so group s gathers
channels [s*CI/S, (s+1)*CI/S) of every tap (gemm.comp's CIG = CI / S, LDA = CI) against weights
re-laid out as [S][KH*KW*CI/S][GNP] (conv_split_weights); S divides CI into multiples of 4 where A is
read as vec4.  Under --precision fp16 the partial dispatch also carries small-tile cooperative-matrix
plans (gemm_candidates.split_variants) as `measured` candidates: the device times them at first load.  S is picked by
ops/gemm_plan.py gemm_cost for the partial dispatch (S groups of depth K / S) against the one-dispatch plan,
with the threshold and margin measured below; CompileOptions.split_k (benchmarks/archive/split_k_sweep.py) fixes it.
"""
from __future__ import annotations

import dataclasses

from gpuc.compiler.codegen.kernel import Kernel
from gpuc.compiler.options import current

CHOICES = (2, 4, 8, 16)
MIN_DEPTH = 64            # K / S at least this
# Fitted on the H100 (benchmarks/archive/split_k_sweep.py, 2026-11-24, 9 batch-1 FC shapes, each split forced):
# the split won where the one-dispatch plan's modelled cost was 20.9k cycles or more (196 x 384 x 1536:
# 41.1 -> 21.5 us; 49 x 768 x 3072: 32.0 -> 21.8; 197 x 768 x 3072: 81.1 -> 54.4; 49 x 3072 x 768 and
# 197 x 3072 x 768: 26.4 -> 21.5, 69.7 -> 58.4) and lost or tied below 19.1k (784 x 768 x 192: 21.6 ->
# 25.6; 196 x 1536 x 384: 19.5 -> 23.6; 1 x 1000 x 768: 4.7 -> 7.0): the second dispatch costs ~2-4 us.
# Implicit-GEMM convolutions took ~1.5x longer per modelled cycle than FCs at batch 1 (H100 profile, 2026-11-26,
# results/nvidia-h100-2026-11-26-s7-b1-fp16-profile-cost-model.json: a 3x3 conv of 512 channels at 7x7
# (49 x 512 x 4608) 57 us at 28.2k modelled cycles, the FC 49 x 768 x 3072 32 us at 23.4k): their modelled
# costs are scaled by this.
IM2COL_FACTOR = 1.5
# ... for a float32 program 2.0: its small-M convolutions run only the plain kernel, which took ~2x longer per
# modelled cycle than an FC (H100, 2026-11-27, benchmarks/archive/split_factor_ab.py, batch-1 GPU time with 1.5 /
# 2.0: a CNN of 7x7-depthwise blocks and 2x2 stride-2 downsamplings 1.065 / 1.058 ms, one such downsampling,
# 49 x 768 x 1536, at 37 us for 13.3k cycles; a CNN of 1x7 / 7x1 factorised convolutions 1.517 / 1.454 ms).  A
# float16 program keeps 1.5: there the one dispatch also carries measured tensor-core candidates the model does not
# see (the factorised 1x7 convolutions split at 2.0 took their CNN from 1.064 to 1.404 ms; the downsampling CNN
# 0.683 -> 0.669) -- except for a split of at least FP16_RETRY_MIN_S parts whose depth K / S is whole 32-deep
# tensor-core chunks (fp16_retry_fits): the factorised CNN's lost ones had parts of 72 and 84 (padded chunks) or
# S = 2 (1.030 -> 1.044 ms), the 2x2 stride-2 downsamplings won at S = 4, 8, 16 with parts of 96 (0.686 -> 0.671
# ms; the second A/B in split_factor_ab's results file).
IM2COL_FACTOR_FP32 = 2.0
FP16_RETRY_MIN_S = 4
FP16_RETRY_DEPTH = 32


def fp16_retry_fits(K: int, fits):
    """The parts a float16 program's convolution may split into at IM2COL_FACTOR_FP32 where IM2COL_FACTOR kept it
    whole: `fits` and at least FP16_RETRY_MIN_S parts of whole FP16_RETRY_DEPTH-deep chunks."""
    return lambda s: fits(s) and s >= FP16_RETRY_MIN_S and K % s == 0 and (K // s) % FP16_RETRY_DEPTH == 0


def im2col_factor(precision: str) -> float:
    """The modelled-cost factor of implicit-GEMM convolutions in a program of `precision` (see IM2COL_FACTOR)."""
    return IM2COL_FACTOR if precision == "fp16" else IM2COL_FACTOR_FP32


IDLE = True               # fp16 gemms with tensor-core plans that leave SMs idle (gemm_candidates.underfilled) may split
CONV = True               # implicit-GEMM convolutions split too (CompileOptions.split_k_conv overrides it)
MIN_CYCLES = 20000        # the one-dispatch plan's cost (ops/gemm_plan.py gemm_cost) from which a split may pay
GAIN = 0.85               # ... and the split's modelled cost at most this fraction of it


def conv_splits() -> bool:
    """Whether implicit-GEMM convolutions may split: CompileOptions.split_k_conv, else CONV (off: the
    one-dispatch plans, for benchmarks/small_m_ab.py)."""
    f = current().split_k_conv
    return CONV if f is None else f


def split_of(M: int, N: int, K: int, plan, cost, fits=None, factor: float = 1.0) -> tuple[int, object]:
    """(S, plan of the partial dispatch) of least modelled time; (1, None) when one dispatch is cheaper.
    plan(M, N, K, G) -> GemmPlan, cost(plan, M, N, K, G) -> cycles (ops/gemm_plan.py); fits(S): whether the
    groups express an S-way split (default: K in multiples of 8 per part); factor: scales every cost."""
    fits = fits or (lambda s: K % (8 * s) == 0)
    options = [s for s in CHOICES if fits(s) and K % s == 0 and K // s >= MIN_DEPTH]
    force = current().split_k           # benchmarks, tests: this split where it applies (1: none)
    if force is not None:
        return (force, plan(M, N, K // force, force)) if force in options else (1, None)
    one = cost(plan(M, N, K, 1), M, N, K, 1) * factor
    best, best_cost = (1, None), one * GAIN
    if one < MIN_CYCLES:
        return best
    for s in options:
        p = plan(M, N, K // s, s)
        c = cost(p, M, N, K // s, s) * factor
        if c < best_cost:
            best, best_cost = (s, p), c
    return best


CONV_GEOMETRY = ("H", "W", "OH", "OW", "KW", "SH", "SW", "DH", "DW", "PT", "PL")


def conv_split_weights(w_kn, taps: int, s: int):
    """Implicit-GEMM weights [1, taps*CI, N] (k = (tap, ci)) as the S groups of a channel split:
    [S, taps*CI/S, N], group j holding channels [j*CI/S, (j+1)*CI/S) of every tap."""
    _, k, n = w_kn.shape
    return w_kn.reshape(taps, s, k // taps // s, n).transpose(1, 0, 2, 3).reshape(s, k // s, n)


def split_kernels(k: Kernel, graph, s: int, p, out_name: str, variants=()) -> list:
    """[partials, reduce] for the one-dispatch gemm kernel `k` (bindings out_, x, w, then its epilogue's),
    split s ways with partial plan p.  An implicit-GEMM convolution (IM2COL) splits by input channels:
    `k` must bind w to the weights as conv_split_weights lays them out.  `variants`: the partial
    dispatch's KernelVariants."""
    d = k.defines
    M, N, K = d["GM"], d["GN"], d["GK"]
    scratch = graph.add_tensor(f"{out_name}/split{s}", (M, s * N), "float32")
    tiles_m, tiles_n = -(-M // p.BM), -(-N // p.BN)
    geometry = {n: d[n] for n in ("LDA", "GNP", "VEC_A", "B_T", "IM2COL")}
    if d["IM2COL"]:
        geometry.update({n: d[n] for n in CONV_GEOMETRY}, CIG=d["CIG"] // s)
    partial = Kernel("gemm", [("out_", scratch)] + k.bindings[1:3], tiles_m * tiles_n * s * p.threads,
                     dict(geometry, GM=M, GN=N, GK=K // s, GROUPS=s, LDC=s * N, BM=p.BM, BN=p.BN, BK=p.BK, TM=p.TM,
                          TN=p.TN, KS=p.KS, SV4=int(p.V4), TILES_M=tiles_m, TILES_N=tiles_n,
                          NWG=tiles_m * tiles_n * s, HAS_BIAS=0, ACT=0, RESIDUAL=0, EPI_CHAIN=0),
                     k.label, local_x=p.threads, vec4=k.vec4, item_inner=tiles_n * s, variants=list(variants))
    reduce = dataclasses.replace(k, bindings=[k.bindings[0], ("x", scratch)] + k.bindings[2:], invocations=M * N,
                                 defines=dict(d, SPLIT_REDUCE=s, VEC_A=0), local_x=64,
                                 vec4=tuple(v for v in k.vec4 if v != "x"), item_inner=1, variants=[])
    return [partial, reduce]
