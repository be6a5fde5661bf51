"""Batch-native --max-batch bundles (compiler/passes/batching.py): one program computes every item.

Each model below is a batch-1 graph (inputs and outputs with batch dimension 1) that exercises an op
family both ways the rewrite treats it: on the merged form (items folded into axis 0) and on the
prepended view (axis operands shifted: reductions, concatenations, transposes, slices over the
batch-1 graph's own axis 0, broadcasts between different leading dims).  The bundle compiled with
--max-batch must be batch-native, record as many dispatches as the batch-1 bundle, and give every
item of a run of b = 1..3 items its batch-1 result (the batch-1 bundle is checked against LiteRT by
the op tests).
"""
import numpy as np
import pytest

pytest.importorskip("vulkan")

import gpuc  # noqa: E402
from gpuc.runtime.bundle import read_bundle  # noqa: E402
from helpers.builder import ModelBuilder  # noqa: E402
from helpers.data import rnd  # noqa: E402
from helpers.models import layer_norm_model, lstm_model  # noqa: E402

I32 = np.int32
N = 3


class Net:
    """A small graph: `x` is its input [1, 4, 6, 8]; `op` adds a node and returns its output."""

    def __init__(self, shape=(1, 4, 6, 8)):
        self.mb = ModelBuilder()
        self.x = self.mb.input("x", shape)
        self.k = 0
        self.flat = []          # outputs flattened to [1, n] and concatenated into the model output

    def c(self, arr):
        self.k += 1
        return self.mb.const(f"c{self.k}", np.asarray(arr))

    def op(self, op, ins, shape, dtype="float32", n_out=1, **opts):
        outs = []
        for _ in range(n_out):
            self.k += 1
            outs.append(self.mb.tensor(f"t{self.k}", shape if n_out == 1 else shape[len(outs)], dtype))
        self.mb.op(op, ins, outs, **opts)
        return outs[0] if n_out == 1 else outs

    def reshape(self, t, shape):
        return self.op("RESHAPE", [t, self.c(np.asarray(shape, I32))], shape, new_shape=list(shape))

    def keep(self, t, size):
        """Add tensor t (of `size` elements, float32) to the model output."""
        self.flat.append((self.reshape(t, (1, size)), size))

    def finish(self):
        total = sum(s for _, s in self.flat)
        y = self.op("CONCATENATION", [t for t, _ in self.flat], (1, total), axis=1)
        self.mb.output(y)
        return self.mb.finish()


def nhwc():
    n = Net()
    c = n.op("CONV_2D", [n.x, n.c(rnd((8, 3, 3, 8), 1)), n.c(rnd((8,), 2))], (1, 4, 6, 8), padding=0,
             stride_w=1, stride_h=1, fused_activation_function=1)
    d = n.op("DEPTHWISE_CONV_2D", [c, n.c(rnd((1, 3, 3, 8), 3)), n.c(rnd((8,), 4))], (1, 2, 3, 8), padding=0,
             stride_w=2, stride_h=2, depth_multiplier=1)
    p = n.op("MAX_POOL_2D", [d], (1, 1, 2, 8), padding=1, stride_w=1, stride_h=1, filter_width=2, filter_height=2)
    a = n.op("AVERAGE_POOL_2D", [c], (1, 2, 3, 8), padding=0, stride_w=2, stride_h=2, filter_width=2,
             filter_height=2)
    r = n.op("RESIZE_BILINEAR", [a, n.c(np.array([4, 6], I32))], (1, 4, 6, 8))
    f = n.op("FULLY_CONNECTED", [r, n.c(rnd((5, 8), 5)), n.c(rnd((5,), 6))], (1, 4, 6, 5), keep_num_dims=True)
    g = n.op("FULLY_CONNECTED", [n.reshape(c, (4, 48)), n.c(rnd((3, 48), 7)), -1], (4, 3))
    for t, s in ((p, 16), (f, 120), (g, 12)):
        n.keep(t, s)
    return n.finish()


