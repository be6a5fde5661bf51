"""The int8 chains of scripts/fuzz_chains.py (--int8): a float input QUANTIZEd to int8, 2..5 int8 ops with
quantization parameters as converters write them (per-channel symmetric int8 weights, int32 biases at input
scale x weight scale, the fixed output scales of SOFTMAX / LOGISTIC / TANH / LOG_SOFTMAX / L2_NORMALIZATION,
pooling and movement keeping their input's), then DEQUANTIZE.  gpuc must be on the same quantization steps as
one of LiteRT's interpreters (full-integer models are bit-exact with LiteRT); a failure says how many steps an
output is off."""
from __future__ import annotations

import numpy as np

from fuzz_chains import ACTS, Chain, MAX_ELEMS, _conv_out


class Q:
    """An int8 value of the chain: tensor id, shape, (scale, zero point), and a rough bound of |float value|."""

    def __init__(self, tid, shape, scale, zp, bound):
        self.tid, self.shape, self.scale, self.zp, self.bound = tid, list(shape), float(scale), int(zp), float(bound)


def _qt(c: Chain, shape, bound, scale=None, zp=None):
    """A new int8 tensor for values of about |bound| (scale and zero point picked around it unless given)."""
    if scale is None:
        scale = max(bound, 1e-3) / 127.0 * float(c.rng.uniform(0.6, 1.6))
        zp = int(c.rng.integers(-20, 21))
    return c.mb.tensor(c.name("q"), list(shape), "int8", quant=(scale, zp)), scale, zp


def _same(c: Chain, v: Q, shape):
    tid, _, _ = _qt(c, shape, v.bound, v.scale, v.zp)
    return Q(tid, shape, v.scale, v.zp, v.bound)


def _binary(c: Chain, v: Q):
    op = c.pick(("ADD", "MUL", "SUB", "SQUARED_DIFFERENCE", "DIV"))
    os_ = [d if c.rng.random() < 0.7 else 1 for d in v.shape]
    ob = float(c.rng.uniform(0.5, 2.0))
    if op == "DIV" or c.rng.random() < 0.5:     # (DIV: a constant divisor away from its zero point, as LiteRT needs)
        s = ob / 127.0
        zp = int(c.rng.integers(-10, 11))
        q = np.clip(np.round(c.rng.uniform(-ob, ob, os_) / s) + zp, -128, 127).astype(np.int8)
        if op == "DIV":
            q = np.where(np.abs(q.astype(int) - zp) < 20, np.clip(zp + 20, -128, 127), q).astype(np.int8)
        other = c.mb.const(c.name("k"), q, quant=(s, zp))
    else:
        x = c.input(os_)
        other, s, zp = _qt(c, os_, 2.0)
        c.mb.op("QUANTIZE", [x], [other])
    bound = v.bound * ob if op == "MUL" else (v.bound + ob) ** 2 if op == "SQUARED_DIFFERENCE" else \
        v.bound * 8.0 if op == "DIV" else v.bound + ob
    out = list(np.broadcast_shapes(tuple(v.shape), tuple(os_)))
    tid, s_o, zp_o = _qt(c, out, bound)
    c.mb.op(op, [v.tid, other] if op == "DIV" or c.rng.random() < 0.7 else [other, v.tid], [tid],
            **({} if op == "SQUARED_DIFFERENCE" else {"fused_activation_function": c.pick(ACTS)}))
    return Q(tid, out, s_o, zp_o, bound)


def _weights(c: Chain, shape, axis):
    w = c.uniform(shape)
    red = tuple(i for i in range(len(shape)) if i != axis)
    scale = np.maximum(np.abs(w).max(axis=red), 1e-3) / 127.0
    q = np.clip(np.round(w / np.expand_dims(scale, red)), -127, 127).astype(np.int8)
    return q, scale.astype(np.float32)


def _window(c: Chain, v: Q):
    """(n, c, k, stride, SAME?, oh, ow) of a random window over a 4-d value, or None where it has no output."""
    if len(v.shape) != 4:
        return None
    n, h, w, ch = v.shape
    k, s = int(c.rng.integers(1, 4)), int(c.rng.integers(1, 3))
    same = bool(c.rng.integers(2))
    oh, ow = _conv_out(h, k, s, 1, same), _conv_out(w, k, s, 1, same)
    return None if oh < 1 or ow < 1 else (n, ch, k, s, same, oh, ow)


