"""Every code path of every shader template, for `make shaders` (compile + spirv-val each, and its shared
memory against what it may take: declared_variants, compiler/codegen/shared_memory.py).

For each template: sample geometry defines, plus the switch defines whose cartesian product
covers every #if branch.  A template without an entry here fails the check, so a new shader
cannot skip validation.
"""
from __future__ import annotations

import itertools
import sys
from importlib import resources

from gpuc.compiler import ops  # noqa: F401  (imports every op module: their VARIANTS)
from gpuc.compiler.shader_text import supports_storage16
from gpuc.compiler.codegen.kernel import Kernel
from gpuc.compiler.ew_table import ACTS
from gpuc.compiler.codegen.shared_memory import PORTABLE_SMEM   # (32 KiB: every Vulkan device allows it)
_FQ = dict(FQ_SCALE=0.0235, FQ_ZP=-5, FQ_MIN=-128, FQ_MAX=127, FQM_SCALE=0.031, FQM_ZP=3, FQM_MIN=-128, FQM_MAX=127)
_GEOM = dict(N=1, H=5, W=6, OH=3, OW=3, KH=3, KW=3, SH=2, SW=2, DH=1, DW=1, PT=1, PL=1)
_GEMM = dict(_GEOM, **_FQ, FQM=1, GM=9, GN=6, GK=36, GROUPS=2, LDA=8, LDC=12, GNP=8, CIG=4, BM=8, BN=8, BK=8,
             TM=2, TN=2,
             TILES_M=2, TILES_N=1, NWG=4)
_DW = dict(_GEOM, **_FQ, FQM=1, CI=4, CO=8, MULT=2, CG=2, OXB=1)
_ND = dict(RANK=3, SHAPE=[2, 3, 4], SRC_STRIDES=[12, 4, 1], DST_STRIDES=[24, 8, 1], SRC_OFFSET=0, DST_OFFSET=4)

# reduce.comp COLS4 (ops/reduce.py COLS4_VARIANT), in float32 and float16
_C4 = dict(NK=2, K_SHAPE=[2, 12], K_STRIDES=[72, 1], NR=2, R_SHAPE=[2, 3], R_STRIDES=[36, 12], RCOUNT=6, COLS4=1,
           C4_GROUPS=4, OUTPUTS=24)