def broadcast():
    n = Net()
    a = n.reshape(n.x, (4, 6, 8))
    b = n.op("ADD", [a, n.c(rnd((4, 1, 8), 8))], (4, 6, 8))                  # a constant with leading dim 4
    m = n.op("MEAN", [n.x, n.c(np.array([1, 2], I32))], (1, 8), keep_dims=False)
    d = n.op("MUL", [b, m], (4, 6, 8))                                       # runtime operands of ranks 3 and 2
    e = n.op("SUB", [d, n.c(rnd((8,), 9))], (4, 6, 8))
    s = n.op("SQUARED_DIFFERENCE", [n.reshape(a, (24, 8)), n.reshape(m, (8,))], (24, 8))
    q = n.op("LOGISTIC", [n.op("MAXIMUM", [n.x, n.c(np.float32(0.1))], (1, 4, 6, 8))], (1, 4, 6, 8))
    # a tensor computed at run time from constants only (Swin's shifted-window mask): one copy for all items
    mask = n.op("SELECT_V2", [n.c(np.arange(32).reshape(4, 1, 8) % 3 == 0), n.c(rnd((4, 1, 8), 16)),
                              n.c(np.float32(-100.0))], (4, 1, 8))
    w = n.op("ADD", [a, mask], (4, 6, 8))
    for t, k in ((e, 192), (s, 192), (q, 192), (w, 192)):
        n.keep(t, k)
    return n.finish()


def transpose():
    n = Net()
    a = n.reshape(n.x, (4, 6, 8))
    t1 = n.op("TRANSPOSE", [a, n.c(np.array([1, 0, 2], I32))], (6, 4, 8))
    t2 = n.op("TRANSPOSE", [t1, n.c(np.array([0, 2, 1], I32))], (6, 8, 4))
    t3 = n.op("TRANSPOSE", [n.x, n.c(np.array([0, 3, 1, 2], I32))], (1, 8, 4, 6))
    sq = n.op("SQUEEZE", [t3], (8, 4, 6), squeeze_dims=[0])
    ex = n.op("EXPAND_DIMS", [sq, n.c(np.array(1, I32))], (8, 1, 4, 6))
    for t in (t2, ex):
        n.keep(t, 192)
    return n.finish()


def concat_split():
    n = Net()
    a = n.reshape(n.x, (4, 6, 8))
    c0 = n.op("CONCATENATION", [a, a], (8, 6, 8), axis=0)
    c1 = n.op("CONCATENATION", [a, n.c(rnd((4, 6, 2), 10))], (4, 6, 10), axis=-1)
    c2 = n.op("CONCATENATION", [n.x, n.x], (1, 4, 12, 8), axis=2)
    s0, s1 = n.op("SPLIT", [n.c(np.array(0, I32)), c0], [(4, 6, 8), (4, 6, 8)], n_out=2, num_splits=2)
    v0, v1 = n.op("SPLIT_V", [c1, n.c(np.array([3, 7], I32)), n.c(np.array([2], I32))], [(4, 6, 3), (4, 6, 7)],
                  n_out=2, num_splits=2)
    p = n.op("PACK", [a, s1], (2, 4, 6, 8), values_count=2, axis=0)
    u = n.op("UNPACK", [a], [(6, 8)] * 4, n_out=4, num=4, axis=0)
    for t, k in ((s0, 192), (v0, 72), (v1, 168), (p, 384), (u[3], 48), (c2, 384)):
        n.keep(t, k)
    return n.finish()


