"""GATHER_COPY in wide words (ops/gather_copy.py, shaders/gather_copy.comp VEC > 0): a concatenation
along the last axis, a PAD of a channel run, many sources through the whole-arena view and a region
table copy 4-element words, bit for bit as the one-element-per-invocation path and LiteRT (NaN payloads,
-0.0, +-Inf); channel counts off the word grid keep the scalar path."""
import numpy as np
import pytest

import gpuc
from gpuc.compiler import normalize_options
from gpuc.compiler.prepare import prepare
from gpuc.runtime.bundle import read_bundle
from helpers.builder import ModelBuilder
from helpers.litert import assert_items_bitexact, run_litert

pytest.importorskip("vulkan")


def special(shape, seed, dtype="float32"):
    """Random values with a NaN with a payload, +-Inf and -0.0 in them (int32: random integers)."""
    rng = np.random.default_rng(seed)
    if dtype == "int32":
        return rng.integers(-1 << 31, 1 << 31, shape, dtype=np.int64).astype(np.int32)
    x = rng.standard_normal(shape).astype(np.float32)
    bits = x.reshape(-1).view(np.uint32)
    bits[:4] = [0x7FC01234, 0x7F800000, 0x80000000, 0xFF800000]
    bits[-1] = 0xFFC0A000                         # a negative NaN with a payload (kept by float16 too)
    return x


def concat_last(chans, dtype="float32", act="NONE", lead=(2, 3, 4)):
    """CONCATENATION of inputs [*lead, c] for c in chans along the last axis."""
    mb = ModelBuilder()
    xs = [mb.input(f"x{i}", [*lead, c], dtype) for i, c in enumerate(chans)]
    y = mb.tensor("y", [*lead, sum(chans)], dtype)
    mb.op("CONCATENATION", xs, [y], axis=len(lead), fused_activation_function=act)
    mb.output(y)
    return mb.finish(), [special([*lead, c], i, dtype) for i, c in enumerate(chans)]


def vec_of(model, precision="fp32"):
    """The VEC define of each gather_copy kernel of the lowered program (None: a many-source kernel,
    finished after memory planning)."""
    p = prepare(model, normalize_options({"precision": precision}))
    return [k.defines.get("VEC") for k in p.program if getattr(k, "template", None) == "gather_copy"]


def run(gpu, model, xs, wide=True, **opts):
    """(outputs, bundle) of the model compiled without the cache; wide=False: the scalar path only
    (CompileOptions.copy_words ())."""
    bundle = gpuc.compile(model, cache=False, **opts, **({} if wide else {"copy_words": ()}))
    mod = gpuc.load(bundle, device=gpu.device)
    try:
        return mod.run([x.copy() for x in xs]), read_bundle(bundle)
    finally:
        mod.close()


