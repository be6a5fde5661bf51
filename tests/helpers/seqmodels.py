"""Tiny builder models whose sequence (or image) size is a bounded dynamic dim (--dynamic NAME:AXIS<=MAX):
a Conv1D + LSTM text classifier, a one-block attention encoder and a small conv net."""
from __future__ import annotations

import numpy as np

from helpers.builder import ModelBuilder


def _w(rng, *shape, scale=0.5):
    return rng.uniform(-scale, scale, shape).astype(np.float32)


def sequence_model(t=8, vocab=20, emb=6, filters=5, cell=4, classes=3, seed=0):
    """tokens [1, T] int32 -> embedding GATHER -> Conv1D (EXPAND_DIMS, CONV_2D 1x3 SAME, RESHAPE [1, -1, F]
    as converters emit it) -> UNIDIRECTIONAL_SEQUENCE_LSTM -> MEAN over time -> FULLY_CONNECTED -> SOFTMAX."""
    rng = np.random.default_rng(seed)
    mb = ModelBuilder()
    tok = mb.input("tokens", (1, t), "int32", shape_signature=(1, -1))
    e = mb.tensor("emb", (1, t, emb))
    mb.op("GATHER", [mb.const("table", _w(rng, vocab, emb)), tok], [e], axis=0)
    e4 = mb.tensor("emb4", (1, 1, t, emb))
    mb.op("EXPAND_DIMS", [e, mb.const("ax", np.array(1, np.int32))], [e4])
    c = mb.tensor("conv", (1, 1, t, filters))
    mb.op("CONV_2D", [e4, mb.const("cw", _w(rng, filters, 1, 3, emb)), mb.const("cb", _w(rng, filters))], [c],
          padding=0, stride_w=1, stride_h=1, fused_activation_function=1)
    c3 = mb.tensor("conv3", (1, t, filters))
    mb.op("RESHAPE", [c, mb.const("target", np.array([1, -1, filters], np.int32))], [c3], new_shape=[1, -1, filters])
    ins = [c3] + [mb.const(f"wx{g}", _w(rng, cell, filters)) for g in range(4)]
    ins += [mb.const(f"wh{g}", _w(rng, cell, cell)) for g in range(4)] + [-1, -1, -1]
    ins += [mb.const(f"b{g}", _w(rng, cell)) for g in range(4)] + [-1, -1]
    h0, c0 = mb.tensor("h_state", (1, cell)), mb.tensor("c_state", (1, cell))
    for s in (h0, c0):
        mb.tensors[s]["is_variable"] = True
    ins += [h0, c0, -1, -1, -1, -1]
    y = mb.tensor("lstm", (1, t, cell))
    mb.op("UNIDIRECTIONAL_SEQUENCE_LSTM", ins, [y], fused_activation_function=4, cell_clip=0.0, proj_clip=0.0,
          time_major=False)
    m = mb.tensor("mean", (1, cell))
    mb.op("MEAN", [y, mb.const("axes", np.array([1], np.int32))], [m], keep_dims=False)
    f = mb.tensor("logits", (1, classes))
    mb.op("FULLY_CONNECTED", [m, mb.const("fw", _w(rng, classes, cell)), mb.const("fb", _w(rng, classes))], [f])
    p = mb.tensor("probs", (1, classes))
    mb.op("SOFTMAX", [f], [p], beta=1.0)
    mb.output(p)
    return mb.finish()


