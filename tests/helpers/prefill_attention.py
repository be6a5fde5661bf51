"""LLM prefill attention as litert-torch writes odml.scaled_dot_product_attention's decomposition
(benchmarks/llm_bench.py): q [1, T, H, D], the KV caches [1, KV, KH, D] read through a head transpose and
the GQA broadcast, a causal mask gathered from a constant table by the positions; and its numpy value.
tests/compiler/test_attention_prefill.py checks gpuc on it; the H100 timing in its report builds it too."""
from __future__ import annotations

import numpy as np

from .builder import ModelBuilder


def prefill_sdpa(T=40, KV=128, H=4, KH=2, D=16, gqa="broadcast_to", fill=np.finfo(np.float32).min):
    """q [1, T, H, D], caches [1, KV, KH, D], positions [T] -> [1, T, H, D] (benchmarks/llm_bench.py's
    decomposition of odml.scaled_dot_product_attention)."""
    mb = ModelBuilder()
    q = mb.input("q", [1, T, H, D])
    k = mb.input("k", [1, KV, KH, D])
    v = mb.input("v", [1, KV, KH, D])
    pos = mb.input("pos", [T], "int32")
    n = [0]

    def t(shape, dtype="float32"):
        n[0] += 1
        return mb.tensor(f"t{n[0]}", shape, dtype)

    def op(name, ins, shape, dtype="float32", **kw):
        y = t(shape, dtype)
        mb.op(name, ins, [y], **kw)
        return y

    def i32(vals):
        n[0] += 1
        return mb.const(f"c{n[0]}", np.array(vals, np.int32))

    def reshape(x, shape, dtype="float32"):
        return op("RESHAPE", [x, i32(shape)], shape, dtype, new_shape=list(shape))

    table = np.where(np.arange(KV)[None, :] <= np.arange(KV)[:, None], 0, fill).astype(np.float32)
    mask = op("GATHER_ND", [mb.const("table", table), reshape(pos, [T, 1], "int32")], [T, KV])
    mask = reshape(mask, [1, 1, T, KV])
    perm, G = i32([0, 2, 1, 3]), H // KH

    def heads(x):
        x5 = reshape(op("TRANSPOSE", [x, perm], [1, KH, KV, D]), [1, KH, 1, KV, D])
        if gqa == "broadcast_to":
            xb = op("BROADCAST_TO", [x5, i32([1, KH, G, KV, D])], [1, KH, G, KV, D], version=2)
        else:
            xb = op("TILE", [x5, i32([1, 1, G, 1, 1])], [1, KH, G, KV, D])
        return reshape(xb, [1, H, KV, D])
    scale = mb.const("scale", np.float32(D ** -0.25))
    kh, vh = heads(k), heads(v)
    qt = op("TRANSPOSE", [op("MUL", [q, scale], [1, T, H, D]), perm], [1, H, T, D])
    kt = op("TRANSPOSE", [op("MUL", [kh, scale], [1, H, KV, D]), i32([0, 1, 3, 2])], [1, H, D, KV])
    s = op("BATCH_MATMUL", [reshape(qt, [H, T, D]), reshape(kt, [H, D, KV])], [H, T, KV])
    p = op("SOFTMAX", [op("ADD", [s, mask], [1, H, T, KV])], [1, H, T, KV], beta=1.0)
    o = op("BATCH_MATMUL", [reshape(p, [H, T, KV]), reshape(vh, [H, KV, D])], [H, T, D])
    mb.output(op("TRANSPOSE", [reshape(o, [1, H, T, D]), perm], [1, T, H, D]))
    return mb.finish()


def prefill_reference(q, k, v, pos, fill=np.finfo(np.float32).min):
    """softmax(Q K^T / sqrt(D) + mask) V in float64, the cache's KV head h // (H / KH) for query head h."""
    T, H, D = q.shape[1:]
    KV, KH = k.shape[1:3]
    kh = np.repeat(k[0].astype(np.float64), H // KH, axis=1)         # [KV, H, D]
    vh = np.repeat(v[0].astype(np.float64), H // KH, axis=1)
    s = np.einsum("thd,khd->htk", q[0].astype(np.float64), kh, optimize=True) / np.sqrt(D)
    s = s + np.where(np.arange(KV)[None, :] <= pos[:, None], 0.0, fill)[None]
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    return np.einsum("htk,khd->thd", p, vh, optimize=True)[None].astype(np.float32)