@pytest.mark.parametrize("dtype", ["float32", "int32"])
@pytest.mark.parametrize("chans,vec", [([8, 16, 24], 2), ([4, 8], 1), ([5, 3], 0), ([8, 6], 0)])
def test_concat_last_axis(gpu, dtype, chans, vec):
    model, xs = concat_last(chans, dtype)
    assert vec_of(model) == [vec]
    (out,), b = run(gpu, model, xs)
    ref = run_litert(model, [x.copy() for x in xs])[0]
    assert out.dtype == ref.dtype and out.tobytes() == ref.tobytes()
    total = 2 * 3 * 4 * sum(chans)                    # (one invocation per VEC words of 4 elements)
    assert b.dispatches[0].groups[0] == -(-total // (4 * vec if vec else 1) // 64)


def fp16_model(chans, pad=None, act="NONE"):
    """Inputs times 1 (stored as float16 under --precision fp16, as is their concatenation along the last
    axis and what a PADV2 of its channels by `pad` (lo, hi, value) makes of it), the first input also
    as it is (float32 storage: a source of another storage type), then times 1 again.  act: the
    CONCATENATION's fused activation."""
    mb = ModelBuilder()
    lead = [2, 3, 4]
    xs = [mb.input(f"x{i}", lead + [c]) for i, c in enumerate(chans)]
    one = mb.const("one", np.ones([1], np.float32))
    ts = [xs[0]]
    for i, (x, c) in enumerate(zip(xs, chans)):
        t = mb.tensor(f"m{i}", lead + [c])
        mb.op("MUL", [x, one], [t])
        ts.append(t)
    c = sum(chans) + chans[0]
    y = mb.tensor("cat", lead + [c])
    mb.op("CONCATENATION", ts, [y], axis=3, fused_activation_function=act)
    if pad is not None:
        lo, hi, v = pad
        p = mb.tensor("pad", lead + [c + lo + hi])
        mb.op("PADV2", [y, mb.const("pads", np.array([[0, 0]] * 3 + [[lo, hi]], np.int32)),
                        mb.const("v", np.array(v, np.float32))], [p])
        y, c = p, c + lo + hi
    z = mb.tensor("z", lead + [c])
    mb.op("MUL", [y, one], [z])
    mb.output(z)
    return mb.finish(), [special(lead + [ch], i + 7) for i, ch in enumerate(chans)]


@pytest.mark.parametrize("chans,pad,vec", [([8, 16], None, 2), ([8, 16], (8, 16, -2.5), 2),
                                           ([4, 12], (4, 0, 2.5), 1), ([8, 6], None, 0)])
def test_fp16_storage_and_pad(gpu, chans, pad, vec):
    """--precision fp16: float16 words (mixed with a float32 source), a PADV2 fill per lane; the same bytes
    as the scalar path, and LiteRT's values rounded to float16 (its builtin MUL's +-FLT_MAX for +-Inf
    taken back)."""
    model, xs = fp16_model(chans, pad)
    assert vec_of(model, "fp16") == [vec]
    (wide,), b = run(gpu, model, xs, precision="fp16")
    assert b.stats.get("fp16_tensors", 0) >= 3
    (scalar,), _ = run(gpu, model, xs, wide=False, precision="fp16")
    assert wide.tobytes() == scalar.tobytes()
    ref = run_litert(model, [x.copy() for x in xs])[0]
    ref = np.where(np.abs(ref) == np.finfo(np.float32).max, np.copysign(np.inf, ref), ref)
    ref = ref.astype(np.float16).astype(np.float32)
    np.testing.assert_array_equal(wide, ref)
    assert (np.signbit(wide) == np.signbit(ref)).all()      # -0.0 (the fill's too), negative NaN


def test_fp32_pad_fill_bits(gpu):
    """PADV2 of a channel run in float32 words: LiteRT's bytes with a -2.5 fill; a -0.0 fill writes +0.0
    (zero bytes, as LiteRT's PADV2: ops/shape.py litert_pad_value) in every lane, as the scalar path."""
    model, xs = fp16_model([8, 8], (8, 8, -2.5))
    assert vec_of(model) == [2]
    for x in xs:
        x[np.isinf(x)] = 3.0           # (LiteRT's builtin MUL clamps +-Inf to +-FLT_MAX, gpuc as XNNPACK)
    (out,), _ = run(gpu, model, xs)
    assert out.tobytes() == run_litert(model, [x.copy() for x in xs])[0].tobytes()
    model, xs = fp16_model([8, 8], (8, 16, -0.0))
    (wide,), _ = run(gpu, model, xs)
    (scalar,), _ = run(gpu, model, xs, wide=False)
    assert wide.tobytes() == scalar.tobytes()
    fill = np.concatenate([wide[..., :8], wide[..., -16:]], axis=-1).reshape(-1)
    assert (fill.view(np.uint32) == 0).all()


@pytest.mark.parametrize("act", ["RELU", "RELU6"])
@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_fused_activation_same_as_scalar(gpu, act, precision):
    """A CONCATENATION's fused activation, per component in the wide path (float16 words under fp16):
    the scalar path's bytes, and the activation of the inputs."""
    model, xs = fp16_model([8, 16], act=act)
    assert vec_of(model, precision) == [2]
    xs = [x * 4 for x in xs]
    (wide,), b = run(gpu, model, xs, precision=precision)
    assert (b.stats.get("fp16_tensors", 0) >= 3) == (precision == "fp16")
    (scalar,), _ = run(gpu, model, xs, wide=False, precision=precision)
    assert wide.tobytes() == scalar.tobytes()
    ref = np.clip(np.concatenate([xs[0]] + xs, axis=-1), 0.0, np.inf if act == "RELU" else 6.0)
    if precision == "fp16":
        ref = ref.astype(np.float16).astype(np.float32)
    np.testing.assert_array_equal(wide, ref)


@pytest.mark.parametrize("n", [9, 40])
def test_many_sources_arena_view_and_table(gpu, n):
    """More than 7 sources (read through the whole-arena view, at their arena offsets in words) and, with
    40, more than 32 regions (the region table): wide words, LiteRT's bytes."""
    model, xs = concat_last([8] * n, lead=(2, 3))
    (out,), b = run(gpu, model, xs)
    assert out.tobytes() == run_litert(model, [x.copy() for x in xs])[0].tobytes()
    assert len(b.dispatches) == 1 and b.dispatches[0].groups[0] == -(-2 * 3 * 8 * n // 8 // 64)


def test_many_sources_with_max_batch(gpu):
    """Wide words through the whole-arena view of a --max-batch bundle: each item its own arena."""
    model, _ = concat_last([8] * 9, lead=(1, 2))
    assert vec_of(model) == [None]
    bundle = gpuc.compile(model, max_batch=3, cache=False)
    (d,) = read_bundle(bundle).dispatches
    assert d.groups[0] == 1                              # 3 items x 144 elements in 54 invocations (scalar: 7 groups)
    assert_items_bitexact(bundle, model, [special([2, 2, 8], i) for i in range(9)], 2, gpu.device)


@pytest.mark.parametrize("shift,vec", [(8, 2), (4, 1), (3, 0)])
def test_channel_roll(gpu, shift, vec):
    """SLICEs of channel runs concatenated back (a roll along channels): words where the cut allows."""
    mb = ModelBuilder()
    x = mb.input("x", [2, 3, 32])
    parts = []
    for k, (b, n) in enumerate([(32 - shift, shift), (0, 32 - shift)]):
        t = mb.tensor(f"s{k}", [2, 3, n])
        mb.op("SLICE", [x, mb.const(f"b{k}", np.array([0, 0, b], np.int32)),
                        mb.const(f"n{k}", np.array([2, 3, n], np.int32))], [t])
        parts.append(t)
    y = mb.tensor("y", [2, 3, 32])
    mb.op("CONCATENATION", parts, [y], axis=2)
    mb.output(y)
    model, xs = mb.finish(), [special([2, 3, 32], 5)]
    assert vec_of(model) == [vec]
    (out,), _ = run(gpu, model, xs)
    assert out.tobytes() == run_litert(model, [x.copy() for x in xs])[0].tobytes()
