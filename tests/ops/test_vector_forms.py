"""The vector forms of the standalone elementwise binary ops and of small-window pooling
(shaders/binary_math.comp VEC, pool2d.comp VEC): 4 consecutive outputs along the innermost dim (the
channels) per invocation, vec4 loads (f16vec4 under float16 storage) of the operands contiguous along it, one
scalar for an operand broadcast along it.  Each is the scalar form's bits (fp32 and --precision fp16:
binary ops against ew_vectors 0, pools against LiteRT's values) and matches LiteRT."""
import os

import numpy as np
import pytest

pytest.importorskip("vulkan")

import gpuc  # noqa: E402
from gpuc.compiler.ir import GPU  # noqa: E402
from gpuc.compiler.options import resolve, using  # noqa: E402
from gpuc.compiler.prepare import prepare  # noqa: E402
from helpers.builder import ModelBuilder  # noqa: E402
from helpers.litert import run_litert  # noqa: E402

RNG = np.random.default_rng(41)
POOL1 = dict(padding="VALID", stride_w=1, stride_h=1, filter_width=1, filter_height=1)


def _edges(mb, x, shape, fp16):
    """x itself, or (fp16) x through a 1x1 max pool, so that under --precision fp16 the op reads float16."""
    if not fp16:
        return x
    p = mb.tensor(f"{x}_p", list(shape))
    mb.op("MAX_POOL_2D", [x], [p], **POOL1)
    return p


def binary_model(op, a_shape, b, act, fp16):
    """op(a, b): a a runtime input; b a runtime input of shape `b` (a tuple) or a constant (an array)."""
    mb = ModelBuilder()
    a_id = _edges(mb, mb.input("a", list(a_shape)), a_shape, fp16 and len(a_shape) == 4)
    feeds = [RNG.normal(0, 2, a_shape).astype(np.float32)]
    if isinstance(b, tuple):
        b_id = mb.input("b", list(b))
        feeds.append((RNG.uniform(0.5, 2, b) * RNG.choice([-1, 1], b)).astype(np.float32))
        b_shape = b
    else:
        b_id, b_shape = mb.const("b", b), b.shape
    out = np.broadcast_shapes(a_shape, b_shape)
    y = mb.tensor("y", list(out))
    mb.op(op, [a_id, b_id], [y], **({} if act is None else {"fused_activation_function": act}))
    mb.output(y)
    return mb.finish(), feeds


def run(model, feeds, **opts):
    with gpuc.load(gpuc.compile(model, cache=False, **opts)) as m:
        return [np.array(o) for o in m.run(feeds)]


def kernels(model, template, **opts):
    """The `template` kernels of the program compiled with `opts`: (invocations, vec4 bindings) each."""
    with using(resolve(**opts)):
        ks = [k for k in prepare(model, warn=False).program if k.kind == GPU and k.template == template]
    return [(k.invocations, set(k.vec4)) for k in ks]


