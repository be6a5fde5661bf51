"""Per-op correctness on lavapipe against LiteRT's CPU interpreter, on tiny builder-made models.

Each case builds a one-op model (tests/modelgen.py), runs LiteRT on it (which also proves the
model is valid TFLite), compiles and runs it with gpuc, and compares.
"""
import numpy as np
import pytest

import gpuc
from modelgen import ModelBuilder, run_litert

pytest.importorskip("vulkan")
ACTS = ["NONE", "RELU", "RELU6", "RELU_N1_TO_1", "TANH"]


@pytest.fixture(scope="module")
def device():
    from gpuc.runtime.device import Device
    d = Device()
    yield d
    d.close()


def rnd(shape, seed=0, lo=-1.0, hi=1.0):
    return np.random.default_rng(seed).uniform(lo, hi, shape).astype(np.float32)


def check(device, model: bytes, inputs, rtol=1e-4):
    refs = run_litert(model, inputs)
    with gpuc.load(gpuc.compile(model), device=device) as m:
        outs = m.run(inputs)
    assert len(outs) == len(refs)
    for o, r in zip(outs, refs):
        assert o.shape == r.shape and o.dtype == r.dtype
        np.testing.assert_allclose(o, r, rtol=rtol, atol=1e-5 * max(1.0, float(np.abs(r).max())))
    return outs


def one_op(op, in_shapes, out_shape, consts=(), **opts):
    """Model with runtime inputs `in_shapes`, then constant inputs `consts` (arrays, or None for -1)."""
    mb = ModelBuilder()
    ins = [mb.input(f"x{i}", s) for i, s in enumerate(in_shapes)]
    ins += [-1 if c is None else mb.const(f"c{i}", c) for i, c in enumerate(consts)]
    y = mb.tensor("y", out_shape)
    mb.op(op, ins, [y], **opts)
    mb.output(y)
    return mb.finish()


