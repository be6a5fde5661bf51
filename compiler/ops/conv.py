"""CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED, AVERAGE_POOL_2D, MAX_POOL_2D."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from gpuc.compiler.codegen.kernel import Kernel
from gpuc.compiler import sym_shapes as D
from gpuc.compiler import symbolic as S
from gpuc.compiler.ops import NEUTRAL, SHAPE_ONLY, Why, declare, register, rules, template
from gpuc.compiler.ops.depthwise_plan import plan_depthwise, plan_variants, weights_in_registers
from gpuc.compiler.ops.epi_chain import apply_chain
from gpuc.compiler.ops import gemm_q8
from gpuc.compiler.ops.gemm_cm2 import cm2_variants
from gpuc.compiler.ops.gemm_coopmat import coopmat_variants, ln_reserve_bytes, small_m_variants, split_variants
from gpuc.compiler.ops import gemm_split, ln_fold
from gpuc.compiler.ops.gemm_split import IM2COL_FACTOR, conv_split_weights, split_kernels, split_of
from gpuc.compiler.ops.reduce import SUBGROUP_VARIANT
from gpuc.compiler.options import current
from gpuc.compiler.ops.util import (PADDING_SAME, PADDING_VALID, act_code, check_act, checked, epilogue,
                                    same_padding, size)
from gpuc.compiler.symbolic import hint, is_sym


def _bias(node, graph, n_out):
    if len(node.inputs) < 3 or node.inputs[2] < 0:
        return None
    b = graph.t(node.inputs[2])
    if b.size != n_out:
        raise ValueError(f"bias {b.name!r} has {b.size} elements, expected {n_out}")
    return node.inputs[2]


def window(node, graph, kh, kw):
    """Shared geometry of conv/pool: input/output NHWC dims, strides, dilation, leading pads."""
    x, y = graph.t(node.inputs[0]), graph.t(node.outputs[0])
    if len(x.shape) != 4 or len(y.shape) != 4:
        raise ValueError(f"input and output must be 4-D NHWC (got {list(x.shape)} -> {list(y.shape)})")
    a = node.attrs
    sh, sw = int(a.get("stride_h", 1) or 0), int(a.get("stride_w", 1) or 0)
    dh, dw = int(a.get("dilation_hfactor", 1) or 0), int(a.get("dilation_wfactor", 1) or 0)
    pad = int(a.get("padding", 0))
    if min(sh, sw, dh, dw) < 1:
        raise ValueError(f"strides ({sh},{sw}) and dilations ({dh},{dw}) must be >= 1")
    if pad not in (PADDING_SAME, PADDING_VALID):
        raise ValueError(f"padding {pad} not supported")
    n, h0, w0, c = x.shape
    et, eb, el, er = node.epilogue.pad or (0, 0, 0, 0)      # a PAD folded into this op (fold_pad pass)
    h, w = h0 + et + eb, w0 + el + er
    on, oh, ow, oc = y.shape
    if pad == PADDING_SAME:
        exp = (-(-h // sh), -(-w // sw))
    else:
        exp = ((h - (kh - 1) * dh - 1) // sh + 1, (w - (kw - 1) * dw - 1) // sw + 1)
    if on != n or (oh, ow) != exp:
        raise ValueError(f"output shape {list(y.shape)} does not match input {list(x.shape)} "
                         f"with kernel {kh}x{kw}, strides {sh}x{sw}, {'SAME' if pad == 0 else 'VALID'}")
    pt = et + same_padding(h, kh, sh, dh, oh, pad)
    pl = el + same_padding(w, kw, sw, dw, ow, pad)
    return dict(N=n, H=h0, W=w0, OH=oh, OW=ow, SH=sh, SW=sw, DH=dh, DW=dw, PT=pt, PL=pl), c, oc


@checked
def _check_conv(node, graph):
    if len(node.inputs) < 2 or node.inputs[1] < 0:
        return "missing filter input"
    f = graph.t(node.inputs[1])
    if len(f.shape) != 4:
        return f"filter {f.name!r} must be 4-D"
    dw = node.op == "DEPTHWISE_CONV_2D"
    geo, ci, co = window(node, graph, f.shape[1], f.shape[2])
    if dw:
        if f.shape[0] != 1 or f.shape[3] != co or co % ci:
            return f"depthwise filter {list(f.shape)} does not fit input channels {ci} -> {co}"
    elif f.shape[0] != co or f.shape[3] < 1 or ci % f.shape[3] or co % (ci // f.shape[3]):
        return f"filter {list(f.shape)} does not fit input channels {ci} -> {co}"
    _bias(node, graph, co)
    return check_act(node, graph)


# ---------------------------------------------------------------------------------------------------
# GEMM planning.  Every non-depthwise conv and every FULLY_CONNECTED is one `gemm` dispatch:
# out[m, g*GN + n] = sum_k A_g[m, k] * B_g[k, n] with M = N*OH*OW pixels (FC: rows), GN = CO per
# group, GK = KH*KW*CI per group.  The tile (BM x BN, register block TM x TN, K chunk BK, in-workgroup
# split-K KS) is picked per shape by a rough latency/throughput model of the target GPU (H100-like:
# 132 SMs, 2048 threads / 64K registers / 228 KiB shared memory per SM; 32 KiB per workgroup, the
# portable limit).
# The model only has to rank candidates; all of them are correct for any shape.

GPU_SMS = 132
SM_THREADS, SM_REGS, SM_SMEM, SM_WGS = 2048, 65536, 228 * 1024, 32
WG_SMEM = 32 * 1024          # per workgroup: H100 allows 48 KiB, lavapipe and mobile GPUs 32 KiB
MAX_THREADS = 256
GLOBAL_LATENCY = 600        # cycles: a K chunk's global loads are overlapped with the previous chunk
LAUNCH_CYCLES = 1500        # fixed cost of a dispatch (first load, epilogue store, barrier with the next)
L2_BYTES_PER_CYCLE = 2500   # tiles re-read A (once per column tile) and B (once per row tile) through L2
REG_FACTOR = 2              # registers of KS > 1 plans / counted (CompileOptions.reg_factor overrides it).  At 1 the model put 8x8 register blocks with
#                             in-workgroup split-K on most batch-1 transformer GEMMs, 1.3-2x slower than 8x4 ones:
#                             H100 sweep (2026-11-24) of 12 batch-1 ConvNeXt/Swin FC shapes, 38 forced plans
#                             each: the model's picks summed to 998 us, 809 us with 2 (best measured: 698 us).
#                             Applied to every plan it also cost batch-32 ResNet-50 15% (large KS=1 tiles).


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


def _relayout(graph, tid: int, kind: str, make):
    """A float32 constant derived from constant `tid` by `make()` (memoized per graph and `kind`, so
    weights shared by several ops stay shared)."""
    memo = graph.memo.relayout
    key = (tid, kind)
    if key not in memo:
        memo[key] = graph.add_const(f"{graph.t(tid).name}/{kind}", np.asarray(make(), np.float32))
    return memo[key]


def float_const(graph, tid) -> bool:
    t = graph.t(tid)
    return t.is_const and np.dtype(t.dtype).kind == "f"


def gemm_kernels(node, graph, *, M: int, GN: int, GK: int, G: int, lda: int, ldc: int, w_id: int,
                 w_kn: np.ndarray | None, bias, conv: dict | None, ignore=None, ln=None) -> list | None:
    """One `gemm` dispatch, or two where K is split across workgroups (ops/gemm_split.py).  `w_kn`: the
    weights as [G, GK, GN] when constant (re-laid out here into [G, GK, GNP] zero-padded to GNP % 4 == 0
    for vec4 loads), else None and the runtime weight tensor `w_id` is read as [G*GN, GK].  `conv`:
    implicit-GEMM geometry (None: A is x as [M, lda]).  `ln`: (eps, column sums tensor) of a LayerNorm
    folded in (ops/ln_fold.py; one dispatch, no split); None returned where the fold does not fit."""
    binds = [("out_", node.outputs[0]), ("x", node.inputs[0])]
    b_t = w_kn is None
    gnp = -(-GN // 4) * 4
    im2col = conv is not None and not conv.pop("_pointwise", False)
    cig = conv["CIG"] if conv else GK
    vec_a = (not is_sym(GK) and not is_sym(lda) and GK % 4 == 0 and lda % 4 == 0 and (G == 1 or cig % 4 == 0)
             and (not im2col or cig % 4 == 0))
    fixed = not any(is_sym(v) for v in (M, GN, GK))
    if ln is not None and not (fixed and vec_a and not b_t and conv is None and G == 1):
        return None
    variants = []
    if fixed and graph.precision == "fp16":      # the cooperative-matrix path (gemm_coopmat.py; its tile
        variants = coopmat_variants(M, GN, GK, G, gather=im2col and not vec_a)     # plans need fixed sizes)
        if variants and ln is None:     # + the workgroup-scope one first, where the device has it
            variants[:0] = cm2_variants(M, GN, GK)
    split, sp = 1, None                 # split-K across workgroups (ops/gemm_split.py; forced: even over them)
    if fixed and G == 1 and not b_t and ln is None and (not variants or current().split_k):
        split, sp = _split(M, GN, GK, vec_a, im2col, cig)
    if split > 1:
        variants = []
    elif fixed and graph.precision == "fp16" and not variants:     # small-M tensor-core candidates
        variants = small_m_variants(M, GN, GK, G, gather=im2col and not vec_a)
    if ln is not None and not variants:     # the fold pays with tensor cores only (ops/ln_fold.py)
        return None
    if b_t:
        binds.append(("w", w_id))
    elif split > 1 and im2col:          # split by input channels: the weights as S groups
        taps = GK // cig
        binds.append(("w", _relayout(graph, w_id, f"gemm_split{split}_kn{gnp}", lambda: np.pad(
            conv_split_weights(w_kn, taps, split), ((0, 0), (0, 0), (0, gnp - GN))))))
    else:
        binds.append(("w", _relayout(graph, w_id, f"gemm_kn{gnp}",
                                     lambda: np.pad(w_kn, ((0, 0), (0, 0), (0, gnp - GN))))))
    if bias is not None:
        binds.append(("bias", bias))
    p = plan_gemm(hint(M), hint(GN), hint(GK), G, vec_a, not b_t, im2col)     # (a dynamic size: its bound)
    if is_sym(GK) and p.KS > 1:         # (no split-K over a dynamic K: slices planned for the bound)
        p = dataclasses.replace(p, KS=1)
    assert p is not None, (M, GN, GK, G)
    if ln is not None:
        if 4 * p.smem_floats() + ln_reserve_bytes(p.BM) > WG_SMEM:
            return None
        binds.append(("lnc", ln[1]))
    tiles_m, tiles_n = -(-M // p.BM), -(-GN // p.BN)
    nwg = tiles_m * tiles_n * G
    defines = dict(GM=M, GN=GN, GK=GK, GROUPS=G, LDA=lda, LDC=ldc, GNP=gnp, BM=p.BM, BN=p.BN, BK=p.BK, TM=p.TM,
                   TN=p.TN, KS=p.KS, SV4=int(p.V4), TILES_M=tiles_m, TILES_N=tiles_n, NWG=nwg, VEC_A=int(vec_a),
                   B_T=int(b_t), IM2COL=int(im2col), HAS_BIAS=int(bias is not None),
                   **(epilogue(node, binds) if ignore is None else epilogue(node, binds, ignore=ignore)))
    if ln is not None:
        defines.update(LN_FOLD=1, LN_EPS=float(ln[0]))
    if im2col:
        defines.update({k: conv[k] for k in ("H", "W", "OH", "OW", "KW", "CIG", "SH", "SW", "DH", "DW", "PT", "PL")})
    vec4 = tuple(n for n, on in (("x", vec_a), ("w", not b_t)) if on)
    # the flat workgroup index is (row tile, group, column tile): item-major in units of a row of tiles
    # (rows m = item-major pixels or FC rows)
    k = Kernel("gemm", binds, nwg * p.threads, defines, node.label(), local_x=p.threads, vec4=vec4,
               item_inner=tiles_n * G)
    apply_chain(k, node, graph)         # a fused elementwise chain last (ops/epi_chain.py)
    k.variants += variants
    if split > 1:
        partial_variants = (split_variants(M, GN, GK // split, split, gather=im2col and not vec_a)
                            if graph.precision == "fp16" else [])
        return split_kernels(k, graph, split, sp, graph.t(node.outputs[0]).name, partial_variants)
    return [k]


def _split(M: int, N: int, K: int, vec_a: bool, im2col: bool, cig: int) -> tuple[int, object]:
    """(S, partial plan) of split-K across workgroups for a one-group gemm with constant weights
    (ops/gemm_split.py): rows split K in multiples of 8, implicit-GEMM convolutions split the input
    channels (vec4 A: into multiples of 4)."""
    if im2col and not gemm_split.CONV:
        return 1, None
    fits = (lambda s: cig % (s * (4 if vec_a else 1)) == 0) if im2col else None
    return split_of(M, N, K, lambda m, n, kk, g: plan_gemm(m, n, kk, g, vec_a, True, im2col),
                    lambda q, m, n, kk, g: gemm_cost(q, m, n, kk, g, vec_a, True, im2col), fits,
                    IM2COL_FACTOR if im2col else 1.0)


def depthwise_kernel(node, graph, geo: dict, ci: int, co: int, kh: int, kw: int, bias) -> Kernel:
    """One `depthwise` dispatch; the filter [1, KH, KW, CO] is used as it is ([KH][KW][CO])."""
    w_id = node.inputs[1]
    if float_const(graph, w_id) and graph.t(w_id).dtype != "float32":
        w_id = _relayout(graph, w_id, "f32", lambda: graph.t(node.inputs[1]).data)
    binds = [("out_", node.outputs[0]), ("x", node.inputs[0]), ("w", w_id)]
    if bias is not None:
        binds.append(("bias", bias))
    mult = co // ci
    cg = -(-co // 4)
    vec_ok = co % 4 == 0 and mult == 1         # vec4 views of every binding work
    plan = plan_depthwise(*(hint(geo[k]) for k in ("N", "OH", "OW")), co, kh, kw,     # (speed only: at the bound)
                          geo["SH"], geo["SW"], geo["DH"], geo["DW"], vec=vec_ok)
    oxb = -(-geo["OW"] // plan.px)
    vec = vec_ok and not plan.scalar
    defines = dict(geo, CI=ci, CO=co, KH=kh, KW=kw, MULT=mult, PX=plan.px, CG=cg, OXB=oxb, VEC=int(vec),
                   TILE=plan.tile, HAS_BIAS=int(bias is not None), **epilogue(node, binds))
    if plan.tile:
        oyb = -(-geo["OH"] // plan.ry)
        defines.update(RY=plan.ry, OYB=oyb, WREG=int(weights_in_registers(kh, kw, vec)))
        invocations = geo["N"] * oyb * oxb * (cg if vec else co)
    else:
        invocations = geo["N"] * geo["OH"] * oxb * cg
    vec4 = ("out_", "x", "w", "bias", "res") if vec else ()
    k = Kernel("depthwise", binds, invocations, defines, node.label(), vec4=vec4,
               variants=plan_variants(plan, geo["N"], geo["OH"], geo["OW"], co, kh, kw, vec_ok))
    return apply_chain(k, node, graph)     # a fused elementwise chain last (ops/epi_chain.py)


@register("CONV_2D", "DEPTHWISE_CONV_2D", check=_check_conv, inputs=(2, 3), optional=(2,), summary="NHWC conv, groups, dilation, SAME/VALID")
def lower_conv(node, graph):
    f = graph.t(node.inputs[1])
    kh, kw = f.shape[1], f.shape[2]
    geo, ci, co = window(node, graph, kh, kw)
    bias = _bias(node, graph, co)
    if node.op == "DEPTHWISE_CONV_2D":
        return [depthwise_kernel(node, graph, geo, ci, co, kh, kw, bias)]
    cig = f.shape[3]
    groups = ci // cig
    cog = co // groups
    gk = kh * kw * cig
    w_kn = None
    if float_const(graph, node.inputs[1]):     # [CO, KH, KW, CIG] -> [G, KH*KW*CIG, COG]
        w_kn = np.asarray(f.data, np.float32).reshape(groups, cog, gk).transpose(0, 2, 1)
    pointwise = (kh == kw == 1 and geo["SH"] == geo["SW"] == 1 and geo["PT"] == geo["PL"] == 0
                 and geo["OH"] == geo["H"] and geo["OW"] == geo["W"])
    conv = dict(geo, CIG=cig, KW=kw, _pointwise=pointwise)
    return gemm_kernels(node, graph, M=geo["N"] * geo["OH"] * geo["OW"], GN=cog, GK=gk, G=groups, lda=ci, ldc=co,
                        w_id=node.inputs[1], w_kn=w_kn, bias=bias, conv=conv)


@checked
def _check_fc(node, graph):
    if len(node.inputs) < 2 or node.inputs[1] < 0:
        return "missing weights input"
    if int(node.attrs.get("weights_format", 0)) != 0:
        return "shuffled weights format not supported"
    x, w, y = graph.t(node.inputs[0]), graph.t(node.inputs[1]), graph.t(node.outputs[0])
    if len(w.shape) != 2 or w.shape[1] < 1 or x.size % w.shape[1]:
        return f"weights {list(w.shape)} do not fit input {list(x.shape)}"
    if y.size != x.size // w.shape[1] * w.shape[0]:
        return f"output {list(y.shape)} does not fit input {list(x.shape)} and weights {list(w.shape)}"
    _bias(node, graph, w.shape[0])
    return check_act(node, graph, allowed=(0, 1, 2, 3))


@register("FULLY_CONNECTED", check=_check_fc, inputs=(2, 4), optional=(2,), summary="dense layer, any leading dims, optional bias")
def lower_fc(node, graph):
    w = graph.t(node.inputs[1])
    o, k = w.shape
    bias = _bias(node, graph, o)
    if node.attrs.get(gemm_q8.ATTR) and w.dtype == "int8":       # int8 weights kept (passes/quant.py)
        return gemm_q8.q8_kernels(node, graph, bias)
    rows = size(graph.t(node.outputs[0]).shape) // o
    if ln_fold.LN_ATTR in node.attrs:             # a LayerNorm folded in (ops/ln_fold.py)
        return ln_fold.folded_fc(node, graph, bias, lambda w_id, w_kn, b, ln: gemm_kernels(
            node, graph, M=rows, GN=o, GK=k, G=1, lda=k, ldc=o, w_id=w_id, w_kn=w_kn, bias=b, conv=None,
            ignore=(), ln=ln), lower_fc)
    w_kn = np.asarray(w.data, np.float32).T[None] if float_const(graph, node.inputs[1]) else None
    return gemm_kernels(node, graph, M=rows, GN=o, GK=k, G=1, lda=k, ldc=o, w_id=node.inputs[1], w_kn=w_kn,
                        bias=bias, conv=None, ignore=())


@checked
def _check_pool(node, graph):
    kh, kw = int(node.attrs.get("filter_height", 0)), int(node.attrs.get("filter_width", 0))
    if kh < 1 or kw < 1:
        return f"filter size {kh}x{kw} must be >= 1"
    _, c, oc = window(node, graph, kh, kw)
    if c != oc:
        return "pooling must keep the channel count"
    return check_act(node, graph)


@register("AVERAGE_POOL_2D", "MAX_POOL_2D", check=_check_pool, inputs=(1, 1), summary="2-D pooling, SAME/VALID")
def lower_pool(node, graph):
    kh, kw = int(node.attrs["filter_height"]), int(node.attrs["filter_width"])
    geo, c, _ = window(node, graph, kh, kw)
    geo.pop("DH"), geo.pop("DW")
    defines = dict(geo, C=c, KH=kh, KW=kw, OP=int(node.op == "MAX_POOL_2D"), ACT=act_code(node))
    if node.epilogue.pad is not None:    # a PAD folded in (passes/fusion.py fold_pad_pool): its cells count
        defines.update(FOLDED_PAD=1, PAD_VALUE=float(node.epilogue.pad_value),
                       **dict(zip(("EPT", "EPB", "EPL", "EPR"), node.epilogue.pad)))
    binds = [("out_", node.outputs[0]), ("x", node.inputs[0])]
    outputs = size(graph.t(node.outputs[0]).shape)
    if kh * kw < POOL_WG_MIN:
        return [Kernel("pool2d", binds, outputs, defines, node.label())]
    # large windows (global pools): one workgroup per output element (shaders/pool2d.comp WG_PER_OUT)
    local = 256 if kh * kw >= 4096 else 128 if kh * kw >= 1024 else 64
    k = Kernel("pool2d", binds, outputs * local, dict(defines, WG_PER_OUT=1, OUTPUTS=outputs), node.label(),
               local_x=local)
    k.variants.append(SUBGROUP_VARIANT)
    return [k]


POOL_WG_MIN = 256            # window cells from which a workgroup computes each output (H100: a global
#                              average pool over 128x128 took 306 us with one invocation per output)


# --- facts (compiler/ops/__init__.py FACT_FIELDS) ---------------------------------------------------
def window_sym(node, graph, values=None):
    x, shapes = D.in_shapes(node, graph)[0], D.in_shapes(node, graph)
    a = node.attrs
    if len(x) != 4:
        D.refuse(node, graph, "a rank other than 4")
    if node.op in ("CONV_2D", "DEPTHWISE_CONV_2D"):
        w = shapes[1]
        kh, kw = w[1], w[2]
        co = w[0] if node.op == "CONV_2D" else w[3]
        if D.is_dyn(x[3]):
            D.refuse(node, graph, "a dynamic channel count")
        dh, dw = int(a.get("dilation_h_factor", 1) or 1), int(a.get("dilation_w_factor", 1) or 1)
    else:
        kh, kw = int(a.get("filter_height", 1)), int(a.get("filter_width", 1))
        co, dh, dw = x[3], 1, 1
    sh, sw = int(a.get("stride_h", 1) or 1), int(a.get("stride_w", 1) or 1)
    return [[x[0], D.spatial(node, graph, x[1], kh, sh, dh), D.spatial(node, graph, x[2], kw, sw, dw), co]]


def _fc_sym(node, graph, values=None):
    x, w = D.in_shapes(node, graph)[:2]
    if D.is_dyn(x[-1]):
        D.refuse(node, graph, "a dynamic input depth (the weights fix it)")
    if node.attrs.get("keep_num_dims"):
        return [x[:-1] + [w[0]]]
    return [[S.prod(x[:-1]), w[0]]]


def _fc_shape(node, vals, graph, need=None):
    x = vals[0]
    n, k = graph.t(node.inputs[1]).shape[0], graph.t(node.inputs[1]).shape[-1]
    shape = list(x.shape[:-1]) + [n] if node.attrs.get("keep_num_dims") else [x.size // k, n]
    return [rules.placeholder(shape, rules.out_dtype(node, graph))]


def _conv_flops(node, graph):
    """Multiply-adds count 2: per output element, the filter taps (times the input channels of a group)."""
    if len(node.inputs) < 2:
        return rules.per_output(node, graph)
    w = graph.t(node.inputs[1]).shape
    return 2 * graph.t(node.outputs[0]).size * w[1] * w[2] * (w[3] if node.op == "CONV_2D" else 1)


def _fc_flops(node, graph):
    if len(node.inputs) < 2:
        return rules.per_output(node, graph)
    return 2 * graph.t(node.outputs[0]).size * graph.t(node.inputs[1]).shape[-1]          # weights [N, K]


_NO_HOST = Why("no host rule: the symbolic rule gives its shape")
_COMMON = dict(exact=SHAPE_ONLY, batch="merge", pieces=Why("computes values"), fp16=NEUTRAL, in_place=False)
declare("CONV_2D", shape=_NO_HOST, sym_shape=window_sym, templates=("gemm",), flops=_conv_flops,
        cpu=Why("no CPU kernel: LiteRT's float conv is what the GPU runs"), **_COMMON)
declare("DEPTHWISE_CONV_2D", shape=_NO_HOST, sym_shape=window_sym, templates=("depthwise",), flops=_conv_flops,
        cpu=Why("no CPU kernel: LiteRT's float depthwise conv is what the GPU runs"), **_COMMON)
declare("FULLY_CONNECTED", shape=_fc_shape, sym_shape=_fc_sym, templates=("gemm", "gemm_q8"), flops=_fc_flops,
        cpu=Why("no CPU kernel: the GPU runs every float FC"), **_COMMON)
declare("AVERAGE_POOL_2D", "MAX_POOL_2D", shape=_NO_HOST, sym_shape=window_sym, templates=("pool2d",),
        flops=rules.per_output, cpu=Why("no CPU kernel: the GPU runs every float pool"), **_COMMON)
template("gemm", item_major=False, flat=False, in_place=("res",))
template("depthwise", item_major=True, flat=False, in_place=("res",))
template("pool2d", item_major=True, flat=False)
