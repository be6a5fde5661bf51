"""Planning of the one `depthwise` dispatch of a DEPTHWISE_CONV_2D (shaders/depthwise.comp): which path
and how much output each invocation computes.

* TILE=0 (`depthwise_px`): 4 channels x PX (1, 2, 4) pixels of one row per invocation, vec4 loads when
  CO % 4 == 0 and MULT == 1.  Each input element is loaded ~KH * SPAN / PX times.
* TILE=1: 1 channel x an RY x PX pixel tile per invocation, the KH*KW weights in registers, the
  tile's (RY-1)*SH + (KH-1)*DH + 1 input rows swept once: each input element is loaded
  ~(SPAN / PX) * (IR / RY) times.  Needs the filter taps (plus the tile and one input row) to fit in
  registers, so kernels up to TILE_MAX_TAPS taps.

Both read and write every tensor once from DRAM; the difference is the load traffic through L1,
which bounds the big-batch layers (convnext_tiny b32, 7x7: TILE=0 ran at ~15% of DRAM bandwidth).
The tile is the largest one (most reuse) that still leaves MIN_INVOCATIONS invocations, so batch-1
layers keep enough threads in flight.  FORCE (benchmarks/depthwise_bench.py) overrides the choice.
"""
from __future__ import annotations

from dataclasses import dataclass

TILE_MAX_TAPS = 64            # weights held in registers: up to 8x8 (7x7 ConvNeXt, 5x5 EfficientNet)
MAX_REGS = 160                # tile accumulators + taps + one input row, floats per invocation
MIN_INVOCATIONS = 132 * 1024  # keep every SM of a big GPU busy (H100: 132 SMs)
TILES = ((8, 8), (4, 8), (4, 4), (2, 4), (2, 2), (1, 2), (1, 1))   # (RY, PX), most reuse first
FORCE: "DwPlan | None" = None


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


def loads_per_output(p: DwPlan, kh: int, kw: int, sh: int, sw: int, dh: int, dw: int) -> float:
    """Input + weight elements loaded per output element (the L1 traffic the plan costs)."""
    span = (p.px - 1) * sw + (kw - 1) * dw + 1
    if p.tile == 0:
        return (kh * span + kh * kw) / p.px
    rows = (p.ry - 1) * sh + (kh - 1) * dh + 1
    used = min(rows, p.ry * kh)                    # rows between dilated taps are skipped
    return (used * span + kh * kw / 1.0) / (p.ry * p.px)


def tile_fits(ry: int, px: int, kh: int, kw: int, sw: int, dw: int) -> bool:
    span = (px - 1) * sw + (kw - 1) * dw + 1
    return kh * kw <= TILE_MAX_TAPS and ry * px + kh * kw + span <= MAX_REGS


def plan_depthwise(n: int, oh: int, ow: int, co: int, kh: int, kw: int, sh: int, sw: int, dh: int, dw: int,
                   old: bool = False) -> DwPlan:
    """The plan for one layer (sizes: the bound of a dynamic dim).  old=True: today's TILE=0 plan."""
    if FORCE is not None and not old:
        return DwPlan(FORCE.tile, max(1, min(FORCE.ry, oh)), max(1, min(FORCE.px, ow)), FORCE.scalar)
    cg = -(-co // 4)
    old_plan = DwPlan(0, 1, depthwise_px(n * oh * ow * cg, ow))
    if old:
        return old_plan
    for ry, px in TILES:
        ry, px = min(ry, oh), min(px, ow)
        if not tile_fits(ry, px, kh, kw, sw, dw):
            continue
        inv = n * -(-oh // ry) * -(-ow // px) * co
        if inv >= MIN_INVOCATIONS or (ry, px) == (1, 1):
            cand = DwPlan(1, ry, px)
            if loads_per_output(cand, kh, kw, sh, sw, dh, dw) < loads_per_output(old_plan, kh, kw, sh, sw, dh, dw):
                return cand
            return old_plan
    return old_plan
