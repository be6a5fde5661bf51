"""litert-torch's decode layer in small: q and k rotated out of a fused QKV projection, k and v written into
the caches by DYNAMIC_UPDATE_SLICE at the step's position, the attention composite over the written caches
(the graph compiler/ops/kv_write.py folds into one SDPA_DECODE), and its inputs at a position."""
from __future__ import annotations

import numpy as np
from flatbuffers import flexbuffers

from helpers.builder import ModelBuilder, with_subgraphs
from helpers.llm_graphs import NAME, const, op, sdpa_decomposition

H, KH, D, KV = 4, 2, 16, 64          # (four 16-key chunks)


def _part(b, qkv, begin, heads):
    s = op(b, "SLICE", [qkv, const(b, np.int32([0, 0, begin])), const(b, np.int32([1, 1, heads * D]))], [1, 1, heads * D])
    return op(b, "RESHAPE", [s, const(b, np.int32([1, 1, heads, D]))], [1, 1, heads, D], new_shape=[1, 1, heads, D])


def _rope(b, x, heads, c, s):
    h, xs = D // 2, [1, 1, heads, D]
    half = xs[:-1] + [h]
    x1 = op(b, "SLICE", [x, const(b, np.int32([0, 0, 0, 0])), const(b, np.int32(half))], half)
    x2 = op(b, "SLICE", [x, const(b, np.int32([0, 0, 0, h])), const(b, np.int32([-1, -1, -1, h]))], half)
    o1 = op(b, "SUB", [op(b, "MUL", [x1, c], half), op(b, "MUL", [x2, s], half)], half)
    o2 = op(b, "ADD", [op(b, "MUL", [x2, c], half), op(b, "MUL", [x1, s], half)], half)
    return op(b, "CONCATENATION", [o1, o2], xs, axis=3)


def model() -> bytes:
    b = ModelBuilder()
    qkv = b.input("qkv", [1, 1, (H + 2 * KH) * D])
    c, s = b.input("cos", [1, 1, 1, D // 2]), b.input("sin", [1, 1, 1, D // 2])
    kc, vc = b.input("kv_cache_k", [1, KV, KH, D]), b.input("kv_cache_v", [1, KV, KH, D])
    start, mask = b.input("start", [4], "int32"), b.input("mask", [1, 1, 1, KV])
    q = _rope(b, _part(b, qkv, 0, H), H, c, s)
    k = _rope(b, _part(b, qkv, H * D, KH), KH, c, s)
    ko = op(b, "DYNAMIC_UPDATE_SLICE", [kc, k, start], [1, KV, KH, D])
    vo = op(b, "DYNAMIC_UPDATE_SLICE", [vc, _part(b, qkv, (H + KH) * D, KH), start], [1, KV, KH, D])
    y = b.tensor("y", [1, 1, H, D])
    b.operators.append({"opcode_index": b.opcode("STABLEHLO_COMPOSITE"), "inputs": np.asarray([q, ko, vo, mask], np.int32),
                        "outputs": np.asarray([y], np.int32),
                        "builtin_options2": ("StableHLOCompositeOptions",
                                             {"name": NAME, "decomposition_subgraph_index": 1,
                                              "composite_attributes": np.frombuffer(flexbuffers.Dumps({}), np.uint8)})})
    for o in (y, ko, vo):
        b.output(o)
    return with_subgraphs(b, sdpa_decomposition(H, KH, D, KV, 1, (1, 1, 1, KV), D ** -0.25))


def inputs(pos, seed=0):
    r = np.random.default_rng(seed)
    ang = r.uniform(-3, 3, [1, 1, 1, D // 2]).astype(np.float32)
    mask = np.zeros([1, 1, 1, KV], np.float32)
    mask[..., min(pos, KV - 1) + 1:] = np.finfo(np.float32).min          # (causal: keys up to the position)
    return [r.standard_normal([1, 1, (H + 2 * KH) * D]).astype(np.float32), np.cos(ang), np.sin(ang),
            r.standard_normal([1, KV, KH, D]).astype(np.float32), r.standard_normal([1, KV, KH, D]).astype(np.float32),
            np.int32([0, pos, 0, 0]), mask]
