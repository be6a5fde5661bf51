"""More steps for scripts/fuzz_chains.py's float chains: matmuls and transposed convolutions, packing and
splitting, reversal, mirror padding, cumulative sums, gathers by index tuples, comparisons feeding SELECT_V2,
PRELU, LRN, space/batch moves, squeeze / expand / broadcast, products, powers and floor division, ADD_N,
and ARG_MAX / ARG_MIN (which end a chain: an int32 value).

Each step is `fn(c, x, shape) -> (tensor, shape) | None` on fuzz_chains.Chain `c` (None: it does not fit
the value), with the weight fuzz_chains.STEPS gives it.
"""
from __future__ import annotations

import numpy as np

MAX_ELEMS = 4096


def _batch_matmul(c, x, shape):
    if len(shape) < 2:
        return None
    adj_x, adj_y = bool(c.rng.integers(2)), bool(c.rng.integers(2))
    m, k = (shape[-1], shape[-2]) if adj_x else (shape[-2], shape[-1])
    n = int(c.rng.integers(1, 9))
    batch = list(shape[:-2])
    wb = [d if c.rng.random() < 0.5 else 1 for d in batch][int(c.rng.integers(0, len(batch) + 1)):]
    w_shape = wb + ([n, k] if adj_y else [k, n])
    other = c.const(c.uniform(w_shape)) if c.rng.random() < 0.6 else c.input(w_shape)
    out = list(np.broadcast_shapes(tuple(batch), tuple(wb))) + [m, n]
    y = c.t(out)
    c.mb.op("BATCH_MATMUL", [x, other], [y], adj_x=adj_x, adj_y=adj_y)
    return y, out


def _transpose_conv(c, x, shape):
    if len(shape) != 4:
        return None
    n, h, w, ci = shape
    kh, kw, s = int(c.rng.integers(1, 4)), int(c.rng.integers(1, 4)), int(c.rng.integers(1, 3))
    same = bool(c.rng.integers(2))
    oh, ow = (h * s, w * s) if same else ((h - 1) * s + kh, (w - 1) * s + kw)
    co = int(c.rng.integers(1, 6))
    out = [n, oh, ow, co]
    if int(np.prod(out)) > MAX_ELEMS:
        return None
    ins = [c.const(np.array(out, np.int32)), c.const(c.uniform([co, kh, kw, ci])), x]
    if c.rng.random() < 0.5:
        ins.append(c.const(c.uniform([co])))
    y = c.t(out)
    c.mb.op("TRANSPOSE_CONV", ins, [y], padding="SAME" if same else "VALID", stride_w=s, stride_h=s,
            fused_activation_function=c.pick(("NONE", "RELU")) if len(ins) == 4 else "NONE", version=3 if len(ins) == 4 else 1)
    return y, out


def _pack(c, x, shape):
    axis = int(c.rng.integers(len(shape) + 1))
    k = int(c.rng.integers(1, 4))
    ins = [x] + [c.const(c.uniform(shape)) if c.rng.random() < 0.5 else c.input(shape) for _ in range(k - 1)]
    c.rng.shuffle(ins)
    out = list(shape[:axis]) + [k] + list(shape[axis:])
    y = c.t(out)
    c.mb.op("PACK", ins, [y], values_count=k, axis=axis - (len(shape) + 1 if c.rng.random() < 0.3 else 0))
    return y, out


