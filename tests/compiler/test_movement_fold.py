"""fold_movement (compiler/passes/movement_fold.py): chains of data-movement ops become one
GATHER_COPY dispatch (shaders/gather_copy.comp), bit-exact against LiteRT (NaN payloads and -0.0
included), and are left alone when an intermediate is used elsewhere or is a graph output."""
import numpy as np
import pytest

import gpuc
from gpuc.compiler import normalize_options
from gpuc.compiler.prepare import prepare
from gpuc.runtime.bundle import read_bundle
from helpers.builder import ModelBuilder
from helpers.litert import assert_items_bitexact, run_litert

pytest.importorskip("vulkan")


class Net:
    """A tiny builder model written op by op: net.op("TRANSPOSE", x, [0, 2, 1], shape=[...])."""

    def __init__(self, shapes, dtype="float32"):
        self.mb, self.dtype, self.n = ModelBuilder(), dtype, 0
        self.inputs = [self.mb.input(f"x{i}", s, dtype) for i, s in enumerate(shapes)]
        self.shapes = {t: list(s) for t, s in zip(self.inputs, shapes)}

    def const(self, v, dtype=np.int32):
        self.n += 1
        return self.mb.const(f"c{self.n}", np.asarray(v, dtype))

    def op(self, op, ins, shape, consts=(), outputs=1, version=1, **attrs):
        self.n += 1
        ins = list(ins) if isinstance(ins, (list, tuple)) else [ins]
        ins += [self.const(c) if not isinstance(c, int) else c for c in consts]
        outs = [self.mb.tensor(f"t{self.n}_{k}", s, self.dtype) for k, s in
                enumerate(shape if outputs > 1 else [shape])]
        for o, s in zip(outs, shape if outputs > 1 else [shape]):
            self.shapes[o] = list(s)
        self.mb.op(op, ins, outs, version, **attrs)
        return outs if outputs > 1 else outs[0]

    def finish(self, *outs):
        for o in outs:
            self.mb.output(o)
        return self.mb.finish()


def special(shape, seed=0, dtype="float32"):
    """Random values with NaN (with a payload), +-Inf and -0.0 in them."""
    rng = np.random.default_rng(seed)
    if dtype == "int32":
        return rng.integers(-1000, 1000, shape).astype(np.int32)
    x = rng.standard_normal(shape).astype(np.float32)
    flat = x.reshape(-1)
    bits = flat.view(np.uint32)
    if flat.size >= 4:
        bits[0] = 0x7FC01234                      # a NaN with a payload
        flat[1], flat[2], flat[3] = np.inf, -0.0, -np.inf
    return x


def fused_ops(model):
    """Op names of the graph after the passes."""
    p = prepare(model, normalize_options({}))
    return [n.op for n in p.graph.nodes]


def check(gpu, model, xs, gathers=None, dispatches=None):
    """gpuc equals LiteRT bit for bit; the pass made `gathers` GATHER_COPY nodes; the bundle has
    `dispatches` dispatches."""
    if gathers is not None:
        assert fused_ops(model).count("GATHER_COPY") == gathers, fused_ops(model)
    bundle = gpuc.compile(model)
    if dispatches is not None:
        assert len(read_bundle(bundle).dispatches) == dispatches
    refs = run_litert(model, [x.copy() for x in xs])
    outs = gpu.run(model, [x.copy() for x in xs])
    for o, r in zip(outs, refs):
        assert o.shape == r.shape and o.dtype == r.dtype
        assert o.tobytes() == r.tobytes()
    return refs


def roll(net, x, shift, axis):
    """torch.roll as converters lower it: SLICE + SLICE + CONCATENATION."""
    s = net.shapes[x]
    n = s[axis]
    k = shift % n
    b1, z1, b2, z2 = [0] * len(s), list(s), [0] * len(s), list(s)
    b1[axis], z1[axis] = n - k, k
    z2[axis] = n - k
    a = net.op("SLICE", x, z1, consts=[b1, z1])
    b = net.op("SLICE", x, z2, consts=[b2, z2])
    return net.op("CONCATENATION", [a, b], s, axis=axis)


