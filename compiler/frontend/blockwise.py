"""Blockwise-quantized constants (TFLite QuantizationParameters.details = BlockwiseQuantization): what
litert-torch's `dynamic_int4_block32` / `_block128` exports write for FULLY_CONNECTED weights and the token
embedding.  The weight [N, K] is int4 (two a byte, the low nibble first, -8..7); its scales are a float
tensor of N x K / block_size values (the block runs along the last axis, K), no zero points; XNNPACK (LiteRT's
default CPU path) rounds the scales to bfloat16, and so does gpuc.

`dequantize(tensors, tvec, where)` makes each such constant a float32 constant q * scale[n, k // block] at
import; `dynamic_fcs` then makes each FC over one quantize its activations per row first, as LiteRT's
kernels do (compiler/ops/blockwise_fc.py: a plain float FC is ~2e-2 of the logits' range off LiteRT on a tiny
int4 Llama, this ~1e-7).  The embedding lookup reads the float table (LiteRT dequantizes the rows it reads).  A blockwise tensor of another form (not constant, zero points, a block size that does not divide
K, scales of the wrong size) is a ModelFormatError naming it.
"""
from __future__ import annotations

import numpy as np

from gpuc.compiler import ir
from gpuc.compiler.frontend.tflite_schema import ENUMS
from gpuc.errors import ModelFormatError

BLOCKWISE = ENUMS["QuantizationDetails"]["BlockwiseQuantization"]


def _int4(raw: np.ndarray, count: int) -> np.ndarray:
    b = np.asarray(raw, np.uint8).reshape(-1)
    nib = np.stack([b & 0xF, b >> 4], -1).reshape(-1)[:count].astype(np.int8)
    return np.where(nib > 7, nib - 16, nib).astype(np.int8)


def bf16_round(v: np.ndarray) -> np.ndarray:
    """float32 values rounded to bfloat16 (to nearest, ties to even), as XNNPACK packs block scales (litert-torch
    writes them bf16-exact already; a file whose float16 scales are not is read as LiteRT's default path reads it)."""
    u = np.ascontiguousarray(v, np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return u.astype(np.uint32).view(np.float32)


def dequantize(tensors: list[ir.Tensor], tvec, where: str) -> dict:
    """Every blockwise-quantized constant of one subgraph as float32 (in place): tensor id -> (its int
    values, bf16-rounded scales, block size)."""
    done = {}
    for ti in range(len(tvec)):
        q = tvec[ti]["quantization"]
        if q is None or q["details_type"] != BLOCKWISE:
            continue
        t = tensors[ti]
        what = f"invalid model: {where}.tensors[{ti}] {t.name!r}: blockwise quantization"
        d = q.union("details", "BlockwiseQuantization")
        bs, si = int(d["block_size"]), int(d["scales"])
        if t.data is None or len(t.shape) < 1 or t.dtype not in ("int4", "int8"):
            raise ModelFormatError(f"{what} of a {t.dtype} {'constant' if t.data is not None else 'runtime tensor'}"
                                   " (gpuc reads constant int4 / int8 weights)")
        if int(d["zero_points"]) > 0:
            raise ModelFormatError(f"{what} with zero points (gpuc reads symmetric blocks)")
        K, count = int(t.shape[-1]), int(np.prod(t.shape))
        if bs <= 0 or K % bs or not 0 <= si < len(tensors) or tensors[si].data is None \
                or tensors[si].data.size != count // bs:
            raise ModelFormatError(f"{what}: block size {bs} over {list(t.shape)} with scales tensor {si}")
        vals = _int4(t.data, count) if t.dtype == "int4" else np.asarray(t.data, np.int8).reshape(-1)
        scales = bf16_round(np.asarray(tensors[si].data, np.float32).reshape(-1, 1))
        w = (vals.reshape(-1, bs).astype(np.float32) * scales).reshape(t.shape)
        tensors[ti] = ir.Tensor(t.id, t.name, t.shape, "float32", w.astype(np.float32), None, t.is_variable,
                                t.shape_signature)
        done[ti] = (vals.reshape(t.shape), scales.reshape(-1), bs)
    return done


def dynamic_fcs(g: ir.Graph, weights: dict) -> None:
    """The FCs over those weights with their activations quantized per row as LiteRT's kernels do, in
    place: one int4 kernel each where compiler/ops/gemm_qb.py takes it (CompileOptions.blockwise_kernel, on
    by default), else the plain ops of compiler/ops/blockwise_fc.py."""
    if not weights:
        return
    from gpuc.compiler.ops import blockwise_fc, gemm_qb
    from gpuc.compiler.options import current
    kernel = current().blockwise_kernel
    nodes, memo = [], {}
    for n in g.nodes:
        made = None
        if len(n.inputs) > 1 and n.inputs[1] in weights:
            if not (kernel and gemm_qb.attach(g, n, *weights[n.inputs[1]])):
                made = blockwise_fc.rewrite(g, n, memo)
        nodes += made or [n]
    g.nodes = nodes
