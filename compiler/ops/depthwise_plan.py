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

Batch-1 layers carry their other candidate plans (batch1_plans: TILE=0 and the unrolled TILE=1 forms of
BATCH1_TILES) as `measured` variants, which the runtime takes per layer where timing them at load finds
them faster (runtime/tuning.py); from B1_TILE_TAPS taps the plan is TILE=1 1 x 1 alone.  Whole-model timings on
the H100 (2026-11-27, benchmarks/depthwise_ab.py, a CNN of 18 7x7 depthwise layers at batch 1, fp16, each
plan forced on all of them): TILE=0 152.6 us in all (0.718 ms GPU), t1:1x1 120.1 us (0.684 ms), t1:2x1 152.4 us, yet
t1:2x1 ran two 56x56x96 layers fastest (7.5 us against 7.8) and TILE=0 two of the 28x28x192 ones
(6.7 against 7.4), but tuning those choices at load picked worse than 1x1 everywhere (batch1_plans).
A CNN of 3x3 depthwise layers (inverted-residual blocks) tuned among TILE=0, 1x1 and 2x1: depthwise
63.6 -> 60.6 us.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from gpuc.compiler.codegen.kernel import KernelVariant
from gpuc.compiler.options import current

TILE_MAX_TAPS = 64            # weights held in registers: 64 floats (8x8 one channel, 4x4 vec4)
BIG_LAYER = 4 * 65536         # TILE=1 only for layers of at least this many output pixel x 4-channel groups
MIN_INVOCATIONS = 65536       # a tile is shrunk until the grid has at least this many invocations
BATCH1_TILES = ((1, 1), (2, 1))   # (RY, PX) of the vec4 TILE=1 plans of a batch-1 layer (batch1_plans)
B1_TILE_TAPS = 49             # batch 1: from this many taps (7x7) the TILE=1 1 x 1 plan, no variants


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
    keep TILE=0, except batch-1 vec4 layers of at least B1_TILE_TAPS taps: the unrolled vec4 1 x 1 tile
    (batch1_plans)."""
    force = current().dw_plan
    if force is not None and not old:
        return DwPlan(force.tile, max(1, min(force.ry, oh)), max(1, min(force.px, ow)), force.scalar)
    cg = -(-co // 4)
    work = n * oh * ow * cg
    old_plan = DwPlan(0, 1, depthwise_px(work, ow))
    if not old and work < BIG_LAYER and batch1_plans(n, oh, ow, co, kh, kw, vec):
        return batch1_plans(n, oh, ow, co, kh, kw, vec)[0]
    if old or work < BIG_LAYER or kh * kw > TILE_MAX_TAPS:     # (bigger kernels: a fully unrolled tile of
        return old_plan                                        # loads per tap, untimed; TILE=0 stays)
    for ry, px, scalar in _tiles(kh, kw, sw, vec):
        ry, px = min(ry, oh), min(px, ow)
        if n * -(-oh // ry) * -(-ow // px) * (co if scalar else cg) >= MIN_INVOCATIONS:
            return DwPlan(1, ry, px, scalar)
    return old_plan


def batch1_plans(n, oh, ow, co: int, kh: int, kw: int, vec: bool) -> list:
    """A batch-1 layer's candidate plans, the cost model's pick first: the TILE=0 plan and the vec4 TILE=1
    forms of BATCH1_TILES; from B1_TILE_TAPS taps the TILE=1 1 x 1 plan alone (H100, the 7x7 CNN above, fp16: tuning
    among 1x1, 2x1 and TILE=0 per layer ran 0.689-0.691 ms, its noisy picks costing 13.4 us against 7.8 on
    one layer, 1x1 everywhere 0.683); [] where they do not apply (a batch not a constant 1, scalar views,
    over TILE_MAX_TAPS taps, a big layer)."""
    if type(n) is not int or n != 1 or type(oh) is not int or type(ow) is not int or not vec \
            or kh * kw > TILE_MAX_TAPS or oh * ow * -(-co // 4) >= BIG_LAYER:
        return []
    if kh * kw >= B1_TILE_TAPS:
        return [DwPlan(1, 1, 1)]
    t0 = DwPlan(0, 1, depthwise_px(oh * ow * -(-co // 4), ow))
    return [t0] + list(dict.fromkeys(DwPlan(1, min(ry, oh), min(px, ow)) for ry, px in BATCH1_TILES))


def _plan_kernel(k, plan: DwPlan):
    """Kernel k (a batch-1 depthwise with vec4 views, planned otherwise) under `plan`."""
    d = {n: v for n, v in k.defines.items() if n not in ("RY", "OYB", "WREG")}
    oxb = -(-d["OW"] // plan.px)
    if plan.tile:
        oyb = -(-d["OH"] // plan.ry)
        d.update(RY=plan.ry, OYB=oyb, WREG=int(weights_in_registers(d["KH"], d["KW"], True)))
        inv = d["N"] * oyb * oxb * d["CG"]
    else:
        inv = d["N"] * d["OH"] * oxb * d["CG"]
    d.update(TILE=plan.tile, PX=plan.px, OXB=oxb)
    return dataclasses.replace(k, defines=d, invocations=inv, variants=[])


def plan_variants(plan: DwPlan, n, oh, ow, co: int, kh: int, kw: int, vec: bool) -> list:
    """The other batch1_plans of a layer planned `plan`, as `measured` variants (none where the plan was
    forced or the layer has no such candidates)."""
    cands = batch1_plans(n, oh, ow, co, kh, kw, vec)
    if current().dw_plan is not None or plan not in cands:
        return []
    return [KernelVariant(f"dw_t{c.tile}_{c.ry}x{c.px}", {}, lambda k, c=c: _plan_kernel(k, c), measured=True)
            for c in cands if c != plan]
