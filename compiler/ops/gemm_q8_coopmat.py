"""The `coopmat_int8` variant of gemm_q8's tiled (prefill) kernel: the same exact int32 sums of the
quantized rows and the int8 weights on s8 x s8 -> s32 16 x 16 x 32 cooperative matrices
(shaders/gemm_q8_coopmat.glsl), so its outputs are the int_dot / plain kernel's bit for bit.  Offered first
(the first variant the device meets runs) on devices with int8 cooperative matrices and subgroups of 32,
int8_conv.py's tiled variant of the same name requires the same.

Tiles (plan): 128 x 128 (8 subgroups, each 64 rows x 32 channels) where that gives two workgroups per SM
(GPU_SMS), else 64 x 64 (4 subgroups, each 32 x 32) where that gives one, else 32 x 64 (4 subgroups, each
16 x 32: prefill's 896-wide o / down projections at M = 512 get 224 workgroups, not 112).  At these sizes a
workgroup's time is mostly its K steps' load latency, so the K step is the longest of 64 / 32 / 16 / 8
words (256 ... 32 int8) whose staging fits the shared memory: a first variant plans for 48 KiB (requiring
`shared_memory`, as NVIDIA and most desktop GPUs allow; none where that plan is the 32 KiB one), then the
portable 32 KiB plan.  (Chosen without a device: no H100 timing has tuned these rules yet.)"""
from __future__ import annotations

import dataclasses

from gpuc.compiler.codegen.kernel import KernelVariant
from gpuc.compiler.ops.epi_chain import EBIND, sample_chain
from gpuc.compiler.options import current
from gpuc.compiler.codegen.shared_memory import PORTABLE_SMEM

GPU_SMS = 132                   # (H100) workgroups for a full GPU
SMEM = PORTABLE_SMEM            # shared memory every Vulkan device with these matrices allows
BIG_SMEM = 48 * 1024            # what NVIDIA (and most desktop GPUs) allow: the variant requiring `shared_memory`
# (BM, BN, WM, WN, the workgroups per SM it must give), biggest first (the last: any)
TILES = ((128, 128, 2, 4, 2), (64, 64, 2, 2, 1), (32, 64, 2, 2, 0))


def smem_bytes(p: dict, glu: bool) -> int:
    """Shared memory of plan `p`: the staged rows and channels (up's too under GLU), the scratch blocks."""
    return 4 * ((p["BM"] + p["BN"] * (1 + glu)) * (p["BKW"] + 4) + p["WM"] * p["WN"] * 256)


def declared_smem(p: dict, glu: bool) -> int | None:
    """The `shared_memory` the variant of plan `p`'s kernel requires: BIG_SMEM where it takes more than SMEM
    (a BIG_VARIANT plan), else None."""
    return BIG_SMEM if smem_bytes(p, glu) > SMEM else None