# (a shape, b: a runtime shape or a constant, vector form expected)
BINARY = [
    ((2, 5, 6, 8), (2, 5, 6, 8), True),                                     # same shape
    ((2, 5, 6, 8), np.array(0.75, np.float32), True),                       # a scalar constant
    ((2, 5, 6, 12), RNG.uniform(-2, 2, 12).astype(np.float32), True),       # per channel
    ((2, 5, 6, 8), (2, 5, 6, 1), True),                                     # broadcast along the channels
    ((2, 1, 6, 8), (1, 5, 1, 8), True),                                     # both broadcast, other dims
    ((3, 7, 6), (6,), False),                                               # innermost 6: the scalar form
    ((4, 10), (4, 1), False),                                               # (rank 2, innermost 10)
]


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
@pytest.mark.parametrize("op,act", [("MUL", "RELU"), ("ADD", "NONE"), ("SUB", "RELU6"), ("MAXIMUM", None)])
@pytest.mark.parametrize("a_shape,b,vec", BINARY)
def test_binary(op, act, a_shape, b, vec, precision):
    if precision == "fp16" and os.environ.get("GPUC_DISABLE_FP16"):
        pytest.skip("fp16 storage disabled")
    model, feeds = binary_model(op, a_shape, b, act, precision == "fp16")
    n = int(np.prod(np.broadcast_shapes(a_shape, b if isinstance(b, tuple) else b.shape)))
    contiguous = {"out_", "a"} | ({"b"} if np.shape(b if not isinstance(b, tuple) else np.empty(b))[-1:] == a_shape[-1:] else set())
    assert kernels(model, "binary_math", precision=precision) == [(n // 4, contiguous) if vec else (n, set())]
    assert kernels(model, "binary_math", precision=precision, ew_vectors=0) == [(n, set())]
    outs = run(model, feeds, precision=precision)
    np.testing.assert_array_equal(outs[0], run(model, feeds, precision=precision, ew_vectors=0)[0])
    ref = run_litert(model, feeds)[0]
    tol = 1e-6 if precision == "fp32" else 2e-3
    np.testing.assert_allclose(outs[0], ref, rtol=tol, atol=tol * float(np.abs(ref).max()))


def pool_model(op, shape, k, s, padding, act, pad=None, fp16=False):
    n, h, w, c = shape
    mb = ModelBuilder()
    x = _edges(mb, mb.input("x", list(shape)), shape, fp16)
    if pad is not None:                       # an explicit PAD the compiler folds into the pool
        t, l = pad
        h, w = h + 2 * t, w + 2 * l
        p = mb.tensor("padded", [n, h, w, c])
        mb.op("PAD", [x, mb.const("pads", np.array([[0, 0], [t, t], [l, l], [0, 0]], np.int32))], [p])
        x = p
    if padding == "SAME":
        oh, ow = -(-h // s), -(-w // s)
    else:
        oh, ow = (h - k) // s + 1, (w - k) // s + 1
    y = mb.tensor("y", [n, oh, ow, c])
    mb.op(op, [x], [y], padding=padding, stride_h=s, stride_w=s, filter_height=k, filter_width=k,
          fused_activation_function=act)
    mb.output(y)
    return mb.finish()


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
@pytest.mark.parametrize("op", ["AVERAGE_POOL_2D", "MAX_POOL_2D"])
@pytest.mark.parametrize("shape,k,s,padding,act,pad,vec", [
    ((2, 9, 11, 8), 3, 1, "SAME", "NONE", None, True),        # Inception's 3x3 / 1 average pool
    ((1, 12, 10, 12), 3, 2, "VALID", "RELU6", None, True),
    ((2, 10, 10, 16), 3, 2, "VALID", "NONE", (1, 1), True),   # a folded PAD (ResNet's stem max pool)
    ((1, 8, 8, 6), 2, 2, "VALID", "RELU", None, False),       # 6 channels: the scalar form
])
def test_pool(op, shape, k, s, padding, act, pad, vec, precision):
    if precision == "fp16" and os.environ.get("GPUC_DISABLE_FP16"):
        pytest.skip("fp16 storage disabled")
    model = pool_model(op, shape, k, s, padding, act, pad, fp16=precision == "fp16")
    x = RNG.normal(0, 2, shape).astype(np.float32)
    x.reshape(-1)[:3] = [-0.0, 1e3, -1e3]
    ref = run_litert(model, [x])[0]
    out_n = int(np.prod(ref.shape))
    pools = kernels(model, "pool2d", precision=precision)[-1:]          # (after the fp16 edge's 1x1 pool)
    assert pools == [(out_n // 4, {"out_", "x"}) if vec else (out_n, set())]
    out = run(model, [x], precision=precision)[0]
    if precision == "fp32":
        np.testing.assert_allclose(out, ref, rtol=1e-6, atol=1e-6)
    else:
        np.testing.assert_allclose(out, ref, rtol=2e-3, atol=2e-3 * float(np.abs(ref).max()))


def copy_model(perm, shapes, fp16):
    """TRANSPOSE of one input by `perm`."""
    mb = ModelBuilder()
    x = _edges(mb, mb.input("x0", list(shapes[0])), shapes[0], fp16 and len(shapes[0]) == 4)
    y = mb.tensor("y", [shapes[0][p] for p in perm])
    mb.op("TRANSPOSE", [x, mb.const("perm", np.array(perm, np.int32))], [y])
    mb.output(y)
    return mb.finish()


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
@pytest.mark.parametrize("kind,shapes,vec", [
    ((0, 2, 1, 3), [(2, 6, 8, 12)], True),                  # channels stay innermost
    ((0, 1, 3, 2, 4, 5), [(1, 2, 3, 2, 4, 8)], True),        # a window partition
    ((0, 2, 1, 3), [(2, 7, 3, 8)], True),                   # attention heads [B, S, H, D] -> [B, H, S, D]
    ((0, 2, 1, 3), [(2, 6, 8, 6)], False),                  # 6 channels: the scalar form
    ((0, 2, 1), [(2, 6, 8)], False),                         # the innermost dim moves
])
def test_copy(kind, shapes, vec, precision):
    """copy_nd's vector form (shaders/copy_nd.comp VEC, ops/elements.py copy_vector) moves the same bits as
    the scalar form, and LiteRT's values."""
    if precision == "fp16" and os.environ.get("GPUC_DISABLE_FP16"):
        pytest.skip("fp16 storage disabled")
    model = copy_model(kind, shapes, precision == "fp16")
    feeds = [RNG.normal(0, 4, s).astype(np.float32) for s in shapes]
    got = kernels(model, "copy_nd", precision=precision)
    assert got and all(v == ({"out_", "x"} if vec else set()) for _, v in got)
    assert not any(v for _, v in kernels(model, "copy_nd", precision=precision, ew_vectors=0))
    out = run(model, feeds, precision=precision)[0]
    np.testing.assert_array_equal(out, run(model, feeds, precision=precision, ew_vectors=0)[0])
    ref = run_litert(model, feeds)[0]
    if precision == "fp32":
        np.testing.assert_array_equal(out, ref)
    else:
        np.testing.assert_allclose(out, ref, rtol=1e-3, atol=1e-3 * float(np.abs(ref).max()))
