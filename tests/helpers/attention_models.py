"""Tiny attention models (BATCH_MATMUL, scale, mask ADDs, SOFTMAX, BATCH_MATMUL) in the forms converters
emit, for tests/compiler/test_attention_fusion.py and benchmarks/archive/attention_bench.py."""
from __future__ import annotations

import numpy as np

from helpers.builder import ModelBuilder


def attention_model(b=2, h=3, n=5, m=None, d=8, dv=None, *, k_form="adj_y", scale="after", scale_value=None,
                    mask=None, v_form="plain", q_form="plain", split="slice", out_form="plain", flat=False, beta=1.0,
                    expose=None, seed=0):
    """One attention over Q [b, h, n, d] (inputs, or made from one token tensor for q_form="heads").

    k_form: "adj_y" (K [b, h, m, d], adj_y), "transpose" (K [b, h, m, d] -> TRANSPOSE -> [b, h, d, m]),
            "given" (an input already [b, h, d, m]).
    scale:  None, "after" (MUL of the scores), "after_first" (MUL(c, scores)), "div" (DIV of the scores),
            "q" (MUL of Q before the product), "qk" (Q and K both), "beta" (SOFTMAX beta).
    mask:   None, "heads" (constant [h, n, m]), "runtime" (an input [b, h, n, m], added as ADD(mask, s)),
            "keys" (constant [m]), "swin" (constant [1, h, n, m], then a runtime [b, n, m] mask added as
            [1, b, 1, n, m] after a RESHAPE, as torchvision's shifted windows), "neg_inf" (a constant
            [1, 1, n, m] causal mask of -inf), "sub" (SUB of a runtime [1, 1, 1, m] input).
    v_form: "plain" (V [b, h, m, dv]) or "adj_y" (V [b, h, dv, m], adj_y on the second product).
    q_form: "plain" or "heads": Q, K and V sliced as heads out of one [b, n, h * 3 * d] input
            (RESHAPE + TRANSPOSE head split, as a fused qkv projection; m = n, dv = d), taken apart by
            split= "slice" (SLICE + RESHAPE), "strided" (STRIDED_SLICE shrinking the axis), "split"
            (SPLIT + RESHAPE) or "unpack" (UNPACK).
    out_form: "plain" or "merge" (the output TRANSPOSE + RESHAPE back to [b, n, h * dv]).
    flat:   the scores reshaped to [b * h, n, m] around the chain (litert-torch's 3-D products).
    expose: None, "scores", "probs" or "scaled": that intermediate is also a model output.
    Returns (model bytes, input shapes)."""
    m = m or n
    dv = dv or d
    rng = np.random.default_rng(seed)
    mb = ModelBuilder()
    cst = lambda name, v: mb.const(name, np.asarray(v, np.float32))     # noqa: E731
    sc = float(scale_value if scale_value is not None else 1.0 / np.sqrt(d))
    shapes = []

    def inp(name, shape):
        shapes.append(tuple(shape))
        return mb.input(name, list(shape))

    def op(name, kind, ins, shape, **kw):
        t = mb.tensor(name, list(shape))
        mb.op(kind, ins, [t], **kw)
        return t

    if q_form == "heads":
        m, dv = n, d
        x = inp("qkv", (b, n, 3 * h * d))
        x5 = op("qkv5", "RESHAPE", [x, mb.const("s5", np.array([b, n, 3, h, d], np.int32))], (b, n, 3, h, d))
        t5 = op("qkvT", "TRANSPOSE", [x5, mb.const("p5", np.array([2, 0, 3, 1, 4], np.int32))], (3, b, h, n, d))
        parts = []
        if split in ("split", "unpack"):
            outs = [mb.tensor(f"{nm}s", [1, b, h, n, d] if split == "split" else [b, h, n, d]) for nm in "qkv"]
            if split == "split":
                mb.op("SPLIT", [mb.const("ax", np.array([0], np.int32)), t5], outs, num_splits=3)
            else:
                mb.op("UNPACK", [t5], outs, num=3, axis=0)
        for i, nm in enumerate("qkv"):
            if split == "slice":
                s = op(f"{nm}s", "SLICE", [t5, mb.const(f"b{nm}", np.array([i, 0, 0, 0, 0], np.int32)),
                                            mb.const(f"z{nm}", np.array([1, b, h, n, d], np.int32))], (1, b, h, n, d))
            elif split == "strided":
                s = op(f"{nm}s", "STRIDED_SLICE", [t5, mb.const(f"b{nm}", np.array([i, 0, 0, 0, 0], np.int32)),
                                                    mb.const(f"e{nm}", np.array([i + 1, 0, 0, 0, 0], np.int32)),
                                                    mb.const(f"t{nm}", np.array([1, 1, 1, 1, 1], np.int32))],
                       (b, h, n, d), begin_mask=30, end_mask=30, shrink_axis_mask=1)
            else:
                s = outs[i]
            parts.append(s if split in ("strided", "unpack") else
                         op(f"{nm}4", "RESHAPE", [s, mb.const(f"r{nm}", np.array([b, h, n, d], np.int32))], (b, h, n, d)))
        Q, K, V = parts
        k_in_shape = (b, h, m, d)
    else:
        Q = inp("q", (b, h, n, d))
        k_in_shape = (b, h, d, m) if k_form == "given" else (b, h, m, d)
        K = inp("k", k_in_shape)
        V = inp("v", (b, h, dv, m) if v_form == "adj_y" else (b, h, m, dv))
    if scale in ("q", "qk"):
        f = np.sqrt(sc) if scale == "qk" else sc
        Q = op("q_scaled", "MUL", [Q, cst("q_sc", f)], (b, h, n, d))
        if scale == "qk":
            K = op("k_scaled", "MUL", [cst("k_sc", f), K], k_in_shape)
    if k_form == "transpose" or (q_form == "heads" and k_form != "adj_y"):
        K = op("kT", "TRANSPOSE", [K, mb.const("pk", np.array([0, 1, 3, 2], np.int32))], (b, h, d, m))
    adj_y = k_form == "adj_y"
    sshape = (b, h, n, m)
    if flat:
        Q = op("q3", "RESHAPE", [Q, mb.const("q3s", np.array([b * h, n, d], np.int32))], (b * h, n, d))
        kshape = (b * h, m, d) if adj_y else (b * h, d, m)
        K = op("k3", "RESHAPE", [K, mb.const("k3s", np.array(kshape, np.int32))], kshape)
        S3 = op("s3", "BATCH_MATMUL", [Q, K], (b * h, n, m), adj_x=False, adj_y=adj_y)
        S = op("s", "RESHAPE", [S3, mb.const("s4s", np.array(sshape, np.int32))], sshape)
        scores = S3
    else:
        S = scores = op("s", "BATCH_MATMUL", [Q, K], sshape, adj_x=False, adj_y=adj_y)
    if scale == "after":
        S = op("scaled", "MUL", [S, cst("sc", sc)], sshape)
    elif scale == "after_first":
        S = op("scaled", "MUL", [cst("sc", sc), S], sshape)
    elif scale == "div":
        S = op("scaled", "DIV", [S, cst("sc", 1.0 / sc)], sshape)
    scaled = S
    if mask == "heads":
        S = op("biased", "ADD", [S, cst("bias", rng.normal(0, 1, (h, n, m)))], sshape)
    elif mask == "keys":
        S = op("biased", "ADD", [S, cst("bias", rng.normal(0, 1, (m,)))], sshape)
    elif mask == "runtime":
        S = op("biased", "ADD", [inp("mask", sshape), S], sshape)
    elif mask == "sub":
        S = op("biased", "SUB", [S, inp("mask", (1, 1, 1, m))], sshape)
    elif mask == "neg_inf":
        causal = np.where(np.arange(m)[None, :] > np.arange(n)[:, None] + (m - n), -np.inf, 0.0)
        S = op("biased", "ADD", [S, cst("causal", causal.reshape(1, 1, n, m))], sshape)
    elif mask == "swin":
        S = op("biased", "ADD", [S, cst("rpb", rng.normal(0, 1, (1, h, n, m)))], sshape)
        S5 = op("s5d", "RESHAPE", [S, mb.const("s5s", np.array([1, b, h, n, m], np.int32))], (1, b, h, n, m))
        wm = inp("mask", (b, n, m))
        W5 = op("wm5", "RESHAPE", [wm, mb.const("w5s", np.array([1, b, 1, n, m], np.int32))], (1, b, 1, n, m))
        S5 = op("masked", "ADD", [S5, W5], (1, b, h, n, m))
        S = op("s4", "RESHAPE", [S5, mb.const("s4b", np.array(sshape, np.int32))], sshape)
    P = op("p", "SOFTMAX", [S], sshape, beta=sc if scale == "beta" else beta)
    vshape = (b, h, dv, m) if v_form == "adj_y" else (b, h, m, dv)
    if flat:
        P = op("p3", "RESHAPE", [P, mb.const("p3s", np.array([b * h, n, m], np.int32))], (b * h, n, m))
        V = op("v3", "RESHAPE", [V, mb.const("v3s", np.array((b * h,) + vshape[2:], np.int32))],
               (b * h,) + vshape[2:])
        O = op("o3", "BATCH_MATMUL", [P, V], (b * h, n, dv), adj_x=False, adj_y=v_form == "adj_y")
        O = op("o", "RESHAPE", [O, mb.const("o4s", np.array([b, h, n, dv], np.int32))], (b, h, n, dv))
    else:
        O = op("o", "BATCH_MATMUL", [P, V], (b, h, n, dv), adj_x=False, adj_y=v_form == "adj_y")
    if out_form == "merge":
        O = op("oT", "TRANSPOSE", [O, mb.const("po", np.array([0, 2, 1, 3], np.int32))], (b, n, h, dv))
        O = op("om", "RESHAPE", [O, mb.const("oms", np.array([b, n, h * dv], np.int32))], (b, n, h * dv))
    mb.output(O)
    if expose:
        mb.output({"scores": scores, "probs": P, "scaled": scaled}[expose])
    return mb.finish(), shapes


def attention_ref(q, k, v, scale, bias=None):
    """float64 softmax(q k^T * scale + bias) v over the last two axes (q [.., n, d], k [.., m, d])."""
    s = np.einsum("...nd,...md->...nm", q.astype(np.float64), k.astype(np.float64)) * scale
    if bias is not None:
        s = s + bias
    s = np.exp(s - s.max(-1, keepdims=True))
    return np.einsum("...nm,...md->...nd", s / s.sum(-1, keepdims=True), v.astype(np.float64))