def _unpack_or_split(c, x, shape):
    axis = int(c.rng.integers(len(shape)))
    d = shape[axis]
    kind = c.pick(("UNPACK", "SPLIT", "SPLIT_V"))
    if kind == "UNPACK":
        outs_shapes = [list(shape[:axis]) + list(shape[axis + 1:])] * d
    elif kind == "SPLIT":
        divs = [q for q in range(1, d + 1) if d % q == 0]
        q = c.pick(divs)
        outs_shapes = [list(shape[:axis]) + [d // q] + list(shape[axis + 1:])] * q
    else:
        cuts = sorted(int(v) for v in c.rng.choice(np.arange(1, d), min(d - 1, int(c.rng.integers(0, 3))), replace=False)) \
            if d > 1 else []
        sizes = np.diff([0] + cuts + [d]).tolist()
        outs_shapes = [list(shape[:axis]) + [s] + list(shape[axis + 1:]) for s in sizes]
    ys = [c.t(s) for s in outs_shapes]
    given = axis - (len(shape) if c.rng.random() < 0.3 else 0)
    if kind == "UNPACK":
        c.mb.op("UNPACK", [x], ys, num=d, axis=given)
    elif kind == "SPLIT":
        c.mb.op("SPLIT", [c.const(np.array(given, np.int32)), x], ys, num_splits=len(ys))
    else:
        c.mb.op("SPLIT_V", [x, c.const(np.array(sizes, np.int32)), c.const(np.array(given, np.int32))], ys,
                num_splits=len(ys))
    j = int(c.rng.integers(len(ys)))
    if len(ys) > 1 and c.rng.random() < 0.5:          # two parts added back: both outputs used
        j2 = (j + 1) % len(ys)
        if outs_shapes[j2] == outs_shapes[j]:
            z = c.t(outs_shapes[j])
            c.mb.op("ADD", [ys[j], ys[j2]], [z], fused_activation_function="NONE")
            return z, outs_shapes[j]
    return ys[j], outs_shapes[j]


def _reverse(c, x, shape):
    axis = int(c.rng.integers(len(shape)))
    y = c.t(shape)
    c.mb.op("REVERSE_V2", [x, c.const(np.array([axis], np.int32))], [y])
    return y, shape


def _mirror_pad(c, x, shape):
    reflect = bool(c.rng.integers(2))
    lim = [d - 1 if reflect else d for d in shape]
    pads = np.array([[int(c.rng.integers(0, min(2, m) + 1)), int(c.rng.integers(0, min(2, m) + 1))]
                     for m in lim], np.int32)
    out = [d + int(p.sum()) for d, p in zip(shape, pads)]
    y = c.t(out)
    c.mb.op("MIRROR_PAD", [x, c.const(pads)], [y], mode="REFLECT" if reflect else "SYMMETRIC")
    return y, out


def _cumsum(c, x, shape):
    axis = int(c.rng.integers(len(shape)))
    y = c.t(shape)
    c.mb.op("CUMSUM", [x, c.const(np.array(axis, np.int32))], [y], exclusive=bool(c.rng.integers(2)),
            reverse=bool(c.rng.integers(2)))
    return y, shape


def _gather_nd(c, x, shape):
    depth = int(c.rng.integers(1, len(shape) + 1))
    n = int(c.rng.integers(1, 4))
    idx = np.stack([c.rng.integers(0, shape[a], n) for a in range(depth)], axis=-1).astype(np.int32)
    out = [n] + list(shape[depth:])
    y = c.t(out)
    c.mb.op("GATHER_ND", [x, c.const(idx)], [y])
    return y, out


def _select(c, x, shape):
    cmp = c.pick(("LESS", "GREATER", "LESS_EQUAL", "GREATER_EQUAL", "EQUAL", "NOT_EQUAL"))
    thr = c.const(np.array(c.rng.uniform(-1, 1), np.float32).reshape([1] * len(shape)))
    cond = c.t(shape, "bool")
    c.mb.op(cmp, [x, thr], [cond])
    other = c.const(c.uniform(shape))
    y = c.t(shape)
    ins = [cond, x, other] if c.rng.random() < 0.5 else [cond, other, x]
    c.mb.op("SELECT_V2", ins, [y])
    return y, shape


def _prelu(c, x, shape):
    a_shape = [d if c.rng.random() < 0.5 else 1 for d in shape][1:] or [1]
    y = c.t(shape)
    c.mb.op("PRELU", [x, c.const(c.uniform(a_shape, 0.0, 0.5))], [y])
    return y, list(np.broadcast_shapes(tuple(shape), tuple(a_shape)))


def _lrn(c, x, shape):
    if len(shape) != 4:
        return None
    y = c.t(shape)
    c.mb.op("LOCAL_RESPONSE_NORMALIZATION", [x], [y], radius=int(c.rng.integers(1, 4)),
            bias=float(c.rng.uniform(0.5, 2.0)), alpha=float(c.rng.uniform(0.01, 1.0)), beta=float(c.rng.uniform(0.25, 1.0)))
    return y, shape


def _space_batch(c, x, shape):
    if len(shape) != 4:
        return None
    n, h, w, ch = shape
    if c.rng.random() < 0.5:
        bh, bw = int(c.rng.integers(1, 3)), int(c.rng.integers(1, 3))
        ph, pw = (-h) % bh, (-w) % bw
        out = [n * bh * bw, (h + ph) // bh, (w + pw) // bw, ch]
        y = c.t(out)
        c.mb.op("SPACE_TO_BATCH_ND", [x, c.const(np.array([bh, bw], np.int32)),
                                      c.const(np.array([[0, ph], [0, pw]], np.int32))], [y])
        return y, out
    if n % 2:
        return None
    bh, bw = (2, 1) if c.rng.random() < 0.5 else (1, 2)
    crop = int(c.rng.integers(0, 2)) if h * bh > 1 else 0
    out = [n // 2, h * bh - crop, w * bw, ch]
    y = c.t(out)
    c.mb.op("BATCH_TO_SPACE_ND", [x, c.const(np.array([bh, bw], np.int32)),
                                  c.const(np.array([[0, crop], [0, 0]], np.int32))], [y])
    return y, out


def _squeeze_expand(c, x, shape):
    if c.rng.random() < 0.4 and 1 in shape and len(shape) > 1:
        dims = [i for i, d in enumerate(shape) if d == 1]
        out = [d for d in shape if d != 1] or [1]
        if not [d for d in shape if d != 1]:
            dims = dims[1:]
            out = [1]
        y = c.t(out)
        c.mb.op("SQUEEZE", [x], [y], squeeze_dims=dims)
        return y, out
    if c.rng.random() < 0.5 and len(shape) < 5:
        axis = int(c.rng.integers(len(shape) + 1))
        out = list(shape[:axis]) + [1] + list(shape[axis:])
        y = c.t(out)
        c.mb.op("EXPAND_DIMS", [x, c.const(np.array(axis - (len(shape) + 1 if c.rng.random() < 0.3 else 0), np.int32))], [y])
        return y, out
    out = [int(c.rng.integers(1, 3))] * int(c.rng.integers(0, 2)) + [d if d != 1 else int(c.rng.integers(1, 4)) for d in shape]
    if int(np.prod(out)) > MAX_ELEMS:
        return None
    y = c.t(out)
    c.mb.op("BROADCAST_TO", [x, c.const(np.array(out, np.int32))], [y], version=2)
    return y, out


def _arith(c, x, shape):
    op = c.pick(("POW", "FLOOR_DIV", "FLOOR_MOD", "REDUCE_PROD", "ADD_N"))
    if op == "REDUCE_PROD":
        axes = sorted(int(a) for a in c.rng.choice(len(shape), int(c.rng.integers(1, len(shape) + 1)), replace=False))
        keep = bool(c.rng.integers(2))
        out = [1 if i in axes else d for i, d in enumerate(shape)] if keep else [d for i, d in enumerate(shape) if i not in axes]
        y = c.t(out)
        c.mb.op(op, [x, c.const(np.array(axes, np.int32))], [y], keep_dims=keep)
        return y, out
    if op == "ADD_N":
        ins = [x] + [c.const(c.uniform(shape)) for _ in range(int(c.rng.integers(1, 3)))]
        y = c.t(shape)
        c.mb.op(op, ins, [y])
        return y, shape
    if op == "POW":            # a positive base, exponents small
        b = c.away_from_zero(x, shape)
        e = c.const(c.rng.choice([-2.0, -0.5, 0.5, 1.0, 2.0, 3.0], [1] * len(shape)).astype(np.float32)
                    if c.rng.random() < 0.5 else c.uniform(shape, -2, 2))
        y = c.t(shape)
        c.mb.op(op, [b, e], [y])
        return y, shape
    v = c.uniform([1] * len(shape), 0.5, 2.0) * np.float32(c.pick((-1, 1)))
    y = c.t(shape)
    c.mb.op(op, [x, c.const(v)], [y])
    return y, shape


def argmax_step(c, x, shape):
    axis = int(c.rng.integers(len(shape)))
    out = [d for i, d in enumerate(shape) if i != axis]
    y = c.t(out, "int32")
    c.mb.op(c.pick(("ARG_MAX", "ARG_MIN")), [x, c.const(np.array([axis], np.int32))], [y], output_type="INT32")
    return y, out or []


STEPS = [(_batch_matmul, 2), (_transpose_conv, 1), (_pack, 1), (_unpack_or_split, 1), (_reverse, 1),
         (_mirror_pad, 1), (_cumsum, 1), (_gather_nd, 1), (_select, 1), (_prelu, 1), (_lrn, 1), (_space_batch, 1),
         (_squeeze_expand, 1), (_arith, 2), (argmax_step, 0.5)]
