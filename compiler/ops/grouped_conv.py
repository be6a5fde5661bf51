"""Grouped convolutions computed directly (shaders/grouped_conv.comp): a `measured` variant of the
implicit-GEMM `gemm` dispatch of a CONV_2D with 2+ groups (ResNeXt, RegNet, grouped ShuffleNets), with
the same bindings -- the gemm's [GROUPS][GK][GNP] weights read 4 output channels at a time.

With few channels a group the gemm's tiles are mostly padding: on the H100 (session 14, ResNeXt-50
32x4d at batch 32, fp16) its 3x3 convolutions of 4 and 8 channels a group ran at 1.9 and 4.9 TFLOP/s
(490 and 190 us).  Which kernel a shape takes is measured on the device at load (runtime/tuning.py);
without a measurement the gemm runs.  There, with tuning, the three 4-channel-a-group convolutions took
this kernel: the whole model 7.715 -> 7.041 ms GPU in fp16 and 12.83 -> 12.27 in fp32, the same outputs;
RegNetX-1.6GF (24 channels a group) kept the gemm (4.43 / 4.39 ms).  Scalar FMAs, one input value and 4
weights per (tap, channel) a pixel: still far from the tensor cores' rate."""
from __future__ import annotations

import dataclasses

from gpuc.compiler.codegen.kernel import KernelVariant
from gpuc.compiler.ops import template

TEMPLATE = "grouped_conv"
PX = 4                  # output pixels of a row per invocation
LOCAL = 64


def direct_kernel(k):
    """The grouped_conv kernel for implicit-GEMM gemm kernel `k`, or None where it has no such form."""
    d = k.defines
    if (not d.get("IM2COL") or d.get("GROUPS", 1) < 2 or d.get("B_T") or d.get("FQ") or d.get("LN_FOLD")
            or d.get("SPLIT_REDUCE") or d.get("COOPMAT")):
        return None
    oh, ow = d["OH"], d["OW"]
    n, kh = d["GM"] // (oh * ow), d["GK"] // (d["KW"] * d["CIG"])
    px = min(PX, ow)
    oxb, cg = -(-ow // px), -(-d["LDC"] // 4)
    defines = dict(d, N=n, KH=kh, PX=px, OXB=oxb, CG=cg)
    per_item = oh * oxb * cg
    return dataclasses.replace(k, template=TEMPLATE, defines=defines, invocations=n * per_item, local_x=LOCAL,
                               vec4=(), variants=[], item_inner=per_item // LOCAL if per_item % LOCAL == 0 else 0)


def variants(groups: int, im2col: bool) -> list:
    """[the direct variant, measured] for a grouped implicit-GEMM convolution, else []."""
    if groups < 2 or not im2col:
        return []
    return [KernelVariant("grouped_direct", {}, direct_kernel, measured=True)]


_S = dict(GM=2 * 3 * 5, GN=2, GK=3 * 3 * 3, GROUPS=3, LDA=9, LDC=6, GNP=4, H=5, W=6, OH=3, OW=5, KW=3, KH=3, CIG=3,
          SH=2, SW=1, DH=1, DW=1, PT=1, PL=1, N=2, PX=4, OXB=2, CG=2, EPI_CHAIN=0)
VARIANTS = {
    TEMPLATE: (_S, {"HAS_BIAS": [0, 1], "ACT": [0, 1, 3], "RESIDUAL": [0, 1], "ACT2": [0, 1]},
               ["out_", "x", "w", "bias", "res"], {}, lambda d: dict(local_x=LOCAL)),
    f"{TEMPLATE}:f16": (dict(_S, GN=4, LDC=12, GNP=4, CG=3), {"HAS_BIAS": [0, 1], "RESIDUAL": [0, 1]},
                        ["out_", "x", "w", "bias", "res"],
                        {"out_": "float16", "x": "float16", "w": "float16", "bias": "float16", "res": "float16"},
                        lambda d: dict(local_x=LOCAL)),
}

template(TEMPLATE, item_major=True, flat=False)    # (a variant of gemm's dispatches, chosen at load by measurement)