def slices():
    n = Net()
    a = n.reshape(n.x, (4, 6, 8))
    s1 = n.op("SLICE", [a, n.c(np.array([1, 0, 2], I32)), n.c(np.array([2, -1, 4], I32))], (2, 6, 4))
    s2 = n.op("STRIDED_SLICE", [a, n.c(np.array([0, 1, 0], I32)), n.c(np.array([4, 6, 8], I32)),
                                n.c(np.array([2, 2, 3], I32))], (2, 3, 3))
    s3 = n.op("STRIDED_SLICE", [a, n.c(np.array([2, 0, 0], I32)), n.c(np.array([3, 6, 8], I32)),
                                n.c(np.array([1, 1, 1], I32))], (6, 8), shrink_axis_mask=1)
    s4 = n.op("STRIDED_SLICE", [a, n.c(np.array([-1, 0, 0], I32)), n.c(np.array([0, 6, 8], I32)),
                                n.c(np.array([-1, 1, 1], I32))], (3, 6, 8))
    s5 = n.op("SLICE", [n.x, n.c(np.array([0, 1, 1, 0], I32)), n.c(np.array([1, 2, 3, 8], I32))], (1, 2, 3, 8))
    for t, k in ((s1, 48), (s2, 18), (s3, 48), (s4, 144), (s5, 48)):
        n.keep(t, k)
    return n.finish()


def pad_tile():
    n = Net()
    a = n.reshape(n.x, (4, 6, 8))
    p = n.op("PAD", [a, n.c(np.array([[1, 1], [0, 0], [2, 0]], I32))], (6, 6, 10))
    m = n.op("MIRROR_PAD", [n.x, n.c(np.array([[0, 0], [1, 1], [1, 1], [0, 0]], I32))], (1, 6, 8, 8), mode=0)
    t = n.op("TILE", [a, n.c(np.array([2, 1, 1], I32))], (8, 6, 8))
    mean = n.op("MEAN", [n.x, n.c(np.array([1, 2], I32))], (1, 8), keep_dims=False)
    b = n.op("BROADCAST_TO", [mean, n.c(np.array([3, 1, 8], I32))], (3, 1, 8), version=2)   # (LiteRT: v2+)
    for x, k in ((p, 360), (m, 384), (t, 384), (b, 24)):
        n.keep(x, k)
    return n.finish()


def reductions():
    n = Net()
    a = n.reshape(n.x, (4, 6, 8))
    g1 = n.op("GATHER", [a, n.c(np.array([3, 0, 1], I32))], (3, 6, 8), axis=0)
    g2 = n.op("GATHER", [a, n.c(np.array([5, 2], I32))], (4, 2, 8), axis=1)
    r1 = n.op("SUM", [a, n.c(np.array([0], I32))], (6, 8), keep_dims=False)
    r2 = n.op("REDUCE_MAX", [a, n.c(np.array([0, 2], I32))], (1, 6, 1), keep_dims=True)
    r3 = n.op("MEAN", [a, n.c(np.array([-1], I32))], (4, 6), keep_dims=False)
    r4 = n.op("MEAN", [n.x, n.c(np.array([0, 3], I32))], (4, 6), keep_dims=False)    # size-1 axis 0 and another
    r5 = n.op("SUM", [n.x, n.c(np.array([0, -1], I32))], (1, 4, 6, 1), keep_dims=True)
    am = n.op("CAST", [n.op("ARG_MAX", [a, n.c(np.array([0], I32))], (6, 8), "int32", output_type=2)], (6, 8))
    cs = n.op("CUMSUM", [a, n.c(np.array(0, I32))], (4, 6, 8))
    rv = n.op("REVERSE_V2", [a, n.c(np.array([0], I32))], (4, 6, 8))
    sm = n.op("SOFTMAX", [n.reshape(n.x, (192,))], (192,), beta=1.0)
    ls = n.op("LOG_SOFTMAX", [a], (4, 6, 8))
    l2 = n.op("L2_NORMALIZATION", [a], (4, 6, 8))
    for t, k in ((g1, 144), (g2, 64), (r1, 48), (r2, 6), (r3, 24), (r4, 24), (r5, 24), (am, 48), (cs, 192), (rv, 192), (sm, 192),
                 (ls, 192), (l2, 192)):
        n.keep(t, k)
    return n.finish()


