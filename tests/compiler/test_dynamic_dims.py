"""--dynamic NAME:AXIS<=MAX off the batch axis (issue 16, build 2): one bundle, compiled once, runs every
size 1..MAX of a sequence or image axis and matches LiteRT after resize_tensor_input to that size; ops
that cannot take a size known only at run time are refused, naming the op and the dynamic tensor."""
import numpy as np
import pytest

pytest.importorskip("vulkan")

import gpuc  # noqa: E402
from gpuc.compiler import entry  # noqa: E402
from gpuc.errors import GpucError, UnsupportedError  # noqa: E402
from gpuc.runtime.bundle import read_bundle  # noqa: E402
from helpers.builder import ModelBuilder  # noqa: E402
from helpers.litert import run_litert  # noqa: E402
from helpers.seqmodels import attention_model, conv_net, sequence_model  # noqa: E402


def rel_err(got, ref) -> float:
    return float(np.abs(got - ref).max() / max(np.abs(ref).max(), 1e-30))


@pytest.fixture(scope="module")
def device():
    from gpuc.runtime.device import Device
    d = Device()
    yield d
    d.close()


@pytest.fixture
def count_compiles(monkeypatch):
    calls = []
    real = entry.compile_bytes

    def counting(*a, **k):
        calls.append(1)
        return real(*a, **k)
    monkeypatch.setattr(entry, "compile_bytes", counting)
    import gpuc.compiler as C
    if hasattr(C, "compile_bytes"):
        monkeypatch.setattr(C, "compile_bytes", counting)
    return calls


def test_sequence_model_one_bundle_every_length(device, count_compiles):
    """Embedding GATHER, Conv1D (EXPAND_DIMS, CONV_2D, RESHAPE), LSTM, MEAN over time, FULLY_CONNECTED."""
    model = sequence_model()
    bundle = gpuc.compile(model, dynamic=["tokens:1<=40"], cache=False)
    assert len(count_compiles) == 1
    b = read_bundle(bundle)
    assert b.options["dynamic_dims"]["dims"] == [[0, 1, 40, "tokens:1"]]
    assert b.stats["cpu_nodes"] == 0
    rng = np.random.default_rng(0)
    with gpuc.load(bundle, device=device) as m:
        for n in (1, 7, 33, 40, 7):          # (7 twice: the cached command buffer)
            x = rng.integers(0, 20, (1, n)).astype(np.int32)
            m.reset_state()                  # (LiteRT starts each resized interpreter from zero state)
            got, = m.run([x])
            ref, = run_litert(model, [x])
            assert got.shape == ref.shape == (1, 3)
            assert rel_err(got, ref) <= 1e-5, n
    assert len(count_compiles) == 1


def test_attention_model_every_length(device):
    """Embedding, BATCH_MATMUL attention (scores [T, T]), SOFTMAX over T, the fused LayerNorm: every length
    1..64 from one bundle."""
    model = attention_model()
    bundle = gpuc.compile(model, dynamic=["tokens:1<=64"], cache=False)
    rng = np.random.default_rng(1)
    with gpuc.load(bundle, device=device) as m:
        for n in range(1, 65):
            x = rng.integers(0, 16, (1, n)).astype(np.int32)
            got, = m.run([x])
            ref, = run_litert(model, [x])
            assert got.shape == ref.shape == (1, n, 8)
            assert rel_err(got, ref) <= 1e-5, n
    assert "LAYER_NORM" in " ".join(d.label for d in read_bundle(bundle).dispatches) or \
        any("layer_norm" in s.name for s in read_bundle(bundle).shaders)


def test_conv_net_dynamic_height_and_width(device):
    """CONV_2D (stride 2 SAME, 1x1), DEPTHWISE_CONV_2D, ADD, PAD, MAX_POOL (VALID), AVERAGE_POOL (SAME),
    MEAN over H and W, FULLY_CONNECTED, with H and W dynamic (MobileNetV2-style)."""
    model = conv_net()
    bundle = gpuc.compile(model, dynamic=["input:1<=20", "input:2<=20"], cache=False)
    rng = np.random.default_rng(2)
    with gpuc.load(bundle, device=device) as m:
        for h, w in ((10, 10), (20, 20), (1, 1), (7, 13), (20, 3)):
            x = rng.uniform(-1, 1, (1, h, w, 3)).astype(np.float32)
            got, = m.run([x])
            ref, = run_litert(model, [x])
            assert rel_err(got, ref) <= 1e-5, (h, w)


