"""Pieces of litert-torch's LLM graphs for tests: one-line node and constant makers, and the
decomposition litert-torch writes for `odml.scaled_dot_product_attention` in a decode signature
(tests/compiler/test_sdpa_decode.py, test_rope.py, test_kv_write_attention.py)."""
from __future__ import annotations

import numpy as np

from .builder import ModelBuilder

NAME = "odml.scaled_dot_product_attention"


def op(b, name, ins, shape, **opts):
    """A node `name` of `ins` with a new output of `shape` (named t1, t2 ...), which it returns."""
    b.n = getattr(b, "n", 0) + 1
    y = b.tensor(f"t{b.n}", list(shape))
    b.op(name, ins, [y], version=2 if name == "BROADCAST_TO" else 1, **opts)     # (as litert-torch declares it)
    return y


def const(b, v):
    """A constant of value `v` (named c1, c2 ...)."""
    b.n = getattr(b, "n", 0) + 1
    return b.const(f"c{b.n}", np.asarray(v))


def sdpa_decomposition(H, KH, D, KV, T, mask_shape, scale):
    """The decomposition as litert-torch's decode signature writes it (T query rows)."""
    b = ModelBuilder()
    q = b.input("q", [1, T, H, D])
    k, v = b.input("k", [1, KV, KH, D]), b.input("v", [1, KV, KH, D])
    mask = b.input("mask", list(mask_shape))
    perm = const(b, np.int32([0, 2, 1, 3]))

    def heads(x):
        xt = op(b, "TRANSPOSE", [x, perm], [1, KH, KV, D])
        x5 = op(b, "RESHAPE", [xt, const(b, np.int32([1, KH, 1, KV, D]))], [1, KH, 1, KV, D])
        return op(b, "BROADCAST_TO", [x5, const(b, np.int32([1, KH, H // KH, KV, D]))], [1, KH, H // KH, KV, D])
    kb, vb = heads(k), heads(v)
    s = const(b, np.float32(scale))
    qs = op(b, "MUL", [q, s], [1, T, H, D])
    kh = op(b, "RESHAPE", [kb, const(b, np.int32([1, H, KV, D]))], [1, H, KV, D])
    kt = op(b, "TRANSPOSE", [op(b, "MUL", [kh, s], [1, H, KV, D]), const(b, np.int32([0, 1, 3, 2]))], [1, H, D, KV])
    qt = op(b, "TRANSPOSE", [qs, perm], [1, H, T, D])
    sc = op(b, "BATCH_MATMUL", [op(b, "RESHAPE", [qt, const(b, np.int32([H, T, D]))], [H, T, D]),
                                 op(b, "RESHAPE", [kt, const(b, np.int32([H, D, KV]))], [H, D, KV])], [H, T, KV])
    p = op(b, "SOFTMAX", [op(b, "ADD", [sc, mask], [1, H, T, KV])], [1, H, T, KV], beta=1.0)
    o = op(b, "BATCH_MATMUL", [op(b, "RESHAPE", [p, const(b, np.int32([H, T, KV]))], [H, T, KV]),
                                op(b, "RESHAPE", [vb, const(b, np.int32([H, KV, D]))], [H, KV, D])], [H, T, D])
    y = op(b, "TRANSPOSE", [op(b, "RESHAPE", [o, const(b, np.int32([1, H, T, D]))], [1, H, T, D]), perm], [1, T, H, D])
    b.output(y)
    return b