def matmul():
    n = Net()
    a = n.reshape(n.x, (4, 6, 8))
    q = n.op("BATCH_MATMUL", [a, a], (4, 6, 6), adj_y=True)
    r = n.reshape(n.x, (24, 8))
    m2 = n.op("BATCH_MATMUL", [r, n.c(rnd((8, 5), 11))], (24, 5))
    m3 = n.op("BATCH_MATMUL", [r, r], (24, 24), adj_y=True)
    m4 = n.op("BATCH_MATMUL", [n.c(rnd((3, 4), 12)), n.reshape(n.x, (4, 48))], (3, 48))
    fc = n.op("FULLY_CONNECTED", [a, n.c(rnd((5, 8), 13)), n.c(rnd((5,), 14))], (24, 5))
    for t, k in ((q, 144), (m2, 120), (m3, 576), (m4, 144), (fc, 120)):
        n.keep(t, k)
    return n.finish()


def embedding():
    mb = ModelBuilder()
    ids = mb.input("ids", (1, 5), "int32")
    e = mb.tensor("e", (1, 5, 4))
    mb.op("GATHER", [mb.const("table", rnd((10, 4), 15)), ids], [e], axis=0)
    y = mb.tensor("y", (1, 5, 4))
    mb.op("RELU", [e], [y])
    mb.output(y)
    return mb.finish()


def nhwc_more():
    """TRANSPOSE_CONV (its output-shape operand carries the batch), RESIZE_NEAREST_NEIGHBOR, SPACE_TO_DEPTH,
    DEPTH_TO_SPACE, PRELU, HARD_SWISH, GATHER_ND of a constant, CONV_3D."""
    n = Net((1, 4, 6, 2))
    tc = n.op("TRANSPOSE_CONV", [n.c(np.array([1, 9, 13, 3], I32)), n.c(rnd((3, 3, 3, 2), 20)), n.x,
                                 n.c(rnd((3,), 21))], (1, 9, 13, 3), padding=1, stride_h=2, stride_w=2)
    rs = n.op("RESIZE_NEAREST_NEIGHBOR", [n.x, n.c(np.array([8, 12], I32))], (1, 8, 12, 2))
    sd = n.op("SPACE_TO_DEPTH", [rs], (1, 4, 6, 8), block_size=2)
    ds = n.op("DEPTH_TO_SPACE", [sd], (1, 8, 12, 2), block_size=2)
    pr = n.op("PRELU", [ds, n.c(rnd((1, 1, 2), 22))], (1, 8, 12, 2))
    hs = n.op("HARD_SWISH", [pr], (1, 8, 12, 2))
    x5 = n.reshape(n.x, (1, 2, 2, 6, 2))
    c3 = n.op("CONV_3D", [x5, n.c(rnd((2, 2, 2, 2, 3), 23)), n.c(rnd((3,), 24))], (1, 2, 2, 6, 3), padding=0,
              stride_d=1, stride_h=1, stride_w=1, dilation_dfactor=1, dilation_hfactor=1, dilation_wfactor=1)
    idx = n.mb.input("idx", (1, 3, 2), "int32")
    gn = n.op("GATHER_ND", [n.c(rnd((5, 4, 3), 25)), idx], (1, 3, 3))
    for t, k in ((tc, 351), (hs, 192), (c3, 72), (gn, 9)):
        n.keep(t, k)
    return n.finish()


def softmax_chain():
    """A softmax written out over a middle axis (one SOFTMAX dispatch with strided rows)."""
    n = Net()
    ax = n.c(np.array([2], I32))
    m = n.op("REDUCE_MAX", [n.x, ax], (1, 4, 1, 8), keep_dims=True)
    e = n.op("EXP", [n.op("SUB", [n.x, m], (1, 4, 6, 8))], (1, 4, 6, 8))
    y = n.op("DIV", [e, n.op("SUM", [e, ax], (1, 4, 1, 8), keep_dims=True)], (1, 4, 6, 8))
    n.keep(y, 192)
    return n.finish()