def test_sizes_outside_the_bound_and_wrong_shapes_are_refused(device):
    bundle = gpuc.compile(sequence_model(), dynamic=["tokens:1<=12"], cache=False)
    with gpuc.load(bundle, device=device) as m:
        with pytest.raises(GpucError, match=r"size 13 on axis 1 is outside 1..12"):
            m.run([np.zeros((1, 13), np.int32)])
        with pytest.raises(GpucError, match=r"expected shape \[1, 5\]"):
            m.run([np.zeros((2, 5), np.int32)])


def _chain(op_maker, t=8):
    mb = ModelBuilder()
    x = mb.input("tokens", (1, t, 4))
    y = op_maker(mb, x, t)
    mb.output(y)
    return mb.finish()


def test_reshape_with_a_constant_target_is_named():
    def reshape(mb, x, t):
        r = mb.tensor("r", (1, t * 4))
        mb.op("RESHAPE", [x, mb.const("target", np.array([1, t * 4], np.int32))], [r], new_shape=[1, t * 4])
        return r
    with pytest.raises(UnsupportedError, match=r"RESHAPE \(operator #0\)"):
        gpuc.compile(_chain(reshape), dynamic=["tokens:1<=16"], cache=False)


def test_an_op_without_a_dynamic_rule_is_named_with_its_tensor():
    def reverse(mb, x, t):
        r = mb.tensor("r", (1, t, 4))
        mb.op("REVERSE_V2", [x, mb.const("axis", np.array([1], np.int32))], [r])
        return r
    with pytest.raises(UnsupportedError, match=r"REVERSE_V2 \(operator #0\) cannot take the dynamic dim of its "
                                               r"input 'tokens'"):
        gpuc.compile(_chain(reverse), dynamic=["tokens:1<=16"], cache=False)


def test_a_broadcast_against_a_fixed_size_is_refused():
    def add(mb, x, t):
        r = mb.tensor("r", (1, t, 4))
        mb.op("ADD", [x, mb.const("c", np.ones((1, t, 4), np.float32))], [r])
        return r
    with pytest.raises(UnsupportedError, match=r"ADD \(operator #0\).*broadcast"):
        gpuc.compile(_chain(add), dynamic=["tokens:1<=16"], cache=False)


def test_a_size_dependent_decision_is_refused_by_its_guard():
    """A VALID window needs a minimum size: sizes below it are refused at compile time, naming the op
    (found by propagating the shapes at the smallest size, or else by the op's guard)."""
    def pool(mb, x, t):
        x4 = mb.tensor("x4", (1, 1, t, 4))
        mb.op("RESHAPE", [x, mb.const("s", np.array([1, 1, -1, 4], np.int32))], [x4], new_shape=[1, 1, -1, 4])
        r = mb.tensor("r", (1, 1, t - 2, 4))
        mb.op("MAX_POOL_2D", [x4], [r], padding=1, stride_w=1, stride_h=1, filter_width=3, filter_height=1)
        return r
    with pytest.raises(UnsupportedError, match=r"at size 1, MAX_POOL_2D \(operator #1\)|MAX_POOL_2D \(operator #1\) "
                                               r"decides on .* differs at tokens:1=1"):
        gpuc.compile(_chain(pool), dynamic=["tokens:1<=16"], cache=False)


def _one(op, out_shape, extra=(), t=8, **attrs):
    """x [1, T, 4] -> op -> out (shape as a function of T)."""
    mb = ModelBuilder()
    x = mb.input("tokens", (1, t, 4))
    ins = [x] + [x if isinstance(e, str) else mb.const(f"c{i}", e) for i, e in enumerate(extra)]
    y = mb.tensor("y", out_shape(t))
    mb.op(op, ins, [y], **attrs)
    mb.output(y)
    return mb.finish()


