"""A tiny two-signature model that threads a cache through DYNAMIC_UPDATE_SLICE, as litert-torch's
prefill / decode signatures do (tests/runtime/test_signatures.py, tests/cli/test_profile.py)."""
from __future__ import annotations

import numpy as np

from .builder import ModelBuilder, signature_model

CACHE = [1, 6, 4]
W = np.arange(16, dtype=np.float32).reshape(4, 4) / 7 - 1


def _signature(n: int) -> tuple[ModelBuilder, dict]:
    """cache' = DUS(cache, x @ W, [0, pos, 0]); total = sum(cache' * 2, axis 1) (decode-like: n == 1)."""
    mb = ModelBuilder()
    x = mb.input("x", [1, n, 4])
    pos = mb.input("pos", [1], "int32")
    cache = mb.input("cache", CACHE)
    h = mb.tensor("h", [1, n, 4])
    mb.op("FULLY_CONNECTED", [x, mb.const("w", W), -1], [h], keep_num_dims=True)
    start = mb.tensor("start", [3], "int32")
    mb.op("CONCATENATION", [mb.const("z", np.zeros(1, np.int32)), pos, mb.const("z2", np.zeros(1, np.int32))],
          [start], axis=0)
    out = mb.tensor("cache_out", CACHE)
    mb.op("DYNAMIC_UPDATE_SLICE", [cache, h, start], [out])
    dbl = mb.tensor("dbl", CACHE)
    mb.op("MUL", [out, mb.const("two", np.full([1], 2, np.float32))], [dbl])
    total = mb.tensor("total", [1, 4])
    mb.op("SUM", [dbl, mb.const("ax", np.array([1], np.int32))], [total], keep_dims=False)
    mb.output(total)
    mb.output(out)
    names = {"inputs": {"x": x, "pos": pos, "cache": cache}, "outputs": {"total": total, "cache": out}}
    return mb, names


def two_signature_model() -> bytes:
    """Signatures 'fill_3' (subgraph 0) and 'step' (subgraph 1), one buffer list and opcode table."""
    return signature_model([(key, *_signature(n)) for key, n in (("fill_3", 3), ("step", 1))])
