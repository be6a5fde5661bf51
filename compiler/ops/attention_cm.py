"""The cooperative-matrix form of an ATTENTION dispatch (shaders/attention_cm.comp): Q K^T and P V on
16 x 16 x 16 fp16 tensor-core products with fp32 sums, the online softmax in fp32 as attention.comp's.

A variant (runtime/variants.py picks it at load where the device has the fp16 cooperative matrices) of
the attention.comp / attention_wide.comp kernel of an fp16 bundle (q, k and v are rounded to float16,
whatever their storage), head sizes multiples of 16 up to MAX_D; bias and mask operands (Swin's and MaxViT's
relative-position bias, a causal LLM prefill's mask) are read in the score steps as attention.comp reads them.  On the H100 (sessions 14-15, one attention at ViT-B/16's shape: 197 tokens, 12 heads of 64, fp16), a
layer took at batch 32 784 us in attention.comp (598 in attention_wide.comp) and 349 here (381 before the
lazy rescaling), 190 once the accumulator-layout probe read 8 positions a lane instead of scanning all 256
(a fixed cost of every workgroup), 134 (session 18, in the model) with 4-channel loads (vector_reads), no probe
at all (rows rescaled through shared memory) and no work for subgroups past the last row; at batch 1 (48
workgroups) 36 us there against 47 here before the first probe change; below MIN_WAVES workgroups per SM the
variant is only a measured candidate.  The split form
(KSPLIT, ops/attention.py key_split) at batch 1: 16 us against attention.comp's split 25.
"""
from __future__ import annotations

import dataclasses

from gpuc.compiler.codegen.kernel import KernelVariant
from gpuc.compiler.ops import template
from gpuc.compiler.ops.gemm_coopmat import BIG_SMEM, EMULATED_REQUIRES, GPU_SMS, REQUIRES, WG_SMEM
from gpuc.compiler.ops.util import known_ints
from gpuc.compiler.options import current

TEMPLATE = "attention_cm"
SG, BK, MAX_D = 32, 16, 128      # BK 16: 380 us against 557 with 32-key tiles (ViT-B/16 shape, batch 32, H100)
MIN_WAVES = 2                    # workgroups per SM from which the variant is taken without measuring
# defines of the base kernels that attention_cm.comp reads as they are (operand views and score steps)
KEEP = ("N", "M", "D", "DV", "NBATCH", "BETA", "Q_T", "Q_NT", "Q_SR", "Q_SC", "Q_OFF", "K_T", "K_NT", "K_SJ",
        "K_SC", "K_OFF", "V_T", "V_NT", "V_SJ", "V_SC", "V_OFF", "O_T", "O_NT", "O_SR", "O_SC", "SC", "Q_STEPS",
        "K_STEPS", "SCORE_STEPS", "NBIAS", "B_T", "B_FIRST", "B_NT", "B_SJ")


def smem_bytes(nsg: int, d: int, dv: int) -> int:
    """Shared memory of attention_cm.comp with nsg subgroups (sQ, sK, sV, sS, sP, sRed, sRow)."""
    bq = 16 * nsg
    return 2 * (bq * (d + 8) + BK * (d + 8) + BK * (dv + 8)) + 4 * nsg * 16 * (BK + 4) + 2 * nsg * 16 * (BK + 8) \
        + 4 * SG * nsg + 4 * bq


def subgroups(d: int, dv: int) -> int | None:
    """Subgroups a workgroup (16 query rows each): the most of 4, 2, 1 within BIG_SMEM; None if none fits."""
    return next((s for s in (4, 2, 1) if smem_bytes(s, d, dv) <= BIG_SMEM), None)


def _subgroups_for(d: int, dv: int) -> int | None:
    """subgroups() for an attention of this form, or None where attention_cm.comp cannot take it (head sizes not
    multiples of 16 or over MAX_D, no plan within BIG_SMEM)."""
    if d % 16 or dv % 16 or max(d, dv) > MAX_D:
        return None
    return subgroups(d, dv)