SINGLE = {
    "transpose": ("TRANSPOSE", lambda t: (1, 4, t), [np.array([0, 2, 1], np.int32)], {}),
    "pad_time": ("PAD", lambda t: (1, t + 3, 4), [np.array([[0, 0], [1, 2], [0, 0]], np.int32)], {}),
    "concat_time": ("CONCATENATION", lambda t: (1, 2 * t, 4), ["x"], dict(axis=1)),
    "concat_depth": ("CONCATENATION", lambda t: (1, t, 8), ["x"], dict(axis=2)),
    "reduce_max_time": ("REDUCE_MAX", lambda t: (1, 4), [np.array([1], np.int32)], dict(keep_dims=False)),
    "sum_depth": ("SUM", lambda t: (1, t, 1), [np.array([2], np.int32)], dict(keep_dims=True)),
    "log_softmax": ("LOG_SOFTMAX", lambda t: (1, t, 4), [], {}),
    "squeeze": ("SQUEEZE", lambda t: (t, 4), [], dict(squeeze_dims=[0])),
    "mul_self": ("MUL", lambda t: (1, t, 4), ["x"], {}),
    "add_row": ("ADD", lambda t: (1, t, 4), [np.arange(4, dtype=np.float32)], {}),
    "tanh": ("TANH", lambda t: (1, t, 4), [], {}),
    "first_token": ("STRIDED_SLICE", lambda t: (1, 4), [np.array([0, 0, 0], np.int32), np.array([1, 1, 4], np.int32),
                                                       np.array([1, 1, 1], np.int32)], dict(shrink_axis_mask=2)),
    "last_token": ("STRIDED_SLICE", lambda t: (1, 1, 4), [np.array([0, -1, 0], np.int32), np.array([1, 0, 4], np.int32),
                                                         np.array([1, 1, 1], np.int32)], dict(end_mask=2)),
    "every_other": ("STRIDED_SLICE", lambda t: (1, (t + 1) // 2, 4), [np.array([0, 0, 0], np.int32),
                    np.array([1, 0, 4], np.int32), np.array([1, 2, 1], np.int32)], dict(end_mask=2)),
    "gather_time": ("GATHER", lambda t: (1, 2, 4), [np.array([0, 0], np.int32)], dict(axis=1)),
}


@pytest.mark.parametrize("case", list(SINGLE))
def test_single_ops_every_size(case, device):
    op, shape, extra, attrs = SINGLE[case]
    model = _one(op, shape, extra, **attrs)
    bundle = gpuc.compile(model, dynamic=["tokens:1<=12"], cache=False)
    rng = np.random.default_rng(4)
    with gpuc.load(bundle, device=device) as m:
        for n in (1, 5, 12):
            x = rng.uniform(-2, 2, (1, n, 4)).astype(np.float32)
            got, = m.run([x])
            ref, = run_litert(model, [x])
            assert got.shape == ref.shape
            assert rel_err(got, ref) <= 1e-5, n


def test_reshape_targets_computed_from_shape(device):
    """SHAPE -> STRIDED_SLICE -> PACK -> RESHAPE (the heads split converters emit for a dynamic sequence):
    the target follows the run's length."""
    from helpers.seqmodels import shape_reshape_model
    model = shape_reshape_model()
    bundle = gpuc.compile(model, dynamic=["x:1<=16"], cache=False)
    assert not any(d.label.startswith(("SHAPE", "PACK", "STRIDED_SLICE")) for d in read_bundle(bundle).dispatches)
    rng = np.random.default_rng(5)
    with gpuc.load(bundle, device=device) as m:
        for n in (1, 5, 16):
            x = rng.uniform(-1, 1, (1, n, 8)).astype(np.float32)
            got, = m.run([x])
            ref, = run_litert(model, [x])
            assert got.shape == ref.shape == (1, n, 8)
            assert rel_err(got, ref) <= 1e-5, n


def test_a_size_used_as_data_is_refused():
    mb = ModelBuilder()
    x = mb.input("x", (1, 8, 4), shape_signature=(1, -1, 4))
    shp = mb.tensor("shape", (3,), "int32")
    mb.op("SHAPE", [x], [shp], out_type=2)
    f = mb.tensor("f", (3,), "float32")
    mb.op("CAST", [shp], [f])
    mb.output(f)
    with pytest.raises(UnsupportedError, match=r"CAST \(operator #1\).*dynamic size as data"):
        gpuc.compile(mb.finish(), dynamic=["x:1<=16"], cache=False)