def _conv(c: Chain, v: Q):
    win = _window(c, v)
    if win is None:
        return None
    n, ci, k, s, same, oh, ow = win
    dw = c.rng.random() < 0.4
    co = ci if dw else int(c.rng.integers(1, 9))
    q, ws = _weights(c, [1, k, k, co] if dw else [co, k, k, ci], 3 if dw else 0)
    wt = c.mb.const(c.name("w"), q, quant=(ws, 0, 3 if dw else 0))
    bias = np.round(c.rng.uniform(-0.5, 0.5, co) / (v.scale * ws)).astype(np.int32)
    bt = c.mb.const(c.name("b"), bias, quant=((v.scale * ws).astype(np.float32), 0))
    bound = v.bound * (k * k if dw else k * k * ci) * 0.3 + 0.5
    out = [n, oh, ow, co]
    tid, s_o, zp_o = _qt(c, out, bound)
    opts = dict(padding="SAME" if same else "VALID", stride_w=s, stride_h=s, fused_activation_function=c.pick(ACTS))
    if dw:
        opts["depth_multiplier"] = 1
    c.mb.op("DEPTHWISE_CONV_2D" if dw else "CONV_2D", [v.tid, wt, bt], [tid], **opts)
    return Q(tid, out, s_o, zp_o, bound)