MODELS = {"nhwc_more": nhwc_more, "softmax_chain": softmax_chain, "nhwc": nhwc, "broadcast": broadcast, "transpose": transpose, "concat_split": concat_split,
          "slices": slices, "pad_tile": pad_tile, "reductions": reductions, "matmul": matmul,
          "embedding": embedding, "layer_norm": lambda: layer_norm_model((1, 3, 8))}


def _inputs(model, b, seed):
    l1 = gpuc.load(gpuc.compile(model))
    try:
        specs = l1.inputs
    finally:
        l1.close()
    out = []
    for k, s in enumerate(specs):
        shape = (b,) + tuple(s.shape[1:])
        if s.dtype.kind in "iu":          # ids / indices: valid for every table here (the smallest has 4 rows)
            out.append(np.random.default_rng(seed + k).integers(0, 4, shape).astype(s.dtype))
        else:
            out.append(rnd(shape, seed + k, -2, 2))
    return out


def _check_items(single, batched, xs, b):
    outs = batched.run(xs)
    for i in range(b):
        want = single.run([x[i:i + 1] for x in xs])
        for o, w in zip(outs, want):
            assert o.shape[0] == b and o.shape[1:] == w.shape[1:]
            scale = max(float(np.abs(w).max()), 1e-30)
            np.testing.assert_allclose(o[i:i + 1], w, rtol=0, atol=1e-5 * scale)


@pytest.mark.parametrize("name", list(MODELS))
def test_batch_native_matches_items(name):
    model = MODELS[name]()
    b1, bn = gpuc.compile(model), gpuc.compile(model, max_batch=N)
    r1, rn = read_bundle(b1), read_bundle(bn)
    assert rn.stats.get("batch") == "native", rn.stats.get("batch_refusal")
    assert len(rn.dispatches) == len(r1.dispatches)
    with gpuc.load(b1) as single, gpuc.load(bn) as batched:
        for b in (N, 1, 2):
            _check_items(single, batched, _inputs(model, b, 10 * b), b)


def test_state_stays_per_item():
    """An LSTM's variable state is per item: each item's second run continues its own first run."""
    model, _ = lstm_model(b=1, t=3, i=4, c=5)
    bn = gpuc.compile(model, max_batch=N)
    assert read_bundle(bn).stats.get("batch") == "native"
    xs = [_inputs(model, N, s)[0] for s in (1, 2)]
    with gpuc.load(bn) as batched:
        got = [batched.run(x)[0] for x in xs]
    for i in range(N):
        with gpuc.load(gpuc.compile(model)) as single:
            want = [single.run(x[i:i + 1])[0] for x in xs]
        for g, w in zip(got, want):
            np.testing.assert_allclose(g[i:i + 1], w, rtol=0, atol=1e-5 * float(np.abs(w).max()))


def test_refused_op_falls_back_to_replication():
    """SPACE_TO_BATCH_ND interleaves the items of axis 0: the bundle replicates the batch-1 program
    and says why; its results are still the per-item ones."""
    n = Net((1, 4, 4, 2))
    s = n.op("SPACE_TO_BATCH_ND", [n.x, n.c(np.array([2, 2], I32)), n.c(np.zeros((2, 2), I32))], (4, 2, 2, 2))
    n.keep(s, 32)
    model = n.finish()
    bn = gpuc.compile(model, max_batch=N)
    stats = read_bundle(bn).stats
    assert stats.get("batch") == "replicated" and "SPACE_TO_BATCH_ND" in stats.get("batch_refusal", "")
    with gpuc.load(gpuc.compile(model)) as single, gpuc.load(bn) as batched:
        _check_items(single, batched, _inputs(model, N, 5), N)


def _catalogue_batchable():
    from helpers.catalogue import CASES
    out = []
    for name, make in CASES.items():
        c = make()
        if all(x.shape and x.shape[0] == 1 for x in c.inputs) and all(s and s[0] == 1 for s in c.out_shapes):
            out.append(name)
    return out