def window_partition(net, x, w):
    n, h, wd, c = net.shapes[x]
    t = net.op("RESHAPE", x, [n, h // w, w, wd // w, w, c], consts=[[n, h // w, w, wd // w, w, c]])
    t = net.op("TRANSPOSE", t, [n, h // w, wd // w, w, w, c], consts=[[0, 1, 3, 2, 4, 5]])
    return net.op("RESHAPE", t, [n * (h // w) * (wd // w), w * w, c], consts=[[n * (h // w) * (wd // w), w * w, c]])


def window_merge(net, x, n, h, wd, w):
    c = net.shapes[x][-1]
    t = net.op("RESHAPE", x, [n, h // w, wd // w, w, w, c], consts=[[n, h // w, wd // w, w, w, c]])
    t = net.op("TRANSPOSE", t, [n, h // w, w, wd // w, w, c], consts=[[0, 1, 3, 2, 4, 5]])
    return net.op("RESHAPE", t, [n, h, wd, c], consts=[[n, h, wd, c]])


@pytest.mark.parametrize("shift", [-3, 1, 5])
@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_roll_then_window_partition(gpu, shift, dtype):
    net = Net([[1, 8, 12, 5]], dtype)
    x = net.inputs[0]
    y = window_partition(net, roll(net, roll(net, x, shift, 1), shift, 2), 4)
    check(gpu, net.finish(y), [special([1, 8, 12, 5], 1, dtype)], gathers=1, dispatches=1)


def test_window_merge_then_roll_back(gpu):
    net = Net([[6, 16, 3]])
    y = window_merge(net, net.inputs[0], 1, 8, 12, 4)
    y = roll(net, roll(net, y, 3, 1), 3, 2)
    check(gpu, net.finish(y), [special([6, 16, 3], 2)], gathers=1, dispatches=1)


def test_head_split_and_merge(gpu):
    """[1, T, 3*H*D] -> q, k, v [1, H, T, D] (RESHAPE, TRANSPOSE, SPLIT / STRIDED_SLICE / UNPACK), then
    heads merged back (TRANSPOSE, RESHAPE) and concatenated."""
    t, h, d = 5, 2, 3
    net = Net([[1, t, 3 * h * d]])
    r = net.op("RESHAPE", net.inputs[0], [1, t, 3, h, d], consts=[[1, t, 3, h, d]])
    p = net.op("TRANSPOSE", r, [3, 1, h, t, d], consts=[[2, 0, 3, 1, 4]])
    q, k, v = net.op("UNPACK", p, [[1, h, t, d]] * 3, outputs=3, num=3, axis=0)
    merged = []
    for z in (q, k, v):
        m = net.op("TRANSPOSE", z, [1, t, h, d], consts=[[0, 2, 1, 3]])
        merged.append(net.op("RESHAPE", m, [1, t, h * d], consts=[[1, t, h * d]]))
    y = net.op("CONCATENATION", merged, [1, t, 3 * h * d], axis=2)
    check(gpu, net.finish(y), [special([1, t, 3 * h * d], 3)], gathers=1, dispatches=1)


def test_split_heads_each_to_its_own_consumer(gpu):
    """SPLIT into q, k, v, each reshaped and transposed for a BATCH_MATMUL: one dispatch per head
    tensor, the SPLIT's copies disappear."""
    t, h, d = 4, 2, 3
    net = Net([[1, t, 3 * h * d]])
    axis = net.const(np.int32(2))
    q, k, v = net.op("SPLIT", [axis, net.inputs[0]], [[1, t, h * d]] * 3, outputs=3, num_splits=3)
    heads = []
    for z in (q, k, v):
        r = net.op("RESHAPE", z, [1, t, h, d], consts=[[1, t, h, d]])
        heads.append(net.op("TRANSPOSE", r, [1, h, t, d], consts=[[0, 2, 1, 3]]))
    s = net.op("BATCH_MATMUL", [heads[0], heads[1]], [1, h, t, t], adj_y=True)
    y = net.op("BATCH_MATMUL", [s, heads[2]], [1, h, t, d])
    model = net.finish(y)
    ops = fused_ops(model)
    assert "SPLIT" not in ops and ops.count("GATHER_COPY") == 3 and "TRANSPOSE" not in ops
    xs = [special([1, t, 3 * h * d], 4)]
    xs[0][np.isnan(xs[0]) | np.isinf(xs[0])] = 0.5
    refs = run_litert(model, [x.copy() for x in xs])
    np.testing.assert_allclose(gpu.run(model, xs)[0], refs[0], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("spec", [
    # (begin, end, strides, masks)
    ([0, 1, 0], [1, 7, 5], [1, 2, 1], {}),
    ([0, -1, 4], [1, 0, 0], [1, -1, -2], {"end_mask": 0b010}),
    ([0, 0], [1, 3], [1, 1], {"ellipsis_mask": 0b001, "shrink_axis_mask": 0b010}),
    ([0, 2, 0], [1, 6, 5], [1, 3, -1], {"begin_mask": 0b100, "end_mask": 0b100, "new_axis_mask": 0}),
])
def test_strided_slices_through_transpose(gpu, spec):
    begin, end, stride, masks = spec
    net = Net([[1, 5, 8]])
    t = net.op("TRANSPOSE", net.inputs[0], [1, 8, 5], consts=[[0, 2, 1]])
    ref_shape = run_shape(begin, end, stride, masks)
    s = net.op("STRIDED_SLICE", t, ref_shape, consts=[begin, end, stride], **masks)
    y = net.op("REVERSE_V2", s, ref_shape, consts=[[len(ref_shape) - 1]])
    check(gpu, net.finish(y), [special([1, 5, 8], 5)], gathers=1, dispatches=1)


def run_shape(begin, end, stride, masks):
    """The output shape of a STRIDED_SLICE of a [1, 8, 5] tensor, from numpy semantics."""
    from gpuc.compiler.ops.strided_slice import strided_slice_dims
    _, out = strided_slice_dims([1, 8, 5], begin, end, stride, masks.get("begin_mask", 0), masks.get("end_mask", 0),
                                masks.get("ellipsis_mask", 0), masks.get("new_axis_mask", 0),
                                masks.get("shrink_axis_mask", 0))
    return out


def test_pad_tile_broadcast_gather_pack(gpu):
    """PADV2 (a NaN pad value), TILE, BROADCAST_TO, GATHER with constant indices, PACK and SPLIT_V
    in one chain."""
    net = Net([[2, 3], [2, 3]])
    a, b = net.inputs
    nan = net.mb.const("nan", np.array([np.float32("nan")]).reshape(()))
    p = net.op("PADV2", [a, net.const([[1, 0], [2, 1]]), nan], [3, 6])
    t = net.op("TILE", b, [4, 6], consts=[[2, 2]])
    g = net.op("GATHER", t, [4, 4], consts=[[5, 4, 0, 1]], axis=1)
    br = net.op("BROADCAST_TO", net.op("SLICE", g, [1, 4], consts=[[3, 0], [1, 4]]), [3, 4], consts=[[3, 4]], version=2)
    s1, s2 = net.op("SPLIT_V", [p, net.const([4, 2]), net.const(np.int32(1))], [[3, 4], [3, 2]], outputs=2,
                    num_splits=2)
    y = net.op("PACK", [s1, br], [3, 2, 4], values_count=2, axis=1)
    z = net.op("CONCATENATION", [s2, s2], [3, 4], axis=1)
    check(gpu, net.finish(y, z), [special([2, 3], 6), special([2, 3], 7)], gathers=2, dispatches=2)


def test_refused_when_intermediate_used_elsewhere(gpu):
    """The roll's SLICE feeds an ADD too: the SLICE stays, the CONCATENATION reads it."""
    net = Net([[1, 6, 4]])
    x = net.inputs[0]
    a = net.op("SLICE", x, [1, 2, 4], consts=[[0, 4, 0], [1, 2, 4]])
    b = net.op("SLICE", x, [1, 4, 4], consts=[[0, 0, 0], [1, 4, 4]])
    c = net.op("CONCATENATION", [a, b], [1, 6, 4], axis=1)
    t = net.op("TRANSPOSE", c, [1, 4, 6], consts=[[0, 2, 1]])
    s = net.op("ADD", [a, a], [1, 2, 4])
    model = net.finish(t, s)
    ops = fused_ops(model)
    assert ops.count("SLICE") == 1 and "CONCATENATION" not in ops and "TRANSPOSE" not in ops
    check(gpu, model, [special([1, 6, 4], 8)])


def test_refused_when_intermediate_is_an_output(gpu):
    net = Net([[1, 6, 4]])
    x = net.inputs[0]
    r = roll(net, x, 2, 1)
    t = net.op("TRANSPOSE", r, [1, 4, 6], consts=[[0, 2, 1]])
    model = net.finish(t, r)
    ops = fused_ops(model)
    assert "TRANSPOSE" in ops and ops.count("GATHER_COPY") == 1    # the roll alone, the transpose apart
    check(gpu, model, [special([1, 6, 4], 9)])


def test_lone_transpose_untouched():
    net = Net([[2, 3]])
    model = net.finish(net.op("TRANSPOSE", net.inputs[0], [3, 2], consts=[[1, 0]]))
    assert fused_ops(model) == ["TRANSPOSE"]


def test_disable_pass_keeps_the_chain(gpu):
    net = Net([[1, 8, 8, 2]])
    y = window_partition(net, roll(net, net.inputs[0], 3, 1), 4)
    model = net.finish(y)
    n_on = len(read_bundle(gpuc.compile(model)).dispatches)
    n_off = len(read_bundle(gpuc.compile(model, disable_passes=["fold_movement"])).dispatches)
    assert n_on == 1 and n_off == 5          # SLICE, SLICE, CONCATENATION (2 copies), TRANSPOSE


def random_chain(seed, dtype="float32"):
    """A random chain of 2..6 movement ops on a random small tensor (every op kind the pass folds);
    odd seeds start from two inputs, each through its own chain, flattened and concatenated, then
    more ops."""
    rng = np.random.default_rng(seed)
    shape = [int(v) for v in rng.integers(1, 6, rng.integers(2, 5))]
    net = Net([shape, shape] if seed % 2 else [shape], dtype)
    x = random_ops(net, rng, net.inputs[0])
    if seed % 2:
        y = random_ops(net, rng, net.inputs[1])
        a, b = (net.op("RESHAPE", t, [size_of(net.shapes[t])], consts=[[size_of(net.shapes[t])]]) for t in (x, y))
        x = net.op("CONCATENATION", [a, b], [size_of(net.shapes[a]) + size_of(net.shapes[b])], axis=0)
        n = net.shapes[x][0]
        f = [d for d in range(1, n + 1) if n % d == 0]
        d = int(rng.choice(f))
        x = random_ops(net, rng, net.op("RESHAPE", x, [d, n // d], consts=[[d, n // d]]))
    return net.finish(x), [special(shape, seed + k, dtype) for k in range(len(net.inputs))]


def random_ops(net, rng, x):
    from gpuc.compiler.ops.strided_slice import strided_slice_dims
    for _ in range(rng.integers(2, 7)):
        s = net.shapes[x]
        r = len(s)
        kind = rng.choice(["TRANSPOSE", "RESHAPE", "SLICE", "STRIDED_SLICE", "REVERSE_V2", "ROLL", "PAD", "TILE",
                           "GATHER", "PACK", "SPLIT"])
        if kind == "TRANSPOSE":
            perm = [int(p) for p in rng.permutation(r)]
            x = net.op("TRANSPOSE", x, [s[p] for p in perm], consts=[perm])
        elif kind == "RESHAPE":
            n, new = size_of(s), []
            while n > 1 and len(new) < 4:
                f = [d for d in range(2, n + 1) if n % d == 0]
                d = int(rng.choice(f))
                new.append(d)
                n //= d
            new = new + [n] if n > 1 or not new else new
            x = net.op("RESHAPE", x, new, consts=[new])
        elif kind == "SLICE":
            b = [int(rng.integers(0, n)) for n in s]
            z = [int(rng.integers(1, n - bb + 1)) for n, bb in zip(s, b)]
            x = net.op("SLICE", x, z, consts=[b, z])
        elif kind == "STRIDED_SLICE":
            st = [int(rng.choice([-2, -1, 1, 2, 3])) for _ in s]
            b = [int(rng.integers(-n, n)) for n in s]
            e = [int(rng.integers(-n - 1, n + 1)) for n in s]
            em = int(rng.integers(0, 1 << r))
            try:
                _, out = strided_slice_dims(s, b, e, st, 0, em)
            except ValueError:
                continue
            if 0 in out:
                continue
            x = net.op("STRIDED_SLICE", x, out, consts=[b, e, st], end_mask=em)
        elif kind == "REVERSE_V2":
            x = net.op("REVERSE_V2", x, s, consts=[[int(rng.integers(0, r))]])
        elif kind == "ROLL":
            x = roll(net, x, int(rng.integers(1, 7)), int(rng.integers(0, r)))
        elif kind == "PAD":
            p = [[int(rng.integers(0, 3)), int(rng.integers(0, 3))] for _ in s]
            x = net.op("PAD", x, [n + a + b for n, (a, b) in zip(s, p)], consts=[p])
        elif kind == "TILE":
            m = [int(rng.integers(1, 3)) for _ in s]
            x = net.op("TILE", x, [n * k for n, k in zip(s, m)], consts=[m])
        elif kind == "GATHER":
            ax = int(rng.integers(0, r))
            idx = [int(v) for v in rng.integers(0, s[ax], rng.integers(1, 6))]
            if rng.integers(0, 3) == 0:
                idx = list(range(s[ax]))[::-1]
            x = net.op("GATHER", x, s[:ax] + [len(idx)] + s[ax + 1:], consts=[idx], axis=ax)
        elif kind == "PACK":
            ax = int(rng.integers(0, r + 1))
            x = net.op("PACK", [x, x], s[:ax] + [2] + s[ax:], values_count=2, axis=ax)
        elif kind == "SPLIT":
            ax = [d for d in range(r) if s[d] % 2 == 0]
            if not ax:
                continue
            a = int(rng.choice(ax))
            outs = net.op("SPLIT", [net.const(np.int32(a)), x], [s[:a] + [s[a] // 2] + s[a + 1:]] * 2, outputs=2,
                          num_splits=2)
            x = outs[int(rng.integers(0, 2))]
    return x


def size_of(s):
    return int(np.prod(s))


def run_with(gpu, model, xs, disabled=()):
    m = gpuc.load(gpuc.compile(model, disable_passes=list(disabled)), device=gpu.device)
    try:
        return m.run([x.copy() for x in xs])
    finally:
        m.close()


@pytest.mark.parametrize("seed", range(40))
def test_random_chains_bit_exact(gpu, seed):
    """Random movement chains: folded, unfolded and LiteRT agree bit for bit."""
    model, xs = random_chain(seed, "int32" if seed % 5 == 4 else "float32")
    refs = [r.tobytes() for r in run_litert(model, [x.copy() for x in xs])]
    assert [o.tobytes() for o in run_with(gpu, model, xs)] == refs
    assert [o.tobytes() for o in run_with(gpu, model, xs, ["fold_movement"])] == refs


def test_random_chains_mostly_fold():
    folded = sum("GATHER_COPY" in fused_ops(random_chain(seed)[0]) for seed in range(40))
    assert folded >= 25, folded


def test_constant_attention_mask_folds(gpu):
    """Swin's shifted-window mask as converters write it, all from constants: SUB of window ids,
    NOT_EQUAL, SELECT_V2, EQUAL, SELECT_V2, then ADDed to runtime scores: only the ADD is left."""
    net = Net([[4, 6, 6]])
    ids = np.array([0, 0, 1, 1, 2, 2], np.float32)
    a = net.mb.const("ida", np.tile(ids, (4, 1)).reshape(4, 1, 6))
    b = net.mb.const("idb", np.tile(ids, (4, 1)).reshape(4, 6, 1))
    d = net.op("SUB", [a, b], [4, 6, 6])
    ne = net.mb.tensor("ne", [4, 6, 6], "bool")
    net.mb.op("NOT_EQUAL", [d, net.mb.const("z", np.float32(0))], [ne])
    m1 = net.op("SELECT_V2", [ne, net.mb.const("big", np.float32(-100.0)), d], [4, 6, 6])
    eq = net.mb.tensor("eq", [4, 6, 6], "bool")
    net.mb.op("EQUAL", [m1, net.mb.const("z2", np.float32(0))], [eq])
    m2 = net.op("SELECT_V2", [eq, net.mb.const("nz", np.float32(-0.0)), m1], [4, 6, 6])
    y = net.op("ADD", [net.inputs[0], m2], [4, 6, 6])
    model = net.finish(y)
    assert fused_ops(model) == ["ADD"]
    x = special([4, 6, 6], 11)
    x[np.isinf(x)] = 1.0               # (LiteRT's builtin ADD clamps +-inf to +-FLT_MAX, gpuc as XNNPACK)
    check(gpu, model, [x])


def test_many_sources_with_max_batch(gpu):
    """The whole-arena binding of a 20-input PACK under --max-batch: each item reads its own arena."""
    mb = ModelBuilder()
    xs = [mb.input(f"x{i}", [1, 3]) for i in range(20)]
    y = mb.tensor("y", [1, 20, 3])
    mb.op("PACK", xs, [y], axis=1, values_count=20)
    mb.output(y)
    model = mb.finish()
    assert_items_bitexact(gpuc.compile(model, max_batch=3), model, [special([2, 3], i) for i in range(20)], 2,
                          gpu.device)


def test_arena_too_large_to_bind_whole(gpu, monkeypatch):
    """An arena beyond what every device can bind whole: one dispatch per 7 sources instead."""
    from gpuc.compiler.ops import gather_copy
    monkeypatch.setattr(gather_copy, "MAX_VIEW_BYTES", 0)
    mb = ModelBuilder()
    xs = [mb.input(f"x{i}", [2, 3]) for i in range(20)]
    y = mb.tensor("y", [2, 20, 3])
    mb.op("PACK", xs, [y], axis=1, values_count=20)
    mb.output(y)
    model = mb.finish()
    bundle = gpuc.compile(model, cache=False)
    assert len(read_bundle(bundle).dispatches) == 3
    feeds = [special([2, 3], i) for i in range(20)]
    m = gpuc.load(bundle, device=gpu.device)
    try:
        assert m.run(feeds)[0].tobytes() == run_litert(model, feeds)[0].tobytes()
    finally:
        m.close()


def test_fp16_storage_same_as_unfolded(gpu):
    """Under --precision fp16 the chain's source and output are stored as float16: the folded program
    gives the unfolded one's bytes."""
    net = Net([[1, 8, 8, 3]])
    a = net.op("RELU", net.inputs[0], [1, 8, 8, 3])
    y = window_partition(net, roll(net, roll(net, a, 3, 1), 3, 2), 4)
    z = net.op("RELU", y, net.shapes[y])
    model = net.finish(z)
    xs = [special([1, 8, 8, 3], 12)]
    outs = []
    for disabled in ([], ["fold_movement"]):
        bundle = gpuc.compile(model, precision="fp16", disable_passes=disabled)
        assert read_bundle(bundle).stats.get("fp16_tensors", 0) >= 2
        m = gpuc.load(bundle, device=gpu.device)
        try:
            outs.append(m.run([x.copy() for x in xs])[0].tobytes())
        finally:
            m.close()
    assert outs[0] == outs[1]


def concat_act_chain(act, explicit):
    """TRANSPOSE x2 -> CONCATENATION with a fused `act` -> TRANSPOSE; explicit: the activation as
    its own op after the CONCATENATION (LiteRT refuses a fused activation on float CONCATENATION)."""
    net = Net([[2, 3, 4], [2, 3, 4]])
    a = net.op("TRANSPOSE", net.inputs[0], [2, 4, 3], consts=[[0, 2, 1]])
    b = net.op("TRANSPOSE", net.inputs[1], [2, 4, 3], consts=[[0, 2, 1]])
    c = net.op("CONCATENATION", [a, b], [2, 8, 3], axis=1, fused_activation_function="NONE" if explicit else act)
    if explicit:
        c = net.op(act, c, [2, 8, 3])
    return net.finish(net.op("TRANSPOSE", c, [3, 8, 2], consts=[[2, 1, 0]]))


@pytest.mark.parametrize("act", ["RELU", "RELU6", "RELU_N1_TO_1"])
def test_concat_activation_only_at_the_end(gpu, act):
    """A CONCATENATION's fused activation: folded when it ends the chain, never read through."""
    model = concat_act_chain(act, False)
    assert fused_ops(model) == ["GATHER_COPY", "TRANSPOSE"]
    assert len(read_bundle(gpuc.compile(model)).dispatches) == 2
    xs = [special([2, 3, 4], 13) * 4, special([2, 3, 4], 14) * 4]
    for x in xs:
        x[~np.isfinite(x)] = 7.0
    ref = run_litert(concat_act_chain(act, True), [x.copy() for x in xs])[0]
    out = run_with(gpu, model, xs)[0]
    np.testing.assert_array_equal(out, ref)            # (-0.0 == 0.0: the activations' sign of zero is theirs)
    assert out.tobytes() == run_with(gpu, model, xs, ["fold_movement"])[0].tobytes()