def _transpose_conv(c: Chain, v: Q):
    """TRANSPOSE_CONV of a 4-d value: kernel 1..3, strides 1..3, SAME / VALID with any output size LiteRT maps back
    onto the input, per-channel weights, a bias or none."""
    if len(v.shape) != 4:
        return None
    n, h, w, ci = v.shape
    k, s = [int(v_) for v_ in c.rng.integers(1, 4, 2)], [int(v_) for v_ in c.rng.integers(1, 4, 2)]
    same = bool(c.rng.integers(2))
    r = [int(c.rng.integers(0, st)) for st in s]
    oh, ow = (h * s[0] - r[0], w * s[1] - r[1]) if same else ((h - 1) * s[0] + k[0] + r[0], (w - 1) * s[1] + k[1] + r[1])
    co = int(c.rng.integers(1, 11))
    q, ws = _weights(c, [co, k[0], k[1], ci], 0)
    out = [n, oh, ow, co]
    ins = [c.const(np.array(out, np.int32)), c.mb.const(c.name("w"), q, quant=(ws, 0, 0)), v.tid]
    if c.rng.random() < 0.8:
        bias = np.round(c.rng.uniform(-0.5, 0.5, co) / (v.scale * ws)).astype(np.int32)
        ins.append(c.mb.const(c.name("b"), bias, quant=((v.scale * ws).astype(np.float32), 0)))
    bound = v.bound * k[0] * k[1] * ci * 0.3 / max(1, s[0] * s[1] // 2) + 0.5
    tid, s_o, zp_o = _qt(c, out, bound)
    act = c.pick(ACTS)
    c.mb.op("TRANSPOSE_CONV", ins, [tid], version=4 if act != "NONE" else 3 if len(ins) == 4 else 2,
            padding="SAME" if same else "VALID", stride_h=s[0], stride_w=s[1], fused_activation_function=act)
    return Q(tid, out, s_o, zp_o, bound)


def _fc(c: Chain, v: Q):
    k = v.shape[-1]
    n = int(c.rng.integers(1, 17))
    per_channel = c.rng.random() < 0.5
    if per_channel:
        q, ws = _weights(c, [n, k], 0)
    else:
        w = c.uniform([n, k])
        s = max(float(np.abs(w).max()), 1e-3) / 127.0
        q = np.clip(np.round(w / s), -127, 127).astype(np.int8)
        ws = np.full(n, s, np.float32)
    wt = c.mb.const(c.name("w"), q, quant=(ws if per_channel else ws[:1], 0))
    bias = np.round(c.rng.uniform(-0.5, 0.5, n) / (v.scale * ws)).astype(np.int32)
    bt = c.mb.const(c.name("b"), bias, quant=((v.scale * ws).astype(np.float32) if per_channel
                                              else np.float32(v.scale * ws[0]), 0))
    rows = int(np.prod(v.shape[:-1])) if v.shape[:-1] else 1
    out = [rows, n]
    bound = v.bound * k * 0.3 + 0.5
    tid, s_o, zp_o = _qt(c, out, bound)
    c.mb.op("FULLY_CONNECTED", [v.tid, wt, bt], [tid], fused_activation_function=c.pick(ACTS), keep_num_dims=False)
    return Q(tid, out, s_o, zp_o, bound)


def _pool(c: Chain, v: Q):
    win = _window(c, v)
    if win is None:
        return None
    n, ch, f, s, same, oh, ow = win
    r = _same(c, v, [n, oh, ow, ch])
    c.mb.op(c.pick(("AVERAGE_POOL_2D", "MAX_POOL_2D")), [v.tid], [r.tid], padding="SAME" if same else "VALID",
            stride_w=s, stride_h=s, filter_width=f, filter_height=f, fused_activation_function="NONE")
    return r


def _reshape(c: Chain, v: Q):
    size = int(np.prod(v.shape))
    a = c.pick([d for d in range(1, size + 1) if size % d == 0])
    dims = [a, size // a] if c.rng.random() < 0.5 else [1, a, size // a, 1]
    r = _same(c, v, dims)
    c.mb.op("RESHAPE", [v.tid, c.const(np.array(dims, np.int32))], [r.tid])
    return r


def _transpose(c: Chain, v: Q):
    perm = [int(p) for p in c.rng.permutation(len(v.shape))]
    r = _same(c, v, [v.shape[p] for p in perm])
    c.mb.op("TRANSPOSE", [v.tid, c.const(np.array(perm, np.int32))], [r.tid])
    return r


def _concat(c: Chain, v: Q):
    axis = int(c.rng.integers(len(v.shape)))
    os_ = list(v.shape)
    os_[axis] = int(c.rng.integers(1, 4))
    q = c.rng.integers(-128, 128, os_).astype(np.int8)
    other = c.mb.const(c.name("k"), q, quant=(v.scale, v.zp))
    out = list(v.shape)
    out[axis] += os_[axis]
    r = _same(c, v, out)
    c.mb.op("CONCATENATION", [v.tid, other], [r.tid], axis=axis, fused_activation_function="NONE")
    return r


def _fixed(c: Chain, v: Q):
    op = c.pick(("SOFTMAX", "LOGISTIC", "TANH", "LOG_SOFTMAX", "L2_NORMALIZATION"))
    scale, zp = {"TANH": (1 / 128.0, 0), "LOG_SOFTMAX": (16 / 256.0, 127),
                 "L2_NORMALIZATION": (1 / 128.0, 0)}.get(op, (1 / 256.0, -128))
    tid, _, _ = _qt(c, v.shape, 1.0, scale, zp)
    c.mb.op(op, [v.tid], [tid], **({"beta": float(c.rng.uniform(0.5, 2.0))} if op == "SOFTMAX" else
                                   {"fused_activation_function": "NONE"} if op == "L2_NORMALIZATION" else {}))
    return Q(tid, v.shape, scale, zp, 16.0 if op == "LOG_SOFTMAX" else 1.0)


def _act(c: Chain, v: Q):
    op = c.pick(("HARD_SWISH", "LEAKY_RELU", "RELU", "RELU6", "EXP", "ABS", "NEG", "ELU", "LOG"))
    if op == "NEG":                 # (LiteRT negates the raw bytes: converters keep the input's grid)
        r = _same(c, v, v.shape)
        c.mb.op(op, [v.tid], [r.tid])
        return r
    bound = v.bound if op in ("HARD_SWISH", "LEAKY_RELU", "RELU", "ABS", "ELU") else \
        float(np.exp(min(v.bound, 8.0))) if op == "EXP" else 8.0 if op == "LOG" else 6.0
    tid, s_o, zp_o = _qt(c, v.shape, bound)
    c.mb.op(op, [v.tid], [tid], **({"alpha": float(c.rng.uniform(0.05, 0.5))} if op == "LEAKY_RELU" else {}))
    return Q(tid, v.shape, s_o, zp_o, bound)


def _mean(c: Chain, v: Q):
    if len(v.shape) < 2:
        return None
    axes = [1, 2] if len(v.shape) == 4 and c.rng.random() < 0.6 else [len(v.shape) - 1]
    out = [1 if i in axes else d for i, d in enumerate(v.shape)]
    tid, s_o, zp_o = _qt(c, out, v.bound)
    c.mb.op("MEAN", [v.tid, c.const(np.array(axes, np.int32))], [tid], keep_dims=True)
    return Q(tid, out, s_o, zp_o, v.bound)


def _pad(c: Chain, v: Q):
    pads = c.rng.integers(0, 3, (len(v.shape), 2)).astype(np.int32)
    r = _same(c, v, [d + int(p.sum()) for d, p in zip(v.shape, pads)])
    c.mb.op("PAD", [v.tid, c.const(pads)], [r.tid])
    return r


def _resize(c: Chain, v: Q):
    """RESIZE_BILINEAR / RESIZE_NEAREST_NEIGHBOR of a 4-d value to 1..2x its size, any mode LiteRT takes."""
    if len(v.shape) != 4:
        return None
    op = c.pick(("RESIZE_BILINEAR", "RESIZE_NEAREST_NEIGHBOR"))
    size = [int(c.rng.integers(1, 2 * d + 2)) for d in v.shape[1:3]]
    ac, hp = [(False, False), (True, False), (False, True), (True, True)][int(c.rng.integers(3 if op ==
                                                                                          "RESIZE_BILINEAR" else 4))]
    r = _same(c, v, [v.shape[0], *size, v.shape[3]])
    c.mb.op(op, [v.tid, c.const(np.array(size, np.int32))], [r.tid], align_corners=ac, half_pixel_centers=hp)
    return r


def _reduce(c: Chain, v: Q):
    """REDUCE_MAX / REDUCE_MIN over 1..rank random axes (on the input's grid, as LiteRT requires); or an ARG_MAX /
    ARG_MIN of the value as an extra int32 / int64 model output (the chain goes on from the value)."""
    if len(v.shape) < 2:
        return None
    op = c.pick(("REDUCE_MAX", "REDUCE_MIN", "ARG_MAX", "ARG_MIN"))
    rank = len(v.shape)
    if op in ("ARG_MAX", "ARG_MIN"):
        axis = int(c.rng.integers(-rank, rank))
        dt = c.pick(("int32", "int64"))
        y = c.t([d for i, d in enumerate(v.shape) if i != axis % rank], dt)
        c.mb.op(op, [v.tid, c.const(np.array([axis], np.int32))], [y], output_type=dt.upper())
        c.mb.output(y)
        return v
    axes = sorted({int(a) for a in c.rng.integers(-rank, rank, int(c.rng.integers(1, rank + 1)))})
    keep = bool(c.rng.integers(2))
    red = {a % rank for a in axes}
    out = [1 if i in red else d for i, d in enumerate(v.shape)] if keep else \
        [d for i, d in enumerate(v.shape) if i not in red]
    if not out:
        return None
    r = _same(c, v, out)
    c.mb.op(op, [v.tid, c.const(np.array(axes, np.int32))], [r.tid], keep_dims=keep)
    return r


def _prelu(c: Chain, v: Q):
    """PRELU by a constant int8 alpha along the value's trailing dims (its last, or its last three with ones)."""
    shape = [v.shape[-1]] if len(v.shape) < 3 or c.rng.random() < 0.5 else [1, 1, v.shape[-1]]
    amax = float(c.rng.uniform(0.05, 1.5))
    s = amax / 127.0
    zp = int(c.rng.integers(-10, 11))
    q = np.clip(np.round(c.rng.uniform(-amax, amax, shape) / s) + zp, -128, 127).astype(np.int8)
    alpha = c.mb.const(c.name("alpha"), q, quant=(s, zp))
    bound = v.bound * max(1.0, amax)
    tid, s_o, zp_o = _qt(c, v.shape, bound)
    c.mb.op("PRELU", [v.tid, alpha], [tid])
    return Q(tid, v.shape, s_o, zp_o, bound)


def _matmul(c: Chain, v: Q):
    """BATCH_MATMUL of the value (adj_x: its last two dims swapped) by a constant int8 RHS, a second quantized input
    (batch dims the value's, ones or fewer) or the value itself (v . v^T, as attention's scores), adj_y either way."""
    if len(v.shape) < 2:
        return None
    adj_x = c.rng.random() < 0.3
    m, k = (v.shape[-1], v.shape[-2]) if adj_x else (v.shape[-2], v.shape[-1])
    kind = c.pick(("const", "input", "self"))
    if kind == "self":
        if adj_x:
            return None
        other, adj_y, n, ob = v.tid, True, m, v.bound
    else:
        n = int(c.rng.integers(1, 9))
        adj_y = bool(c.rng.integers(2))
        batch = [] if c.rng.random() < 0.4 else [d if c.rng.random() < 0.7 else 1 for d in v.shape[:-2]]
        shape = batch + ([n, k] if adj_y else [k, n])
        ob = float(c.rng.uniform(0.5, 2.0))
        if kind == "const":
            s, zp = ob / 127.0, int(c.rng.integers(-10, 11))
            q = np.clip(np.round(c.rng.uniform(-ob, ob, shape) / s) + zp, -128, 127).astype(np.int8)
            other = c.mb.const(c.name("k"), q, quant=(s, zp))
        else:
            x = c.input(shape)
            other, _, _ = _qt(c, shape, 2.0)
            c.mb.op("QUANTIZE", [x], [other])
            ob = 2.0
    bshape = v.shape[:-2] if kind == "self" else shape[:-2]
    out = list(np.broadcast_shapes(tuple(v.shape[:-2]), tuple(bshape))) + [m, n]
    bound = v.bound * ob * k * 0.3 + 0.5
    tid, s_o, zp_o = _qt(c, out, bound)
    c.mb.op("BATCH_MATMUL", [v.tid, other], [tid], version=4, adj_x=adj_x, adj_y=adj_y)
    return Q(tid, out, s_o, zp_o, bound)


STEPS = [(_binary, 5), (_conv, 5), (_fc, 2), (_pool, 2), (_reshape, 1), (_transpose, 1), (_concat, 2),
         (_fixed, 2), (_act, 2), (_mean, 2), (_pad, 1), (_resize, 2), (_reduce, 2),
         (_prelu, 1), (_matmul, 2), (_transpose_conv, 2)]
_W = np.array([w for _, w in STEPS], float)


def case(seed: int, i: int) -> tuple[bytes, list, float]:
    """(model, feeds, output scale) of int8 case i."""
    rng = np.random.default_rng([seed, i, 8])
    c = Chain(rng)
    shape = [1, int(rng.integers(1, 9)), int(rng.integers(1, 9)), int(rng.integers(1, 9))] if rng.random() < 0.8 \
        else [int(rng.integers(1, 4)), int(rng.integers(1, 17))]
    x = c.input(shape)
    tid, s, zp = _qt(c, shape, 2.0)
    c.mb.op("QUANTIZE", [x], [tid])
    v = Q(tid, shape, s, zp, 2.0)
    steps, done = int(rng.integers(2, 6)), 0
    for _ in range(steps * 4):
        if done == steps:
            break
        r = STEPS[int(rng.choice(len(STEPS), p=_W / _W.sum()))][0](c, v)
        if r is None or int(np.prod(r.shape)) > MAX_ELEMS or 0 in r.shape:
            continue
        v, done = r, done + 1
    y = c.t(v.shape)
    c.mb.op("DEQUANTIZE", [v.tid], [y])
    c.mb.output(y)
    return c.mb.finish(), c.feeds, v.scale


def compare(outs, refs, scale: float) -> str | None:
    """None where outs are on the same quantization steps as refs (the dequantized floats may differ in their
    last bits: LiteRT's two interpreters round (q - zp) * scale differently); else how many steps they are off.
    Integer outputs (ARG_MAX / ARG_MIN indices) must be equal."""
    for k, (o, r) in enumerate(zip(outs, refs)):
        if o.dtype != r.dtype or o.shape != r.shape:
            return f"output {k}: {o.dtype}{list(o.shape)}, LiteRT {r.dtype}{list(r.shape)}"
        if np.issubdtype(r.dtype, np.integer):
            if (o != r).any():
                return f"output {k}: {int((o != r).sum())} of {r.size} indices differ"
            continue
        d = np.abs(o.astype(np.float64) - r) / scale
        if (d >= 0.5).any():
            return f"output {k}: {int((d >= 0.5).sum())} of {r.size} differ, up to {d.max():.2f} steps"
    return None
