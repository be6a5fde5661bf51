"""The registry facts every native-int8 internal op shares (INT8_CONV_2D, INT8_ADD, ...: made by passes/quant.py
native_int8 after shapes are propagated, so no shape, exactness, symbolic or batch rule of their own; no CPU
kernel; never in place): `declare_int8` adds each op's own (work estimate, templates, pieces, fp16 rule)."""
from __future__ import annotations

from gpuc.compiler.ops import NEUTRAL, Why, declare

MADE = Why("an internal op passes/quant.py native_int8 makes after shapes are propagated")
NO_CPU = Why("internal op: no CPU kernel (a model whose ops lack int8 kernels runs as a float program)")


def declare_int8(*ops: str, flops, templates=None, pieces: str = "computes values", fp16=NEUTRAL) -> None:
    facts = dict(shape=MADE, exact=MADE, sym_shape=MADE, batch=MADE, pieces=Why(pieces), fp16=fp16, in_place=False,
                 flops=flops, cpu=NO_CPU)
    if templates is not None:
        facts["templates"] = templates
    declare(*ops, **facts)