VARIANTS = {
    "gemm": (_GEMM, {"IM2COL": [0, 1], "VEC_A": [0, 1], "B_T": [0, 1], "KS": [1, 2], "HAS_BIAS": [0, 1],
                     "RESIDUAL": [0, 1], "ACT": [0, 3], "ACT2": [0, 1], "FQ": [0, 1]},
             ["out_", "x", "w", "bias", "res"], {},
             lambda d: dict(local_x=(d["BM"] // d["TM"]) * (d["BN"] // d["TN"]) * d["KS"],
                            vec4=tuple(n for n, on in (("x", d["VEC_A"]), ("w", not d["B_T"])) if on))),
    "gemm:sv4": (dict(_GEMM, BM=16, BN=16, TM=4, TN=4, KS=1, SV4=1),
                 {"IM2COL": [0, 1], "VEC_A": [0, 1], "B_T": [0, 1], "HAS_BIAS": [0, 1], "RESIDUAL": [0, 1],
                  "ACT": [0, 3]},
                 ["out_", "x", "w", "bias", "res"], {},
                 lambda d: dict(local_x=16, vec4=tuple(n for n, on in (("x", d["VEC_A"]), ("w", not d["B_T"])) if on))),
    "depthwise": (_DW, {"VEC": [0, 1], "PX": [1, 3], "HAS_BIAS": [0, 1], "RESIDUAL": [0, 1], "ACT": [0, 3, 5],
                        "ACT2": [0, 1], "FQ": [0, 1]},
                  ["out_", "x", "w", "bias", "res"], {},
                  lambda d: dict(vec4=("out_", "x", "w", "bias", "res") if d["VEC"] else ())),
    "depthwise:tile": (dict(_DW, TILE=1, RY=2, OYB=2), {"VEC": [0, 1], "WREG": [0, 1], "PX": [1, 3],
                                                        "HAS_BIAS": [0, 1], "RESIDUAL": [0, 1], "ACT": [0, 3, 5],
                                                        "ACT2": [0, 1], "FQ": [0, 1]},
                       ["out_", "x", "w", "bias", "res"], {},
                       lambda d: dict(vec4=("out_", "x", "w", "bias", "res") if d["VEC"] else ())),
    "copy_nd": (dict(_ND, **_FQ), {"CONTIGUOUS": [0, 1], "ACT": ACTS, "FQ": [0, 1]}, ["out_", "x"]),
    "copy_nd:vec": (dict(_ND, **_FQ, VEC=1), {"CONTIGUOUS": [0, 1], "ACT": ACTS, "FQ": [0, 1]}, ["out_", "x"], {},
                    lambda d: dict(vec4=("out_", "x"))),
    "pad": (dict(RANK=2, OUT_SHAPE=[4, 5], IN_SHAPE=[2, 3], IN_STRIDES=[3, 1], PAD_LO=[1, 1], PAD_VALUE=0.5),
            {}, ["out_", "x"]),
    "reduce": (dict(NK=1, K_SHAPE=[4], K_STRIDES=[1], NR=2, R_SHAPE=[2, 3], R_STRIDES=[12, 4], RCOUNT=6,
                    NIN=2, IK_STRIDES=[1, 0], IR_STRIDES=[12, 4, 0, 1],      # PROLOGUE (ops/ew_fused.py FUSED_REDUCE)
                    EW_BODY="float t0 = ew_keep(EW_R16(ew_squared_difference(v0, v1)));", EW_RESULT="ew_sqrt(t0)"),
               {"OP": [0, 1, 2, 3, 4], "WG_PER_OUT": [0, 1], "SUBGROUP": [0, 1], "PROLOGUE": [0, 1],
                "EW_ROUND16": [0, 1]}, ["out_", "x", "x0", "x1"]),
    "reduce:parts": (dict(NK=1, K_SHAPE=[4], K_STRIDES=[1], NR=2, R_SHAPE=[2, 3], R_STRIDES=[12, 4], RCOUNT=6,
                          WG_PER_OUT=1, PARTS=2, PART=4, NIN=2, IK_STRIDES=[1, 0], IR_STRIDES=[12, 4, 0, 1],
                          EW_BODY="float t0 = ew_keep(EW_R16(ew_squared_difference(v0, v1)));", EW_RESULT="ew_sqrt(t0)"),
                     {"OP": [1, 4], "SUBGROUP": [0, 1], "PROLOGUE": [0, 1]}, ["out_", "x", "x0", "x1"]),
    "reduce:divisor": (dict(NK=1, K_SHAPE=[4], K_STRIDES=[3], NR=1, R_SHAPE=[3], R_STRIDES=[1], RCOUNT=3, OP=0,
                            DIVISOR=9), {"WG_PER_OUT": [0, 1]}, ["out_", "x"]),
    "reduce:cols": (dict(NK=2, K_SHAPE=[2, 12], K_STRIDES=[72, 1], NR=2, R_SHAPE=[2, 3], R_STRIDES=[36, 12], RCOUNT=6,
                         COLS=1, COLS_W=8, OUTPUTS=24, NIN=2, IK_STRIDES=[72, 1, 0, 1], IR_STRIDES=[36, 12, 0, 0],
                         EW_BODY="float t0 = ew_keep(EW_R16(ew_squared_difference(v0, v1)));", EW_RESULT="ew_sqrt(t0)"),
                    {"OP": [0, 1], "PROLOGUE": [0, 1], "EW_ROUND16": [0, 1]}, ["out_", "x", "x0", "x1"], {},
                    lambda d: dict(local_x=256)),
    "reduce:cols4": (_C4, {"OP": [0, 1]}, ["out_", "x"], {}, lambda d: dict(local_x=256, vec4=("x",))),
    "reduce:cols4_16": (_C4, {"OP": [0, 1]}, ["out_", "x"], {"out_": "float16", "x": "float16"},
                        lambda d: dict(local_x=256, vec4=("x",))),
    "softmax": (dict(D=10, BETA=1.0), {"ROW_PER_GROUP": [0, 1], "SUBGROUP": [0, 1], "INNER": [1, 6]}, ["out_", "x"]),
    "pool2d": (dict(N=1, H=5, W=6, C=4, OH=3, OW=3, KH=3, KW=3, SH=2, SW=2, PT=1, PL=1, EPT=1, EPB=0, EPL=1, EPR=1,
                    PAD_VALUE=-0.5, OUTPUTS=36, **_FQ),
               {"OP": [0, 1], "ACT": ACTS, "FQ": [0, 1], "FOLDED_PAD": [0, 1], "WG_PER_OUT": [0, 1],
                "SUBGROUP": [0, 1]}, ["out_", "x"]),
    "pool2d:vec": (dict(N=1, H=5, W=6, C=8, OH=3, OW=3, KH=3, KW=3, SH=2, SW=2, PT=1, PL=1, EPT=1, EPB=0, EPL=1, EPR=1,
                        PAD_VALUE=-0.5, VEC=1, **_FQ),
                   {"OP": [0, 1], "ACT": ACTS, "FQ": [0, 1], "FOLDED_PAD": [0, 1]}, ["out_", "x"], {},
                   lambda d: dict(vec4=("out_", "x"))),
}


def collected() -> dict:
    """VARIANTS above plus any `VARIANTS` dict an op module defines (same format)."""
    out = dict(VARIANTS)
    for name, mod in list(sys.modules.items()):
        if name.startswith("gpuc.compiler.ops.") and isinstance(getattr(mod, "VARIANTS", None), dict):
            out.update(mod.VARIANTS)
    return out


def all_variants():
    """Yield (template, Kernel, dtypes) for every switch combination of every template.
    A variant entry may carry a 4th element: {binding name: dtype} (default float32), and a 5th:
    a function of the variant's defines returning extra Kernel fields (local_x, vec4) and, where the
    compiler's variant of such a kernel requires more shared memory than every device allows, that
    requirement as `shared_memory` (declared_variants)."""
    for template, k, dtypes, _ in declared_variants():
        yield template, k, dtypes


def declared_variants():
    """all_variants, each with the bytes of shared memory it may take: the `shared_memory` its entry's 5th
    element returns (the requirement the compiler's variant of such a kernel declares), else PORTABLE_SMEM."""
    for key, entry in collected().items():
        template = key.split(":")[0]            # "gemm:coopmat": more variants of template gemm
        base, switches, names = entry[:3]
        types = entry[3] if len(entry) > 3 else {}
        extra = entry[4] if len(entry) > 4 else (lambda d: {})
        keys = list(switches)
        for combo in itertools.product(*(switches[k] for k in keys)):
            defines = dict(base, **dict(zip(keys, combo)))
            binds = [n for n in names if not (n == "bias" and not defines.get("HAS_BIAS"))
                     and not (n == "res" and not defines.get("RESIDUAL"))]
            fields = dict(extra(defines))
            smem = fields.pop("shared_memory", None) or PORTABLE_SMEM
            label = f"{key}{dict(zip(keys, combo))}"     # (the entry and its switches: names it in any message)
            k = Kernel(template, [(n, i) for i, n in enumerate(binds)], 100, defines, label, **fields)
            dtypes = {i: types.get(n, "float32") for i, n in enumerate(binds)}
            yield template, k, dtypes, smem
            if supports_storage16(template) and "float32" in dtypes.values() and not defines.get("IS_INT"):
                # --precision fp16: every float binding stored as float16 (mixed cases are subsets)
                yield template, k, {i: "float16" if d == "float32" else d for i, d in dtypes.items()}, smem


def templates_on_disk() -> set:
    """Every shader template: GLSL (.comp) and SPIR-V assembly (.spvasm) files."""
    return {p.name.rsplit(".", 1)[0] for p in resources.files("gpuc.shaders").iterdir()
            if p.name.endswith((".comp", ".spvasm"))}
