"""The `gemm` dispatch of a convolution or FULLY_CONNECTED (ops/conv.py, ops/batch_matmul.py): its
bindings, its weights re-laid out as the shader reads them, the tile plan (ops/gemm_plan.py) and the
shader's defines; the fp16 cooperative-matrix variants it carries; and where K is split across workgroups,
the choice of the split and its two dispatches (ops/gemm_split.py)."""
from __future__ import annotations

import dataclasses

import numpy as np

from gpuc.compiler.codegen.kernel import Kernel
from gpuc.compiler.ops import gemm_cm2, gemm_split, grouped_conv
from gpuc.compiler.ops.epi_chain import apply_chain
from gpuc.compiler.ops.gemm_cm2 import cm2_variants
from gpuc.compiler.ops.gemm_candidates import coopmat_variants, small_m_variants, split_variants, underfilled
from gpuc.compiler.ops.gemm_coopmat import ln_reserve_bytes
from gpuc.compiler.ops.gemm_plan import WG_SMEM, gemm_cost, plan_gemm
from gpuc.compiler.ops.gemm_split import conv_split_weights, im2col_factor, split_kernels, split_of
from gpuc.compiler.ops.util import act_code, epilogue
from gpuc.compiler.options import current
from gpuc.compiler.symbolic import hint, is_sym


def relayout(graph, tid: int, kind: str, make):
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
        if variants and ln is None:     # + the workgroup-scope one first, where the device has it (measured
            cm2 = cm2_variants(M, GN, GK, _has_act(node, ignore))      # ones only, with an activation: last)
            variants = variants + cm2 if cm2 and cm2[0].measured else cm2 + variants
    # a tensor-core gemm whose tiles leave SMs idle (a batch-1 transformer FC of K = 3072) may split too
    idle = (gemm_split.IDLE and bool(variants) and ln is None and underfilled(M, GN, GK, G)
            and not _cm2_fills(node, variants, M, GN, GK, G, im2col, b_t, ignore))
    split, sp = 1, None                 # split-K across workgroups (ops/gemm_split.py; forced: even over them)
    if fixed and G == 1 and not b_t and ln is None and (not variants or current().split_k or idle):
        split, sp = _split(M, GN, GK, vec_a, im2col, cig, graph.precision)
    if split > 1:
        variants = []
    elif fixed and graph.precision == "fp16" and not variants:     # small-M tensor-core candidates
        variants = small_m_variants(M, GN, GK, G, gather=im2col and not vec_a)
    if ln is not None and not variants:     # the fold pays with tensor cores only (ops/ln_fold.py)
        return None
    if fixed and split == 1:            # grouped convolutions: the direct kernel, measured (ops/grouped_conv.py)
        variants = variants + grouped_conv.variants(G, im2col)
    if b_t:
        binds.append(("w", w_id))
    elif split > 1 and im2col:          # split by input channels: the weights as S groups
        taps = GK // cig
        binds.append(("w", relayout(graph, w_id, f"gemm_split{split}_kn{gnp}", lambda: np.pad(
            conv_split_weights(w_kn, taps, split), ((0, 0), (0, 0), (0, gnp - GN))))))
    else:
        binds.append(("w", relayout(graph, w_id, f"gemm_kn{gnp}",
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
        partial_variants = (split_variants(M, GN, GK // split, split, gather=im2col and not vec_a, idle=idle)
                            if graph.precision == "fp16" else [])
        return split_kernels(k, graph, split, sp, graph.t(node.outputs[0]).name, partial_variants)
    return [k]


def _cm2_fills(node, variants, M: int, N: int, K: int, G: int, im2col: bool, b_t: bool, ignore) -> bool:
    """Whether the workgroup-scope kernel (ops/gemm_cm2.py, the first variant where offered) will take this gemm,
    its epilogue being one it takes first (no activation: with one it is a measured candidate; no chain), with
    tiles that fill the GPU: then the gemm does not leave SMs idle whatever the subgroup-scope plans' tiles (a
    batch-1 ViT FC of 197 x 3072 x 768: 192 tiles of 64 x 64, 19 us on the H100, against 20 + 8.5 us split 4
    ways)."""
    if not variants or variants[0].name != "coopmat2" or im2col or G != 1 or b_t:
        return False
    return not _has_act(node, ignore) and not node.epilogue.chain and gemm_cm2.fills(M, N, K)


def _has_act(node, ignore) -> bool:
    """Whether the gemm's epilogue has an activation (its own or after the residual)."""
    return bool((act_code(node) if ignore is None else act_code(node, ignore)) or node.epilogue.act2)


def _split(M: int, N: int, K: int, vec_a: bool, im2col: bool, cig: int, precision: str) -> tuple[int, object]:
    """(S, partial plan) of split-K across workgroups for a one-group gemm with constant weights
    (ops/gemm_split.py): rows split K in multiples of 8, implicit-GEMM convolutions split the input
    channels (vec4 A: into multiples of 4)."""
    if im2col and not gemm_split.conv_splits():
        return 1, None
    fits = (lambda s: cig % (s * (4 if vec_a else 1)) == 0) if im2col else None
    plan = lambda m, n, kk, g: plan_gemm(m, n, kk, g, vec_a, True, im2col)     # noqa: E731
    cost = lambda q, m, n, kk, g: gemm_cost(q, m, n, kk, g, vec_a, True, im2col)     # noqa: E731
    out = split_of(M, N, K, plan, cost, fits, im2col_factor(precision) if im2col else 1.0)
    if out[0] == 1 and im2col and precision == "fp16":      # deep splits into whole tensor-core chunks
        out = split_of(M, N, K, plan, cost, gemm_split.fp16_retry_fits(K, fits), im2col_factor("fp32"))
    return out