@pytest.mark.parametrize("name", _catalogue_batchable())
def test_catalogue_case_batch_native(name):
    """Every single-op case of the op catalogue with batch-1 I/O, batch-native, item by item."""
    from helpers.catalogue import CASES
    model = CASES[name]().model
    bn = gpuc.compile(model, max_batch=N)
    assert read_bundle(bn).stats.get("batch") == "native", read_bundle(bn).stats.get("batch_refusal")
    with gpuc.load(gpuc.compile(model)) as single, gpuc.load(bn) as batched:
        for b in (N, 2):
            _check_items(single, batched, _inputs(model, b, 7 * b), b)


def test_in_place_batch():
    """input_view / run_in_place / output_view take a batch of a --max-batch bundle: the first b items."""
    model = MODELS["nhwc"]()
    with gpuc.load(gpuc.compile(model, max_batch=N)) as m:
        xs = _inputs(model, 2, 3)
        want = m.run(xs)
        v = m.input_view(0, batch=2)
        assert v.shape == xs[0].shape
        v[...] = xs[0]
        m.run_in_place(batch=2)
        np.testing.assert_array_equal(m.output_view(0, batch=2), want[0])
        with pytest.raises(gpuc.errors.GpucError, match="outside 1..3"):
            m.run_in_place(batch=4)


def test_batched_graph_with_a_cpu_op_is_replicated(monkeypatch):
    """If an op of the batched graph can only run on the CPU (here: a GPU check made to refuse shapes
    with a leading dim of 3), the bundle replicates the batch-1 program instead, and says why."""
    from gpuc.compiler import ops
    row = ops.REGISTRY["TANH"]
    orig = row.check

    def check(node, graph):
        if graph.t(node.inputs[0]).shape[:1] == (N,):
            return "test: no batched TANH"
        return orig(node, graph) if orig else None
    monkeypatch.setattr(row, "check", check)
    mb = ModelBuilder()
    x = mb.input("x", (1, 4))
    y = mb.tensor("y", (1, 4))
    mb.op("TANH", [x], [y])
    mb.output(y)
    model = mb.finish()
    stats = read_bundle(gpuc.compile(model, max_batch=N, cache=False)).stats
    assert stats["batch"] == "replicated" and "TANH" in stats["batch_refusal"], stats


def test_constant_computed_tensor_concatenated_per_item_is_replicated():
    """A tensor computed at run time from constants only, concatenated along the items' axis, would have
    to exist per item: the rewrite refuses (naming the op) and the bundle replicates."""
    n = Net((1, 4))
    c = n.op("SELECT_V2", [n.c(np.array([[True, False, True, False]])), n.c(rnd((1, 4), 3)),
                           n.c(np.float32(2.0))], (1, 4))
    cat = n.op("CONCATENATION", [n.x, c], (2, 4), axis=0)
    n.keep(cat, 8)
    model = n.finish()
    stats = read_bundle(gpuc.compile(model, max_batch=N, disable_passes=["fold_constants"])).stats
    assert stats.get("batch") == "replicated" and "CONCATENATION" in stats.get("batch_refusal", ""), stats


@pytest.mark.parametrize("name", ["nhwc", "matmul", "softmax_chain"])
def test_fp16_batch_native(name):
    """--precision fp16 with --max-batch: batch-native too, each item within fp16 rounding of its batch-1 run."""
    model = MODELS[name]()
    bn = gpuc.compile(model, max_batch=N, precision="fp16")
    assert read_bundle(bn).stats.get("batch") == "native"
    xs = _inputs(model, N, 4)
    with gpuc.load(gpuc.compile(model, precision="fp16")) as single, gpuc.load(bn) as batched:
        outs = batched.run(xs)
        for i in range(N):
            for o, w in zip(outs, single.run([x[i:i + 1] for x in xs])):
                np.testing.assert_allclose(o[i:i + 1], w, rtol=0, atol=1e-2 * float(np.abs(w).max()))