def _qblocks(n: int, nsg: int) -> int:
    return -(-n // (16 * nsg))


# the operands attention_cm.comp may load 4 channels at a time: (binding, define, row stride, offset, terms)
VECTOR_OPERANDS = (("q", "Q4", "Q_SR", "Q_SC", "Q_OFF", "Q_T"), ("k", "K4", "K_SJ", "K_SC", "K_OFF", "K_T"),
                   ("v", "V4", "V_SJ", "V_SC", "V_OFF", "V_T"))


def vector_reads(d: dict) -> dict:
    """{define: 1} of the operands whose loads can move 4 channels (Q4 / K4 / V4): channels contiguous, and
    the row stride, the offset and every view term's stride whole multiples of 4 elements (so each row
    starts on a 4-vector of the binding, declared as one: its tensor's offset is 256-byte aligned)."""
    out = {}
    for _, name, sr, sc, off, terms in VECTOR_OPERANDS:
        vals = [d[sr], d[off]] + list(d[terms])[2::3]
        if d[sc] == 1 and known_ints(vals) and all(x % 4 == 0 for x in vals):
            out[name] = 1
    return out


def cm_kernel(k, emulate: bool = False):
    """The attention_cm kernel for attention kernel `k` (same bindings), or None where it does not fit; for a
    split kernel (KSPLIT > 1: ops/attention.py key_split) the same parts, each over its share of 16-key tiles."""
    d = k.defines
    nsg = _subgroups_for(d["D"], d["DV"])
    if nsg is None:
        return None
    qblocks = _qblocks(d["N"], nsg)
    ks = d.get("KSPLIT", 1)              # attention.comp's split form: the same parts, over 16-key tiles
    defines = {key: d[key] for key in KEEP}
    defines.update(NSG=nsg, BK=BK, QBLOCKS=qblocks, NWG=d["NBATCH"] * qblocks * ks, KSPLIT=ks, CM_EMULATE=int(emulate))
    defines.update(vector_reads(d))
    return dataclasses.replace(k, template=TEMPLATE, defines=defines, invocations=defines["NWG"] * SG * nsg,
                               local_x=SG * nsg, variants=[], vec4=_vec4(defines))


def _vec4(d: dict) -> tuple:
    """The bindings attention_cm.comp reads as 4-vectors under defines `d`."""
    return tuple(b for b, name, *_ in VECTOR_OPERANDS if d.get(name))


def variants(n: int, d: int, dv: int, nbatch: int) -> list:
    """[the coopmat variant] of an attention dispatch of this form ([] where it has none): taken wherever the
    device has the cooperative matrices when its workgroups fill the GPU MIN_WAVES times over, else only a
    `measured` candidate (runtime/tuning.py times it against attention.comp at load)."""
    nsg = _subgroups_for(d, dv)
    if current().precision != "fp16" or nsg is None:
        return []
    if current().coopmat_emulate:
        return [KernelVariant("coopmat", EMULATED_REQUIRES, lambda k: cm_kernel(k, True))]
    need = REQUIRES if smem_bytes(nsg, d, dv) <= WG_SMEM else dict(REQUIRES, shared_memory=BIG_SMEM)
    groups = nbatch * _qblocks(n, nsg)
    return [KernelVariant("coopmat", need, cm_kernel, measured=groups < MIN_WAVES * GPU_SMS)]


_S = dict(N=40, M=37, D=32, DV=16, NBATCH=3, BETA=1.0, NSG=2, BK=BK, QBLOCKS=2, NWG=18, Q_T=[1, 3, 1280], Q_NT=1,
          Q_SR=32, Q_SC=1, Q_OFF=0, K_T=[1, 3, 1184], K_NT=1, K_SJ=32, K_SC=1, K_OFF=0, V_T=[1, 3, 592], V_NT=1,
          V_SJ=16, V_SC=1, V_OFF=0, O_T=[1, 3, 640], O_NT=1, O_SR=16, O_SC=1, SC=[0.5, 2.0],
          Q_STEPS="x = ew_mul(x, SC[0]);", K_STEPS="", SCORE_STEPS="x = ew_div(x, SC[1]);", NBIAS=0, B_T=[0],
          B_FIRST=[0], B_NT=[0], B_SJ=[0])
_SB = dict(_S, NBIAS=2, B_T=[40, 1, 37, 1, 3, 0], B_FIRST=[0, 1], B_NT=[1, 1], B_SJ=[1, 0],    # a bias and a mask
           SCORE_STEPS="x = ew_div(x, SC[1]); x = ew_add(x, LD(bias0, bo[0][a] + j * B_SJ[0])); "
                       "x = ew_sub(x, LD(bias1, bo[1][a] + j * B_SJ[1]));")
# `make shaders`: both paths, float16 operands with float16 and float32 outputs
VARIANTS = {
    TEMPLATE: (_S, {"CM_EMULATE": [0, 1], "KSPLIT": [1, 3]}, ["out_", "q", "k", "v"],
               {"q": "float16", "k": "float16", "v": "float16"}, lambda d: dict(local_x=SG * d["NSG"])),
    f"{TEMPLATE}:vec": (dict(_S, Q4=1, K4=1, V4=1), {"CM_EMULATE": [0, 1], "KSPLIT": [1, 3]}, ["out_", "q", "k", "v"],
                        {"q": "float16", "k": "float16", "v": "float16"},
                        lambda d: dict(local_x=SG * d["NSG"], vec4=_vec4(d))),
    f"{TEMPLATE}:vec32": (dict(_S, Q4=1, K4=1, V4=1), {"CM_EMULATE": [0, 1]}, ["out_", "q", "k", "v"], {},
                          lambda d: dict(local_x=SG * d["NSG"], vec4=_vec4(d))),
    f"{TEMPLATE}:bias": (_SB, {"CM_EMULATE": [0, 1], "KSPLIT": [1, 3]}, ["out_", "q", "k", "v", "bias0", "bias1"],
                         {"q": "float16", "k": "float16", "v": "float16", "bias1": "float16"},
                         lambda d: dict(local_x=SG * d["NSG"])),
    f"{TEMPLATE}:f16": (_S, {"CM_EMULATE": [0, 1]}, ["out_", "q", "k", "v"],
                        {"out_": "float16", "q": "float16", "k": "float16", "v": "float16"},
                        lambda d: dict(local_x=SG * d["NSG"])),
}

template(TEMPLATE, item_major=False, flat=False)   # (a variant of attention's dispatches, chosen at load)