def conv_out(n, k, s, d, padding):
    return -(-n // s) if padding == "SAME" else (n - (k - 1) * d - 1) // s + 1


@pytest.mark.parametrize("k,s,d,padding,act", [
    ((1, 1), (1, 1), 1, "VALID", "NONE"),
    ((3, 3), (1, 1), 1, "SAME", "RELU"),
    ((3, 3), (2, 2), 1, "SAME", "RELU6"),
    ((3, 3), (2, 1), 1, "VALID", "RELU_N1_TO_1"),
    ((5, 3), (1, 2), 1, "SAME", "TANH"),
    ((3, 3), (1, 1), 2, "SAME", "NONE"),
    ((3, 3), (1, 1), 2, "VALID", "RELU"),
])
def test_conv2d(device, k, s, d, padding, act):
    n, h, w, ci, co = 2, 7, 9, 3, 5
    oh, ow = conv_out(h, k[0], s[0], d, padding), conv_out(w, k[1], s[1], d, padding)
    mb = ModelBuilder()
    x = mb.input("x", [n, h, w, ci])
    wt = mb.const("w", rnd((co, *k, ci), 1))
    b = mb.const("b", rnd((co,), 2))
    y = mb.tensor("y", [n, oh, ow, co])
    mb.op("CONV_2D", [x, wt, b], [y], padding=padding, stride_h=s[0], stride_w=s[1], dilation_hfactor=d,
          dilation_wfactor=d, fused_activation_function=act)
    mb.output(y)
    check(device, mb.finish(), [rnd((n, h, w, ci), 3)])


def test_conv2d_grouped(device):
    mb = ModelBuilder()
    x = mb.input("x", [1, 6, 6, 4])
    w = mb.const("w", rnd((6, 3, 3, 2), 1))
    b = mb.const("b", rnd((6,), 2))
    y = mb.tensor("y", [1, 6, 6, 6])
    mb.op("CONV_2D", [x, w, b], [y], padding="SAME", stride_h=1, stride_w=1)
    mb.output(y)
    model = mb.finish()
    try:
        run_litert(model, [rnd((1, 6, 6, 4))])
    except RuntimeError:
        pytest.skip("this LiteRT build has no grouped float conv")
    check(device, model, [rnd((1, 6, 6, 4))])


@pytest.mark.parametrize("s,padding,d,mult,act", [
    (1, "SAME", 1, 1, "RELU6"), (2, "SAME", 1, 1, "NONE"), (2, "VALID", 1, 1, "RELU"),
    (1, "SAME", 2, 1, "NONE"), (1, "VALID", 1, 2, "TANH"), (2, "SAME", 1, 2, "RELU6"),
])
def test_depthwise_conv2d(device, s, padding, d, mult, act):
    n, h, w, c = 1, 8, 7, 3
    oh, ow = conv_out(h, 3, s, d, padding), conv_out(w, 3, s, d, padding)
    mb = ModelBuilder()
    x = mb.input("x", [n, h, w, c])
    wt = mb.const("w", rnd((1, 3, 3, c * mult), 1))
    b = mb.const("b", rnd((c * mult,), 2))
    y = mb.tensor("y", [n, oh, ow, c * mult])
    mb.op("DEPTHWISE_CONV_2D", [x, wt, b], [y], padding=padding, stride_h=s, stride_w=s, depth_multiplier=mult,
          dilation_hfactor=d, dilation_wfactor=d, fused_activation_function=act)
    mb.output(y)
    check(device, mb.finish(), [rnd((n, h, w, c), 3)])


@pytest.mark.parametrize("in_shape,out_shape,keep,bias,act", [
    ([3, 10], [3, 6], False, True, "NONE"),
    ([2, 2, 2, 5], [4, 6], False, True, "RELU"),
    ([2, 3, 10], [2, 3, 6], True, True, "RELU6"),
    ([2, 10], [2, 6], False, True, "RELU_N1_TO_1"),
    ([1, 10], [1, 6], False, False, "NONE"),
])
def test_fully_connected(device, in_shape, out_shape, keep, bias, act):
    i = in_shape[-1] if keep else int(np.prod(in_shape)) // out_shape[0]
    check(device, one_op("FULLY_CONNECTED", [in_shape], out_shape, [rnd((6, i), 1), rnd((6,), 2) if bias else None],
                         keep_num_dims=keep, fused_activation_function=act), [rnd(in_shape, 3)])


@pytest.mark.parametrize("op", ["ADD", "SUB", "MUL"])
@pytest.mark.parametrize("a,b,out", [
    ([2, 3, 4], [2, 3, 4], [2, 3, 4]),
    ([2, 1, 4, 3], [3], [2, 1, 4, 3]),
    ([1, 5, 1], [4, 1, 2], [4, 5, 2]),
    ([2, 3], [], [2, 3]),
    ([2, 1, 3, 1, 2], [1, 4, 1, 5, 1], [2, 4, 3, 5, 2]),
])
def test_binary_broadcast(device, op, a, b, out):
    check(device, one_op(op, [a, b], out), [rnd(a, 1), rnd(b, 2)])


@pytest.mark.parametrize("op,act", [("ADD", "RELU6"), ("MUL", "RELU"), ("SUB", "RELU_N1_TO_1"), ("ADD", "TANH")])
def test_binary_const_operand_and_activation(device, op, act):
    check(device, one_op(op, [[1, 4, 4, 3]], [1, 4, 4, 3], [rnd((3,), 5, -4, 4)], fused_activation_function=act),
          [rnd((1, 4, 4, 3), 1, -4, 4)])


@pytest.mark.parametrize("op", ["LOGISTIC", "RELU", "RELU6", "TANH", "RELU_N1_TO_1"])
def test_unary(device, op):
    check(device, one_op(op, [[2, 50]], [2, 50]), [np.linspace(-8, 8, 100, dtype=np.float32).reshape(2, 50)])


@pytest.mark.parametrize("shape,pads", [
    ([3, 4], [[1, 2], [0, 3]]), ([2, 3, 4], [[0, 0], [1, 1], [2, 0]]), ([1, 4, 5, 2], [[0, 0], [1, 1], [2, 2], [0, 0]]),
    ([1, 3, 3, 2], [[0, 0], [0, 0], [0, 0], [0, 0]]),
])
def test_pad(device, shape, pads):
    out = [d + a + b for d, (a, b) in zip(shape, pads)]
    check(device, one_op("PAD", [shape], out, [np.array(pads, np.int32)]), [rnd(shape)])


def test_padv2_value(device):
    check(device, one_op("PADV2", [[2, 3]], [4, 4], [np.array([[1, 1], [0, 1]], np.int32), np.array([2.5], np.float32)]),
          [rnd([2, 3])])


@pytest.mark.parametrize("op", ["MEAN", "SUM", "REDUCE_MAX", "REDUCE_MIN", "REDUCE_PROD"])
@pytest.mark.parametrize("axes,keep", [([1, 2], True), ([1, 2], False), ([-1], False), ([0, 3], True), ([0, 1, 2, 3], False)])
def test_reduce(device, op, axes, keep):
    shape = [2, 3, 4, 5]
    norm = sorted(a % 4 for a in axes)
    out = [1 if i in norm else d for i, d in enumerate(shape)] if keep else [d for i, d in enumerate(shape) if i not in norm]
    lo, hi = (0.5, 1.5) if op == "REDUCE_PROD" else (-1, 1)
    check(device, one_op(op, [shape], out, [np.array(axes, np.int32)], keep_dims=keep), [rnd(shape, 1, lo, hi)])


@pytest.mark.parametrize("shape,new", [([2, 3, 4], [6, 4]), ([1, 12], [1, 3, 4])])
@pytest.mark.parametrize("with_shape_input", [True, False])
def test_reshape(device, shape, new, with_shape_input):
    consts = [np.array(new, np.int32)] if with_shape_input else []
    check(device, one_op("RESHAPE", [shape], new, consts, new_shape=new), [rnd(shape)])


@pytest.mark.parametrize("shape,beta", [([3, 10], 1.0), ([2, 3, 4, 5], 0.5), ([1, 1000], 1.0)])
def test_softmax(device, shape, beta):
    check(device, one_op("SOFTMAX", [shape], shape, beta=beta), [rnd(shape, 1, -5, 5)])


@pytest.mark.parametrize("op", ["AVERAGE_POOL_2D", "MAX_POOL_2D"])
@pytest.mark.parametrize("k,s,padding,act", [(2, 2, "VALID", "NONE"), (3, 1, "SAME", "RELU"), (3, 2, "SAME", "RELU6"),
                                             (2, 2, "SAME", "NONE")])
def test_pool(device, op, k, s, padding, act):
    n, h, w, c = 2, 7, 9, 3
    oh, ow = conv_out(h, k, s, 1, padding), conv_out(w, k, s, 1, padding)
    check(device, one_op(op, [[n, h, w, c]], [n, oh, ow, c], padding=padding, stride_h=s, stride_w=s,
                         filter_height=k, filter_width=k, fused_activation_function=act), [rnd((n, h, w, c))])


@pytest.mark.parametrize("shapes,axis", [
    ([[1, 4, 4, 2], [1, 4, 4, 3]], 3), ([[2, 1, 3], [2, 4, 3], [2, 2, 3]], 1),
    ([[2, 3], [2, 5]], -1), ([[1, 2], [3, 2]], 0),
])
def test_concatenation(device, shapes, axis):
    """(LiteRT's float CONCATENATION rejects fused activations, so none is compared here.)"""
    out = list(shapes[0])
    out[axis] = sum(s[axis] for s in shapes)
    check(device, one_op("CONCATENATION", shapes, out, axis=axis), [rnd(s, i) for i, s in enumerate(shapes)])


def test_fully_connected_tanh_is_unsupported_like_litert():
    from gpuc.errors import UnsupportedError
    m = one_op("FULLY_CONNECTED", [[1, 4]], [1, 2], [rnd((2, 4)), rnd((2,))], fused_activation_function="TANH")
    with pytest.raises(UnsupportedError, match="FULLY_CONNECTED.*TANH"):
        gpuc.compile(m)


def test_chain(device):
    """conv -> depthwise -> residual add -> mean -> FC -> softmax in one model."""
    mb = ModelBuilder()
    x = mb.input("x", [1, 8, 8, 3])
    c1 = mb.tensor("c1", [1, 8, 8, 4])
    mb.op("CONV_2D", [x, mb.const("w1", rnd((4, 3, 3, 3), 1)), mb.const("b1", rnd((4,), 2))], [c1],
          padding="SAME", stride_h=1, stride_w=1, fused_activation_function="RELU6")
    c2 = mb.tensor("c2", [1, 8, 8, 4])
    mb.op("DEPTHWISE_CONV_2D", [c1, mb.const("w2", rnd((1, 3, 3, 4), 3)), mb.const("b2", rnd((4,), 4))], [c2],
          padding="SAME", stride_h=1, stride_w=1, depth_multiplier=1)
    a = mb.tensor("a", [1, 8, 8, 4])
    mb.op("ADD", [c1, c2], [a])
    m = mb.tensor("m", [1, 4])
    mb.op("MEAN", [a, mb.const("axes", np.array([1, 2], np.int32))], [m], keep_dims=False)
    f = mb.tensor("f", [1, 5])
    mb.op("FULLY_CONNECTED", [m, mb.const("w3", rnd((5, 4), 5)), mb.const("b3", rnd((5,), 6))], [f])
    y = mb.tensor("y", [1, 5])
    mb.op("SOFTMAX", [f], [y], beta=1.0)
    mb.output(y)
    mb.output(a)
    check(device, mb.finish(), [rnd((1, 8, 8, 3), 7)])