def attention_model(t=8, vocab=16, d=8, seed=1):
    """tokens [1, T] -> embedding GATHER [1, T, D] -> q, k, v (FULLY_CONNECTED keep_num_dims) -> scores
    BATCH_MATMUL(q, k, adj_y) * 1/sqrt(D) -> SOFTMAX -> BATCH_MATMUL(p, v) -> + x -> LayerNorm (MEAN,
    SQUARED_DIFFERENCE, RSQRT as converters emit it) -> [1, T, D]."""
    rng = np.random.default_rng(seed)
    mb = ModelBuilder()
    tok = mb.input("tokens", (1, t), "int32", shape_signature=(1, -1))
    x = mb.tensor("x", (1, t, d))
    mb.op("GATHER", [mb.const("table", _w(rng, vocab, d, scale=1.0)), tok], [x], axis=0)
    proj = {}
    for name in "qkv":
        proj[name] = mb.tensor(name, (1, t, d))
        mb.op("FULLY_CONNECTED", [x, mb.const(f"w{name}", _w(rng, d, d)), mb.const(f"b{name}", _w(rng, d))],
              [proj[name]], keep_num_dims=True)
    s = mb.tensor("scores", (1, t, t))
    mb.op("BATCH_MATMUL", [proj["q"], proj["k"]], [s], adj_x=False, adj_y=True)
    ss = mb.tensor("scaled", (1, t, t))
    mb.op("MUL", [s, mb.const("scale", np.array(1 / np.sqrt(d), np.float32))], [ss])
    p = mb.tensor("p", (1, t, t))
    mb.op("SOFTMAX", [ss], [p], beta=1.0)
    a = mb.tensor("att", (1, t, d))
    mb.op("BATCH_MATMUL", [p, proj["v"]], [a], adj_x=False, adj_y=False)
    r = mb.tensor("res", (1, t, d))
    mb.op("ADD", [a, x], [r])
    mu = mb.tensor("mu", (1, t, 1))
    mb.op("MEAN", [r, mb.const("ax", np.array([-1], np.int32))], [mu], keep_dims=True)
    sq = mb.tensor("sq", (1, t, d))
    mb.op("SQUARED_DIFFERENCE", [r, mu], [sq])
    var = mb.tensor("var", (1, t, 1))
    mb.op("MEAN", [sq, mb.const("ax2", np.array([-1], np.int32))], [var], keep_dims=True)
    ve = mb.tensor("ve", (1, t, 1))
    mb.op("ADD", [var, mb.const("eps", np.array(1e-5, np.float32))], [ve])
    inv = mb.tensor("inv", (1, t, 1))
    mb.op("RSQRT", [ve], [inv])
    xc = mb.tensor("xc", (1, t, d))
    mb.op("SUB", [r, mu], [xc])
    n = mb.tensor("norm", (1, t, d))
    mb.op("MUL", [xc, inv], [n])
    g = mb.tensor("g", (1, t, d))
    mb.op("MUL", [n, mb.const("gamma", _w(rng, d) + 1)], [g])
    o = mb.tensor("out", (1, t, d))
    mb.op("ADD", [g, mb.const("beta", _w(rng, d))], [o])
    mb.output(o)
    return mb.finish()


