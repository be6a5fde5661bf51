"""Planning of the one `depthwise` dispatch of a DEPTHWISE_CONV_2D (shaders/depthwise.comp): which path
and how much output each invocation computes.

* TILE=0 (`depthwise_px`): 4 channels x PX (1, 2, 4) pixels of one row per invocation, vec4 loads when
  CO % 4 == 0 and MULT == 1.  Each input element is loaded ~KH * SPAN / PX times.
* TILE=1: 1 channel (or 4, as vec4) x an RY x PX pixel tile per invocation, the tile's
  (RY-1)*SH + (KH-1)*DH + 1 input rows swept once (each input element is loaded ~(SPAN/PX)*(IR/RY)
  times), the KH*KW taps in registers where they fit (WREG), else loaded per use from L1.

Measured on the H100 (2026-11-24, benchmarks/archive/depthwise_bench.py, results in
benchmarks/archive/results/nvidia-h100-2026-11-24-s4-depthwise.md): at batch 32 the tiles took 10-25% off the
TILE=0 times; at batch 1, where a layer's tensors sit in L2 and a dispatch has few invocations, TILE=0 was
fastest on every layer timed, so layers under BIG_LAYER keep it.  CompileOptions.dw_plan (the
benchmark, the tests) overrides the choice.

Batch-1 layers also carry unrolled TILE=1 forms (BATCH1_TILES) as `measured` variants, which the runtime
takes per layer where timing them at load finds them faster (runtime/tuning.py).  Whole-model timings on
the H100 (2026-11-27, benchmarks/depthwise_ab.py, ConvNeXt-T batch 1 fp16, each plan forced on all 18
7x7 layers): TILE=0 152.6 us in all (0.718 ms GPU), t1:1x1 120.1 us (0.684 ms), t1:2x1 152.4 us, yet
t1:2x1 ran the 56x56x96 layers fastest (7.5 us against 14.3) and TILE=0 two of the 28x28x192 ones
(6.7 against 7.4): no one plan wins every layer, so the device chooses.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from gpuc.compiler.codegen.kernel import KernelVariant
from gpuc.compiler.options import current

TILE_MAX_TAPS = 64            # weights held in registers: 64 floats (8x8 one channel, 4x4 vec4)
BIG_LAYER = 4 * 65536         # TILE=1 only for layers of at least this many output pixel x 4-channel groups
MIN_INVOCATIONS = 65536       # a tile is shrunk until the grid has at least this many invocations
BATCH1_TILES = ((1, 1), (2, 1))   # (RY, PX) of the vec4 TILE=1 variants a batch-1 TILE=0 layer offers


@dataclass(frozen=True)
class DwPlan:
    tile: int          # 0: 4 channels x PX pixels of a row; 1: 4 or 1 channel(s) x RY x PX pixels
    ry: int
    px: int
    scalar: bool = False   # TILE=1: 1 channel per invocation even where vec4 views work

    def __str__(self) -> str:
        return f"t{self.tile}{'s' if self.scalar else ''}:{self.ry}x{self.px}"


def weights_in_registers(kh: int, kw: int, vec: bool) -> bool:
    """TILE=1: hold the taps in registers (else each is loaded from L1 per use)."""
    return kh * kw * (4 if vec else 1) <= TILE_MAX_TAPS


def depthwise_px(invocations: int, ow: int) -> int:
    """TILE=0: output pixels per invocation (they share input columns), given the invocation count
    at one pixel each: keep at least ~64K invocations in flight."""
    px = 4 if invocations >= 4 * 65536 else 2 if invocations >= 2 * 32768 else 1
    return max(1, min(px, ow))


def _tiles(kh: int, kw: int, sw: int, vec: bool):
    """Candidate (RY, PX, scalar) tiles for a TILE=1 plan, the preferred one first (H100, 2026-11-24,
    benchmarks/archive/depthwise_bench.py at batch 32: 5x5 / 7x7 ran fastest as one channel x 4 x 4 with the taps
    in registers, 3x3 as vec4 x 2 x 4 (stride 2: 2 x 2); the smaller ones keep enough invocations)."""
    if kh * kw > 9 or not vec:
        return [(4, 4, True), (2, 4, True), (2, 2, True), (1, 2, True)]
    if sw > 1:
        return [(2, 2, False), (1, 2, False)]
    return [(2, 4, False), (2, 2, False), (1, 2, False)]


def plan_depthwise(n: int, oh: int, ow: int, co: int, kh: int, kw: int, sh: int, sw: int, dh: int, dw: int,
                   vec: bool = True, old: bool = False) -> DwPlan:
    """The plan for one layer (sizes: the bound of a dynamic dim); vec: CO % 4 == 0 and MULT == 1.
    old=True: the TILE=0 plan alone (benchmarks/archive/depthwise_bench.py compares the two).  Small layers (all
    of batch 1's, where the tensors sit in L2 and TILE=0 ran fastest) and kernels over TILE_MAX_TAPS taps
    keep TILE=0."""
    force = current().dw_plan
    if force is not None and not old:
        return DwPlan(force.tile, max(1, min(force.ry, oh)), max(1, min(force.px, ow)), force.scalar)
    cg = -(-co // 4)
    work = n * oh * ow * cg
    old_plan = DwPlan(0, 1, depthwise_px(work, ow))
    if old or work < BIG_LAYER or kh * kw > TILE_MAX_TAPS:     # (bigger kernels: a fully unrolled tile of
        return old_plan                                        # loads per tap, untimed; TILE=0 stays)
    for ry, px, scalar in _tiles(kh, kw, sw, vec):
        ry, px = min(ry, oh), min(px, ow)
        if n * -(-oh // ry) * -(-ow // px) * (co if scalar else cg) >= MIN_INVOCATIONS:
            return DwPlan(1, ry, px, scalar)
    return old_plan


def _tile_kernel(k, ry: int, px: int):
    """Kernel k (a TILE=0 depthwise with vec4 views, batch 1) as the vec4 TILE=1 plan RY x PX."""
    d = k.defines
    if not all(type(d[n]) is int for n in ("N", "OH", "OW")):
        return None                  # (a dynamic size: the plan's grid is not a constant)
    ry, px = min(ry, d["OH"]), min(px, d["OW"])
    oyb, oxb = -(-d["OH"] // ry), -(-d["OW"] // px)
    defines = dict(d, TILE=1, RY=ry, PX=px, OYB=oyb, OXB=oxb, WREG=int(weights_in_registers(d["KH"], d["KW"], True)))
    return dataclasses.replace(k, defines=defines, invocations=d["N"] * oyb * oxb * d["CG"], variants=[])


def tile_variants(plan: DwPlan, n, oh, ow, kh: int, kw: int, vec: bool) -> list:
    """The `measured` TILE=1 variants of a batch-1 layer planned TILE=0 with vec4 views (none where the
    plan was forced, the batch is not a constant 1, or the kernel is over TILE_MAX_TAPS taps)."""
    if plan.tile or not vec or current().dw_plan is not None or type(n) is not int or n != 1 \
            or kh * kw > TILE_MAX_TAPS:
        return []
    out, seen = [], set()
    for ry, px in BATCH1_TILES:
        key = (min(ry, oh), min(px, ow))
        if key not in seen:
            seen.add(key)
            out.append(KernelVariant(f"dw_t1_{key[0]}x{key[1]}", {},
                                     lambda k, ry=key[0], px=key[1]: _tile_kernel(k, ry, px), measured=True))
    return out