def plan(gm: int, gn: int, glu: bool, smem: int = SMEM) -> dict:
    """The tile defines (BM BN BKW WM WN) for an M x N output: the biggest tile giving enough workgroups,
    the longest K step (words) whose staging fits `smem` bytes and divides among the invocations."""
    for bm, bn, wm, wn, least in TILES:
        if -(-gm // bm) * -(-gn // bn) >= least * GPU_SMS:
            break
    nt = 32 * wm * wn
    for bkw in (64, 32, 16, 8):
        p = dict(BM=bm, BN=bn, BKW=bkw, WM=wm, WN=wn)
        if smem_bytes(p, glu) <= smem and not (bm * bkw // 4) % nt and not (bn * bkw // 4) % nt:
            return p
    raise AssertionError(f"no K step for tile {bm} x {bn}")


def coopmat_kernel(k, emulate: bool = False, smem: int = SMEM):
    """The COOPMAT=1 form of the plain tiled kernel `k` (Q8_MODE 2) planned for `smem` bytes (None where
    that plan is the SMEM one: the variant for more shared memory adds nothing there); `emulate`: plain
    int32 sums in its place (CM_EMULATE: the same staging, tiles and epilogue, for lavapipe tests)."""
    d = k.defines
    glu = bool(d.get("GLU"))
    p = plan(d["GM"], d["GN"], glu, smem)
    if smem != SMEM and p == plan(d["GM"], d["GN"], glu):
        return None
    tiles_n = -(-d["GN"] // p["BN"])
    local = 32 * p["WM"] * p["WN"]
    return dataclasses.replace(k, defines=dict(d, COOPMAT=1, TILES_N=tiles_n, CM_EMULATE=int(emulate), **p), variants=[],
                               invocations=-(-d["GM"] // p["BM"]) * tiles_n * local, local_x=local,
                               vec4=tuple(k.vec4) + ("xq",))


# (int8_conv.py's COOPMAT_VARIANT requires the same; one name, so GPUC_VARIANTS=coopmat_int8=off turns both off)
REQUIRES = {"cooperative_matrix": [16, 16, 32, "sint8", "sint8", "sint32", "sint32"], "subgroup_size": 32}
COOPMAT_VARIANT = KernelVariant("coopmat_int8", REQUIRES, coopmat_kernel)
BIG_VARIANT = KernelVariant("coopmat_int8", dict(REQUIRES, shared_memory=BIG_SMEM),
                            lambda k: coopmat_kernel(k, smem=BIG_SMEM))
# CompileOptions.coopmat_emulate (tests): the emulated forms, which any device runs (with the shared memory)
EMULATED = [KernelVariant("coopmat_int8", {"shared_memory": BIG_SMEM}, lambda k: coopmat_kernel(k, True, BIG_SMEM)),
            KernelVariant("coopmat_int8", {}, lambda k: coopmat_kernel(k, True))]


def coopmat_variants() -> list:
    """The variants gemm_q8's tiled kernels carry first, best first (the emulated ones under coopmat_emulate)."""
    return list(EMULATED) if current().coopmat_emulate else [BIG_VARIANT, COOPMAT_VARIANT]


def _fields(local: int, vec4: tuple):
    """A VARIANTS entry's Kernel fields: its local size and vec4 bindings, and the shared memory its plan declares."""
    return lambda d: dict(local_x=local, vec4=vec4, shared_memory=declared_smem(d, bool(d.get("GLU"))))


_D = dict(GM=40, GN=72, GK=100, KQ=7, RM=1, RN=1, TILES_N=2, Q8_MODE=2, HAS_BIAS=1, RESIDUAL=1, COOPMAT=1)
VARIANTS = {   # (compiler/codegen/variants.py: both tile forms, every epilogue branch)
    "gemm_q8:tiled_coopmat_chain": (dict(_D, BM=64, BN=64, BKW=32, WM=2, WN=2, **sample_chain(3)), {"CM_EMULATE": [0, 1]},
                                    ["out_", "xq", "w", "ws", "wsum", "bias", "res"] + EBIND[:2],
                                    {"xq": "uint32", "w": "uint32", "wsum": "int32"},
                                    _fields(128, ("w", "xq"))),
    "gemm_q8:tiled_coopmat": (dict(_D, BM=64, BN=64, BKW=16, WM=2, WN=2),
                              {"GLU": [0, 1], "HAS_UBIAS": [0, 1], "ACT": [0, 1], "CM_EMULATE": [0, 1]},
                              ["out_", "xq", "w", "ws", "wsum", "bias", "res", "wu", "wus", "wusum", "ubias"],
                              {"xq": "uint32", "w": "uint32", "wsum": "int32", "wu": "uint32", "wusum": "int32"},
                              _fields(128, ("w", "wu", "xq"))),
    "gemm_q8:tiled_coopmat_big": (dict(_D, BM=128, BN=128, BKW=8, WM=2, WN=4), {"GLU": [0, 1], "CM_EMULATE": [0, 1]},
                                  ["out_", "xq", "w", "ws", "wsum", "bias", "res", "wu", "wus", "wusum"],
                                  {"xq": "uint32", "w": "uint32", "wsum": "int32", "wu": "uint32", "wusum": "int32"},
                                  _fields(256, ("w", "wu", "xq"))),
    "gemm_q8:tiled_coopmat_narrow": (dict(_D, BM=32, BN=64, BKW=64, WM=2, WN=2), {"GLU": [0, 1], "CM_EMULATE": [0, 1]},
                                     ["out_", "xq", "w", "ws", "wsum", "bias", "res", "wu", "wus", "wusum"],
                                     {"xq": "uint32", "w": "uint32", "wsum": "int32", "wu": "uint32", "wusum": "int32"},
                                     _fields(128, ("w", "wu", "xq"))),
}