def test_command_buffers_cached_per_size_and_evicted(device, monkeypatch):
    from gpuc.runtime import dynamic
    monkeypatch.setattr(dynamic, "CACHE_LIMIT", 2)
    model = attention_model()
    bundle = gpuc.compile(model, dynamic=["tokens:1<=16"], cache=False)
    rng = np.random.default_rng(6)
    with gpuc.load(bundle, device=device) as m:
        for n in (3, 4, 5, 3, 6, 16, 4, 7, 8, 9):
            x = rng.integers(0, 16, (1, n)).astype(np.int32)
            got, = m.run([x])
            assert rel_err(got, run_litert(model, [x])[0]) <= 1e-5, n
            assert all(len(s.cmds) <= 2 for s in m.slots)
        assert (9,) in [k for s in m.slots for k in s.cmds]
        assert (16,) not in [k for s in m.slots for k in s.cmds]        # (the bound's is slot.cmd)


def test_fp16_storage_with_dynamic_dims(device):
    """--precision fp16 with a dynamic H and W: within fp16 rounding of LiteRT at each size."""
    model = conv_net()
    bundle = gpuc.compile(model, dynamic=["input:1<=20", "input:2<=20"], precision="fp16", cache=False)
    assert read_bundle(bundle).stats.get("fp16_tensors")
    rng = np.random.default_rng(7)
    with gpuc.load(bundle, device=device) as m:
        for h, w in ((1, 1), (9, 14), (20, 20)):
            x = rng.uniform(-1, 1, (1, h, w, 3)).astype(np.float32)
            got, = m.run([x])
            assert rel_err(got, run_litert(model, [x])[0]) <= 3e-3, (h, w)


def test_one_size_reached_two_ways_meets_in_an_add(device):
    """ceil(H/2) from a SAME stride-2 conv and (H-1)//2+1 from a VALID stride-2 pool: equal at every size,
    so their ADD is accepted (checked over 1..MAX) and matches LiteRT."""
    mb = ModelBuilder()
    x = mb.input("img", (1, 9, 9, 2), shape_signature=(1, -1, -1, 2))
    a = mb.tensor("a", (1, 5, 5, 2))
    mb.op("CONV_2D", [x, mb.const("w", np.ones((2, 1, 1, 2), np.float32) * 0.5), mb.const("b", np.zeros(2, np.float32))],
          [a], padding=0, stride_w=2, stride_h=2)
    p = mb.tensor("p", (1, 5, 5, 2))
    mb.op("MAX_POOL_2D", [x], [p], padding=1, stride_w=2, stride_h=2, filter_width=1, filter_height=1)
    y = mb.tensor("y", (1, 5, 5, 2))
    mb.op("ADD", [a, p], [y])
    mb.output(y)
    model = mb.finish()
    bundle = gpuc.compile(model, dynamic=["img:1<=12", "img:2<=12"], cache=False)
    rng = np.random.default_rng(8)
    with gpuc.load(bundle, device=device) as m:
        for h, w in ((1, 1), (4, 7), (12, 11)):
            xi = rng.uniform(-1, 1, (1, h, w, 2)).astype(np.float32)
            got, = m.run([xi])
            ref, = run_litert(model, [xi])
            assert got.shape == ref.shape and rel_err(got, ref) <= 1e-5, (h, w)


def test_slice_of_a_dynamic_tensor(device):
    """SLICE with size -1 on the dynamic axis (numpy reference: LiteRT's SLICE fails to prepare after a
    resize of this model, 'output_shape_vector[idx] != SizeOfDimension')."""
    model = _one("SLICE", lambda t: (1, t, 2), [np.array([0, 0, 1], np.int32), np.array([-1, -1, 2], np.int32)])
    bundle = gpuc.compile(model, dynamic=["tokens:1<=12"], cache=False)
    with gpuc.load(bundle, device=device) as m:
        for n in (1, 5, 12):
            x = np.random.default_rng(n).uniform(-2, 2, (1, n, 4)).astype(np.float32)
            got, = m.run([x])
            np.testing.assert_array_equal(got, x[:, :, 1:3])
