"""`odml.scaled_dot_product_attention` rebuilt from what the composite means, not from its decomposition.

litert-torch marks attention as a composite over q [B, T, H, D], k and v [B, KV, KH, D] (H a multiple of
KH: grouped-query attention, each KV head repeated to H / KH query heads) and an additive mask, with
attributes `scale` and optionally `logit_cap` (layers/scaled_dot_product_attention.py there).  LiteRT's
default CPU path (XNNPACK) runs the composite natively from these; its decomposition subgraph is only the
plain-op fallback, and it is not always right: with one KV head (KH = 1, e.g. TinyLlama's 32 / 4 heads
shrunk) litert-torch 0.10 writes K^T as a RESHAPE of k [1, KV, 1, D] to [1, 1, D, KV], a reinterpretation
where a transpose is meant, so the plain kernels (and a faithful inlining) compute garbage.

`canonical(n, s)` gives a decomposition graph in the form litert-torch writes where it is right (the form
compiler/ops/sdpa_decode.py fuses and passes/attention.py matches): TRANSPOSE k, v to head-major, RESHAPE +
BROADCAST_TO + RESHAPE to repeat them to H heads, q and k each times sqrt(scale), BATCH_MATMUL(Q, K^T),
ADD mask, SOFTMAX, BATCH_MATMUL(P, V), back to [B, T, H, D].  With `logit_cap` c: q times scale, the
scores divided by c, TANH, times c, as litert-torch's softcap branch.  It returns None (the model's own
decomposition is used) for anything else: no mask input, an attribute it does not know, another layout
(e.g. litert-torch's transposed KV cache), a batch over 1, non-float32 tensors.
"""
from __future__ import annotations

import numpy as np

from gpuc.compiler import ir
from gpuc.compiler.ops.decomposition import attributes

NAME = "odml.scaled_dot_product_attention"
KNOWN = {"scale", "logit_cap"}


def canonical(n: ir.Node, s: ir.Graph) -> ir.Graph | None:
    """A decomposition of SDPA composite `n` (whose model decomposition is `s`) built from its inputs'
    shapes and attributes, or None where the composite is not the form described above."""
    if (n.attrs.get("name") or "") != NAME or len(s.inputs) != 4 or len(s.outputs) != 1:
        return None
    attrs = attributes(n)
    if set(attrs) - KNOWN or not isinstance(attrs.get("scale"), (int, float)):
        return None
    cap = attrs.get("logit_cap")
    if cap is not None and (not isinstance(cap, (int, float)) or not cap > 0):
        return None
    q, k, v, mask, y = (s.t(i) for i in (*s.inputs, s.outputs[0]))
    if any(t.dtype != "float32" for t in (q, k, v, mask, y)) or len(q.shape) != 4 or len(k.shape) != 4:
        return None
    try:
        B, T, H, D = (int(x) for x in q.shape)
        _, KV, KH, DK = (int(x) for x in k.shape)
    except TypeError:                                   # (symbolic dimensions)
        return None
    if B != 1 or tuple(k.shape) != tuple(v.shape) or k.shape[0] != 1 or DK != D or KH < 1 or H % KH \
            or tuple(y.shape) != (B, T, H, D) or len(mask.shape) > 4:
        return None
    mshape = (1,) * (4 - len(mask.shape)) + tuple(int(x) for x in mask.shape)
    if any(m not in (1, w) for m, w in zip(mshape, (B, H, T, KV))):
        return None                                     # (the mask must broadcast to [B, H, T, KV])
    return _build(s.name, H, T, D, KV, KH, float(attrs["scale"]), cap, mask.shape)


def _build(name, H, T, D, KV, KH, scale, cap, mask_shape) -> ir.Graph:
    g = ir.Graph(f"{name}/canonical", [], [], [], [])
    f32 = "float32"
    q = g.add_tensor("q", (1, T, H, D), f32)
    k = g.add_tensor("k", (1, KV, KH, D), f32)
    v = g.add_tensor("v", (1, KV, KH, D), f32)
    mask = g.add_tensor("mask", mask_shape, f32)
    g.inputs = [q, k, v, mask]
    count = [0]

    def op(kind, ins, shape, **attrs):
        count[0] += 1
        out = g.add_tensor(f"{kind.lower()}_{count[0]}", shape, f32)
        g.nodes.append(ir.Node(kind, ins, [out], attrs, 2 if kind == "BROADCAST_TO" else 1))
        return out

    def const(arr):
        count[0] += 1
        return g.add_const(f"const_{count[0]}", arr)

    def transpose(x, perm, shape):
        return op("TRANSPOSE", [x, const(np.array(perm, np.int32))], shape)

    def reshape(x, shape):
        return op("RESHAPE", [x, const(np.array(shape, np.int32))], shape, new_shape=list(shape))

    def mul(x, c, shape):
        return op("MUL", [x, const(np.array(c, np.float32))], shape, fused_activation_function=0)

    G = H // KH

    def heads(x):                                       # [1, KV, KH, D] -> [1, KH, G, KV, D] (GQA repeat)
        x = transpose(x, [0, 2, 1, 3], (1, KH, KV, D))
        if G == 1:
            return x
        x = reshape(x, (1, KH, 1, KV, D))
        return op("BROADCAST_TO", [x, const(np.array([1, KH, G, KV, D], np.int32))], (1, KH, G, KV, D))

    kh, vh = heads(k), heads(v)
    if G > 1:
        kh = reshape(kh, (1, H, KV, D))
    qscale, kscale = (np.float32(scale), None) if cap is not None else (np.float32(np.sqrt(scale)),) * 2
    qs = transpose(mul(q, qscale, (1, T, H, D)), [0, 2, 1, 3], (1, H, T, D))
    if kscale is not None:
        kh = mul(kh, kscale, (1, H, KV, D))
    kt = transpose(kh, [0, 1, 3, 2], (1, H, D, KV))
    scores = op("BATCH_MATMUL", [reshape(qs, (H, T, D)), reshape(kt, (H, D, KV))], (H, T, KV),
                adj_x=False, adj_y=False, asymmetric_quantize_inputs=False)
    if cap is not None:
        scores = op("DIV", [scores, const(np.array(cap, np.float32))], (H, T, KV), fused_activation_function=0)
        scores = op("TANH", [scores], (H, T, KV))
        scores = mul(scores, np.float32(cap), (H, T, KV))
    wide = tuple(int(x) for x in np.broadcast_shapes((H, T, KV), tuple(mask_shape)))
    masked = op("ADD", [scores, mask], wide, fused_activation_function=0, pot_scale_int16=True)
    p = op("SOFTMAX", [masked], wide, beta=1.0)
    o = op("BATCH_MATMUL", [reshape(p, (H, T, KV)), reshape(vh, (H, KV, D))], (H, T, D),
           adj_x=False, adj_y=False, asymmetric_quantize_inputs=False)
    y = transpose(reshape(o, (1, H, T, D)), [0, 2, 1, 3], (1, T, H, D))
    g.outputs = [y]
    return g