def conv_net(h=8, w=8, seed=2):
    """image [1, H, W, 3] -> CONV_2D 3x3 stride 2 SAME + relu6 -> DEPTHWISE 3x3 SAME -> CONV_2D 1x1 -> ADD
    (residual) -> PAD -> MAX_POOL 2x2 VALID -> AVERAGE_POOL 3x3 SAME -> MEAN over H, W -> FULLY_CONNECTED."""
    rng = np.random.default_rng(seed)
    mb = ModelBuilder()
    x = mb.input("input", (1, h, w, 3), shape_signature=(1, -1, -1, 3))
    h2, w2 = -(-h // 2), -(-w // 2)
    c = mb.tensor("c", (1, h2, w2, 8))
    mb.op("CONV_2D", [x, mb.const("w0", _w(rng, 8, 3, 3, 3)), mb.const("b0", _w(rng, 8))], [c], padding=0,
          stride_w=2, stride_h=2, fused_activation_function=3)
    dw = mb.tensor("dw", (1, h2, w2, 8))
    mb.op("DEPTHWISE_CONV_2D", [c, mb.const("w1", _w(rng, 1, 3, 3, 8)), mb.const("b1", _w(rng, 8))], [dw],
          padding=0, stride_w=1, stride_h=1, depth_multiplier=1, fused_activation_function=3)
    pw = mb.tensor("pw", (1, h2, w2, 8))
    mb.op("CONV_2D", [dw, mb.const("w2", _w(rng, 8, 1, 1, 8)), mb.const("b2", _w(rng, 8))], [pw], padding=1,
          stride_w=1, stride_h=1)
    r = mb.tensor("r", (1, h2, w2, 8))
    mb.op("ADD", [pw, c], [r])
    p = mb.tensor("p", (1, h2 + 1, w2 + 1, 8))
    mb.op("PAD", [r, mb.const("pads", np.array([[0, 0], [0, 1], [0, 1], [0, 0]], np.int32))], [p])
    mp = mb.tensor("mp", (1, (h2 + 1 - 2) // 1 + 1, (w2 + 1 - 2) // 1 + 1, 8))
    mb.op("MAX_POOL_2D", [p], [mp], padding=1, stride_w=1, stride_h=1, filter_width=2, filter_height=2)
    ap = mb.tensor("ap", mb.tensors[mp]["shape"])
    mb.op("AVERAGE_POOL_2D", [mp], [ap], padding=0, stride_w=1, stride_h=1, filter_width=3, filter_height=3)
    m = mb.tensor("m", (1, 8))
    mb.op("MEAN", [ap, mb.const("axes", np.array([1, 2], np.int32))], [m], keep_dims=False)
    f = mb.tensor("f", (1, 4))
    mb.op("FULLY_CONNECTED", [m, mb.const("fw", _w(rng, 4, 8)), mb.const("fb", _w(rng, 4))], [f])
    mb.output(f)
    return mb.finish()


def shape_reshape_model(t=8, d=8, heads=2):
    """x [1, T, D] -> heads split by a RESHAPE whose target is computed from SHAPE (STRIDED_SLICE of the
    length, PACK with constants), as converters emit it for a dynamic sequence -> TRANSPOSE -> * 2 ->
    TRANSPOSE back -> RESHAPE to [1, T, D] again (its target from the same length) -> TANH."""
    mb = ModelBuilder()
    x = mb.input("x", (1, t, d), shape_signature=(1, -1, d))
    shp = mb.tensor("shape", (3,), "int32")
    mb.op("SHAPE", [x], [shp], out_type=2)
    n = mb.tensor("len", (), "int32")
    mb.op("STRIDED_SLICE", [shp, mb.const("b", np.array([1], np.int32)), mb.const("e", np.array([2], np.int32)),
                            mb.const("s", np.array([1], np.int32))], [n], shrink_axis_mask=1)
    one, hd = mb.const("one", np.array(1, np.int32)), mb.const("heads", np.array(heads, np.int32))
    tgt = mb.tensor("tgt", (4,), "int32")
    mb.op("PACK", [one, n, hd, mb.const("hd", np.array(d // heads, np.int32))], [tgt], axis=0, values_count=4)
    r = mb.tensor("r", (1, t, heads, d // heads))
    mb.op("RESHAPE", [x, tgt], [r])
    tr = mb.tensor("tr", (1, heads, t, d // heads))
    mb.op("TRANSPOSE", [r, mb.const("p", np.array([0, 2, 1, 3], np.int32))], [tr])
    m = mb.tensor("m", (1, heads, t, d // heads))
    mb.op("MUL", [tr, mb.const("two", np.arange(d // heads, dtype=np.float32) + 1)], [m])
    back = mb.tensor("back", (1, t, heads, d // heads))
    mb.op("TRANSPOSE", [m, mb.const("p2", np.array([0, 2, 1, 3], np.int32))], [back])
    tgt2 = mb.tensor("tgt2", (3,), "int32")
    mb.op("PACK", [one, n, mb.const("dd", np.array(d, np.int32))], [tgt2], axis=0, values_count=3)
    y = mb.tensor("y", (1, t, d))
    mb.op("RESHAPE", [back, tgt2], [y])
    z = mb.tensor("z", (1, t, d))
    mb.op("TANH", [y], [z])
    mb.output(z)
    return mb.finish()
