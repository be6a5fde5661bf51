"""Native int8 kernels (compiler/ops/int8_conv.py, int8_eltwise.py; passes/quant.py native_int8) on one-op
int8 models: bit for bit equal to LiteRT's builtin kernels (BUILTIN_WITHOUT_DEFAULT_DELEGATES), with
random scales, zero points, weights and inputs.  Each model is checked to run its int8 form
("INT8_CONV_2D", "INT8_DEPTHWISE_CONV_2D", "INT8_FULLY_CONNECTED", "INT8_ADD", "INT8_MEAN",
"INT8_SOFTMAX", "INT8_AVERAGE_POOL_2D", "INT8_MAX_POOL_2D", "INT8_TRANSPOSE", "INT8_PAD",
"INT8_CONCATENATION", "INT8_SUB", "INT8_MUL", "INT8_RELU", "INT8_RELU6", "INT8_RELU_N1_TO_1", "INT8_LEAKY_RELU",
"INT8_LOGISTIC", "INT8_TANH", "INT8_EXP", "INT8_HARD_SWISH", "INT8_MAXIMUM", "INT8_MINIMUM", and the byte moves "INT8_SLICE", "INT8_STRIDED_SLICE",
"INT8_GATHER", "INT8_GATHER_ND", "INT8_SPACE_TO_DEPTH", "INT8_DEPTH_TO_SPACE", "INT8_TILE", "INT8_SPLIT",
"INT8_SPLIT_V", "INT8_PACK", "INT8_UNPACK", "INT8_MIRROR_PAD", "INT8_REVERSE_V2", "INT8_BATCH_TO_SPACE_ND",
"INT8_SPACE_TO_BATCH_ND", "INT8_BROADCAST_TO", with int32 and int64 indices); a model with an op lacking an int8 kernel runs as a float program, as before."""
import numpy as np
import pytest

pytest.importorskip("vulkan")

import gpuc  # noqa: E402
from gpuc.errors import UnsupportedError  # noqa: E402
from helpers.builder import ModelBuilder  # noqa: E402
from helpers.float_view import keep_float_view  # noqa: E402
from helpers.int8_exact import exact as _exact, int_dot_mode, ops_after_passes as _ops, qin as _qin  # noqa: E402
from helpers.litert import run_litert  # noqa: E402

I8 = "int8"


def _q(rng):
    return float(rng.uniform(0.01, 0.1)), int(rng.integers(-30, 30))


CONV_CASES = [   # (op, input shape, cout or depth multiplier, kernel, stride, padding, activation, per-channel, bias)
# (LiteRT's int8 convolutions require a bias; FULLY_CONNECTED's is optional)
    ("CONV_2D", (1, 9, 9, 8), 12, 3, 1, "SAME", "RELU6", True, True),       # word-wise channel loop (VEC4)
    ("CONV_2D", (2, 8, 7, 3), 6, 3, 2, "SAME", "NONE", True, True),         # byte loop, batch 2
    ("CONV_2D", (2, 32, 32, 3), 16, 3, 1, "SAME", "RELU", True, True),     # RGB: channels padded to 4, tiled
    ("CONV_2D", (1, 6, 6, 16), 5, 1, 1, "VALID", "RELU", False, True),      # 1x1, per-tensor
    ("CONV_2D", (1, 10, 10, 4), 8, 3, 2, "VALID", "NONE", True, True),
    # the implicit-GEMM kernel (at least 8 x 64 x 64 outputs): partial tiles along pixels, channels and K
    ("CONV_2D", (2, 15, 17, 12), 68, 3, 1, "SAME", "RELU6", True, True),
    ("CONV_2D", (1, 32, 32, 16), 64, 1, 1, "VALID", "NONE", False, True),
    ("CONV_2D", (2, 33, 31, 8), 72, 3, 2, "VALID", "RELU", True, True),
    ("DEPTHWISE_CONV_2D", (1, 9, 9, 8), 1, 3, 1, "SAME", "RELU6", True, True),
    ("DEPTHWISE_CONV_2D", (1, 8, 8, 3), 2, 3, 2, "SAME", "NONE", True, True),
    ("DEPTHWISE_CONV_2D", (1, 7, 7, 6), 1, 5, 1, "VALID", "RELU_N1_TO_1", False, True),
    ("DEPTHWISE_CONV_2D", (1, 8, 8, 12), 1, 3, 1, "SAME", "NONE", True, True),     # a block of 8 + 4 channels
    ("DEPTHWISE_CONV_2D", (1, 8, 8, 8), 2, 3, 2, "SAME", "NONE", True, True),
]


@pytest.mark.parametrize("case", CONV_CASES, ids=lambda c: f"{c[0]}-{c[1][3]}-{c[3]}x{c[3]}s{c[4]}{c[5]}-{c[6]}")
def test_conv_bit_exact(gpu, case):
    op, shape, cm, k, s, pad, act, per_ch, with_bias = case
    rng = np.random.default_rng(abs(hash(str(case))) % 2**32)
    n, h, w, ci = shape
    co = cm if op == "CONV_2D" else ci * cm
    mb = ModelBuilder()
    sx, zx = _q(rng)
    x = mb.input("x", list(shape), I8, quant=(sx, zx))
    wshape = (co, k, k, ci) if op == "CONV_2D" else (1, k, k, co)
    axis = 0 if op == "CONV_2D" else 3
    ws = rng.uniform(0.002, 0.02, co if per_ch else 1).astype(np.float32)
    wt = mb.const("w", rng.integers(-127, 128, wshape).astype(np.int8), quant=(ws, 0, axis))
    ins = [x, wt]
    if with_bias:
        ins.append(mb.const("b", rng.integers(-4000, 4000, co).astype(np.int32),
                            quant=(np.float32(sx) * np.broadcast_to(ws, (co,)), 0, 0)))
    oh = -(-h // s) if pad == "SAME" else (h - k) // s + 1
    ow = -(-w // s) if pad == "SAME" else (w - k) // s + 1
    sy, zy = float(rng.uniform(0.05, 0.3)), int(rng.integers(-20, 20))
    y = mb.tensor("y", [n, oh, ow, co], I8, quant=(sy, zy))
    opts = dict(padding=pad, stride_w=s, stride_h=s, fused_activation_function=act)
    if op == "DEPTHWISE_CONV_2D":
        opts["depth_multiplier"] = cm
    mb.op(op, ins, [y], **opts)
    mb.output(y)
    _exact(gpu, mb.finish(), [_qin(rng, shape)], "INT8_" + op)


@pytest.mark.parametrize("per_ch,rows,co", [(False, 3, 20), (True, 3, 20), (True, 520, 64)])
def test_fully_connected_bit_exact(gpu, per_ch, rows, co):
    """(520 rows x 64: the implicit-GEMM kernel)"""
    rng = np.random.default_rng(11 + per_ch + rows)
    mb = ModelBuilder()
    sx, zx = _q(rng)
    x = mb.input("x", [rows, 40], I8, quant=(sx, zx))
    ws = rng.uniform(0.002, 0.02, co if per_ch else 1).astype(np.float32)
    w = mb.const("w", rng.integers(-127, 128, (co, 40)).astype(np.int8), quant=(ws, 0, 0))
    b = mb.const("b", rng.integers(-4000, 4000, co).astype(np.int32), quant=(np.float32(sx) * ws, 0, 0))
    y = mb.tensor("y", [rows, co], I8, quant=(float(rng.uniform(0.05, 0.3)), int(rng.integers(-20, 20))))
    mb.op("FULLY_CONNECTED", [x, w, b], [y], fused_activation_function="RELU")
    mb.output(y)
    _exact(gpu, mb.finish(), [_qin(rng, (rows, 40))], "INT8_FULLY_CONNECTED")


@pytest.mark.parametrize("op,bshape,act", [("ADD", (1, 5, 5, 8), "NONE"), ("ADD", (8,), "RELU6"),
                                           ("ADD", (1, 1, 5, 8), "NONE"), ("MUL", (1, 5, 5, 8), "NONE"),
                                           ("MUL", (8,), "RELU6"), ("MUL", (1, 1, 1, 8), "RELU")])
def test_add_mul_bit_exact(gpu, op, bshape, act):
    """int8 ADD / MUL, b of the output's shape or along its trailing dims (a squeeze-and-excitation's channel
    scale: [C]), LiteRT's bits."""
    rng = np.random.default_rng(len(bshape) * 7 + len(act))
    mb = ModelBuilder()
    a = mb.input("a", [1, 5, 5, 8], I8, quant=_q(rng))
    b = mb.input("b", list(bshape), I8, quant=_q(rng))
    lo, hi = (0.05, 0.2) if op == "ADD" else (0.001, 0.01)
    y = mb.tensor("y", [1, 5, 5, 8], I8, quant=(float(rng.uniform(lo, hi)), int(rng.integers(-20, 20))))
    mb.op(op, [a, b], [y], fused_activation_function=act)
    mb.output(y)
    _exact(gpu, mb.finish(), [_qin(rng, (1, 5, 5, 8)), _qin(rng, bshape)], "INT8_" + op)


@pytest.mark.parametrize("axes,keep", [([1, 2], False), ([2], True), ([-1], False)])
def test_mean_bit_exact(gpu, axes, keep):
    rng = np.random.default_rng(len(axes) + 3 * keep)
    mb = ModelBuilder()
    shape = [2, 7, 6, 12]
    x = mb.input("x", shape, I8, quant=_q(rng))
    ax = mb.const("ax", np.array(axes, np.int32))
    red = [d % 4 for d in axes]
    oshape = [1 if i in red else d for i, d in enumerate(shape)] if keep else \
        [d for i, d in enumerate(shape) if i not in red]
    y = mb.tensor("y", oshape, I8, quant=_q(rng))
    mb.op("MEAN", [x, ax], [y], keep_dims=keep)
    mb.output(y)
    _exact(gpu, mb.finish(), [_qin(rng, shape)], "INT8_MEAN")


@pytest.mark.parametrize("shape,axes", [([2, 5, 6, 37], [1, 2]), ([1, 3, 3, 16], [2, 1]), ([1, 4, 2, 5], [1, 2])])
def test_mean_keep_dims_hw_bit_exact(gpu, shape, axes):
    """keep_dims over axes [1, 2] of a 4-D input: LiteRT's optimized Mean (blocks of 16 channels round
    differently from the rest); one input per zero point / scale case, equal grids included."""
    rng = np.random.default_rng(shape[3])
    for same in (False, True):
        mb = ModelBuilder()
        qx = _q(rng)
        x = mb.input("x", shape, I8, quant=qx)
        ax = mb.const("ax", np.array(axes, np.int32))
        y = mb.tensor("y", [shape[0], 1, 1, shape[3]], I8, quant=qx if same else _q(rng))
        mb.op("MEAN", [x, ax], [y], keep_dims=True)
        mb.output(y)
        _exact(gpu, mb.finish(), [_qin(rng, shape)], "INT8_MEAN")


@pytest.mark.parametrize("beta", [1.0, 0.7])
def test_softmax_bit_exact(gpu, beta):
    rng = np.random.default_rng(int(beta * 10))
    mb = ModelBuilder()
    x = mb.input("x", [3, 37], I8, quant=_q(rng))
    y = mb.tensor("y", [3, 37], I8, quant=(1.0 / 256, -128))
    mb.op("SOFTMAX", [x], [y], beta=beta)
    mb.output(y)
    _exact(gpu, mb.finish(), [_qin(rng, (3, 37))], "INT8_SOFTMAX")


def test_quantize_dequantize_edges_stay_int8(gpu):
    """float in -> QUANTIZE -> int8 conv -> DEQUANTIZE -> float out: the conv runs in int8, and QUANTIZE
    (round half to even of v * (1/scale)) and DEQUANTIZE (q * scale - zp * scale) give LiteRT's bits."""
    rng = np.random.default_rng(5)
    mb = ModelBuilder()
    xf = mb.input("xf", [1, 6, 6, 4], "float32")
    xq = mb.tensor("xq", [1, 6, 6, 4], I8, quant=(0.02, 1))
    mb.op("QUANTIZE", [xf], [xq])
    ws = rng.uniform(0.002, 0.02, 8).astype(np.float32)
    w = mb.const("w", rng.integers(-127, 128, (8, 1, 1, 4)).astype(np.int8), quant=(ws, 0, 0))
    yq = mb.tensor("yq", [1, 6, 6, 8], I8, quant=(0.05, -4))
    b = mb.const("b", rng.integers(-500, 500, 8).astype(np.int32), quant=(np.float32(0.02) * ws, 0, 0))
    mb.op("CONV_2D", [xq, w, b], [yq], padding="SAME", stride_w=1, stride_h=1, fused_activation_function="NONE")
    yf = mb.tensor("yf", [1, 6, 6, 8], "float32")
    mb.op("DEQUANTIZE", [yq], [yf])
    mb.output(yf)
    model = mb.finish()
    assert "INT8_CONV_2D" in _ops(model)
    x = rng.uniform(-2, 2, (1, 6, 6, 4)).astype(np.float32)
    x.reshape(-1)[::2] = ((rng.integers(-90, 90, x.size // 2) + 0.5) * np.float32(0.02)).astype(np.float32)  # ties
    np.testing.assert_array_equal(gpu.run(model, [x])[0], run_litert(model, [x])[0])


def _conv_then(op, out_shape, out_q, second=None, side=False, **options):
    """A 1x1 CONV_2D of an int8 input x, then `op` over (its output h, x), or (h, the constant `second`) (side: and
    helpers/float_view.py's op of x as a second output): the model and its input."""
    rng = np.random.default_rng(9)
    mb = ModelBuilder()
    x = mb.input("x", [1, 6, 6, 4], I8, quant=(0.05, -1))
    ws = rng.uniform(0.002, 0.02, 4).astype(np.float32)
    w = mb.const("w", rng.integers(-127, 128, (4, 1, 1, 4)).astype(np.int8), quant=(ws, 0, 0))
    h = mb.tensor("h", [1, 6, 6, 4], I8, quant=(0.05, -1))
    b = mb.const("b", rng.integers(-500, 500, 4).astype(np.int32), quant=(np.float32(0.05) * ws, 0, 0))
    mb.op("CONV_2D", [x, w, b], [h], padding="SAME", stride_w=1, stride_h=1, fused_activation_function="NONE")
    y = mb.tensor("y", out_shape, I8, quant=out_q)
    mb.op(op, [h, x if second is None else mb.const("second", second)], [y], **options)
    mb.output(y)
    if side:
        keep_float_view(mb, x, [1, 6, 6, 4])
    return mb.finish(), _qin(rng, (1, 6, 6, 4))


def test_op_without_int8_kernel_falls_back_to_float_view(gpu):
    """A quantized model with an op lacking an int8 kernel (helpers/float_view.py's, beside an int8 1x1 conv and
    ADD) compiles and runs as a float program with simulated quantization, within one quantization step of
    LiteRT."""
    model, xin = _conv_then("ADD", [1, 6, 6, 4], (0.07, 2), side=True, fused_activation_function="NONE")
    ops = _ops(model)
    assert not any(o.startswith("INT8_") for o in ops)
    d = np.abs(gpu.run(model, [xin])[0].astype(int) - run_litert(model, [xin])[0].astype(int))
    assert d.max() <= 1


def test_concatenation_of_int8_activations_moves_bytes(gpu):
    """CONCATENATION of int8 activations on the output's grid (LiteRT's int8 kernel requires it) is native:
    the whole model stays int8, LiteRT's bits."""
    model, xin = _conv_then("CONCATENATION", [1, 6, 6, 8], (0.05, -1), axis=3, fused_activation_function="NONE")
    assert {"INT8_CONV_2D", "INT8_CONCATENATION"} <= set(_ops(model))
    _exact(gpu, model, [xin], "INT8_CONCATENATION")


@pytest.mark.parametrize("op,k,s,pad,act", [("AVERAGE_POOL_2D", 3, 2, "SAME", "NONE"),
                                            ("AVERAGE_POOL_2D", 2, 2, "VALID", "RELU6"),
                                            ("MAX_POOL_2D", 3, 2, "SAME", "RELU")])
def test_pool_bit_exact(gpu, op, k, s, pad, act):
    rng = np.random.default_rng(k * 10 + s + len(act))
    mb = ModelBuilder()
    q = (float(rng.uniform(0.02, 0.1)), int(rng.integers(-30, 30)))
    x = mb.input("x", [2, 9, 8, 5], I8, quant=q)
    oh, ow = (-(-9 // s), -(-8 // s)) if pad == "SAME" else ((9 - k) // s + 1, (8 - k) // s + 1)
    y = mb.tensor("y", [2, oh, ow, 5], I8, quant=q)
    mb.op(op, [x], [y], padding=pad, stride_w=s, stride_h=s, filter_width=k, filter_height=k,
          fused_activation_function=act)
    mb.output(y)
    _exact(gpu, mb.finish(), [_qin(rng, (2, 9, 8, 5))], "INT8_" + op)


@pytest.mark.parametrize("case", [0, 5], ids=["flat", "tiled"])
@pytest.mark.parametrize("mode", ["off", "force"])
def test_conv_dot_product_variant_and_plain_kernel_agree(gpu, monkeypatch, mode, case):
    """The `int_dot` variant (packed OpSDot, VK_KHR_shader_integer_dot_product) and the plain int32 word
    loop give LiteRT's bits; "force" fails on a device without the extension, naming it."""
    int_dot_mode(gpu, monkeypatch, mode)
    test_conv_bit_exact(gpu, CONV_CASES[case])


def test_reshape_between_int8_ops_is_a_view(gpu):
    """conv -> RESHAPE -> FULLY_CONNECTED: the reshape of an int8 tensor is a view (its bytes as they are)."""
    rng = np.random.default_rng(21)
    mb = ModelBuilder()
    x = mb.input("x", [1, 4, 4, 8], I8, quant=(0.05, 3))
    ws = rng.uniform(0.002, 0.02, 8).astype(np.float32)
    w = mb.const("w", rng.integers(-127, 128, (8, 1, 1, 8)).astype(np.int8), quant=(ws, 0, 0))
    b = mb.const("b", rng.integers(-3000, 3000, 8).astype(np.int32), quant=(np.float32(0.05) * ws, 0, 0))
    h = mb.tensor("h", [1, 4, 4, 8], I8, quant=(0.1, -3))
    mb.op("CONV_2D", [x, w, b], [h], padding="SAME", stride_w=1, stride_h=1, fused_activation_function="RELU")
    r = mb.tensor("r", [1, 128], I8, quant=(0.1, -3))
    mb.op("RESHAPE", [h, mb.const("shape", np.array([1, 128], np.int32))], [r])
    fw = mb.const("fw", rng.integers(-127, 128, (10, 128)).astype(np.int8), quant=(np.float32(0.01), 0))
    y = mb.tensor("y", [1, 10], I8, quant=(0.2, 0))
    mb.op("FULLY_CONNECTED", [r, fw], [y], fused_activation_function="NONE")
    mb.output(y)
    model = mb.finish()
    assert "INT8_CONV_2D" in _ops(model)
    _exact(gpu, model, [_qin(rng, (1, 4, 4, 8))], "INT8_FULLY_CONNECTED")


def test_transpose_and_pads_move_int8_bytes(gpu):
    """TRANSPOSE NCHW -> NHWC, PAD (pads with the output zero point) -> conv, PADV2 (its constant's raw
    value, -128: folded into the pool) -> MAX_POOL, as a quantized resnet's stem: all int8 (INT8_TRANSPOSE,
    INT8_PAD), LiteRT's bits."""
    rng = np.random.default_rng(23)
    mb = ModelBuilder()
    q = (0.04, -7)
    x = mb.input("x", [2, 4, 5, 6], I8, quant=q)
    t = mb.tensor("t", [2, 5, 6, 4], I8, quant=q)
    mb.op("TRANSPOSE", [x, mb.const("perm", np.array([0, 2, 3, 1], np.int32))], [t])
    p = mb.tensor("p", [2, 7, 8, 4], I8, quant=q)
    mb.op("PAD", [t, mb.const("pads", np.array([[0, 0], [1, 1], [1, 1], [0, 0]], np.int32))], [p])
    ws = rng.uniform(0.002, 0.02, 8).astype(np.float32)
    w = mb.const("w", rng.integers(-127, 128, (8, 3, 3, 4)).astype(np.int8), quant=(ws, 0, 0))
    b = mb.const("b", rng.integers(-3000, 3000, 8).astype(np.int32), quant=(np.float32(q[0]) * ws, 0, 0))
    qh = (0.05, 11)
    h = mb.tensor("h", [2, 5, 6, 8], I8, quant=qh)
    mb.op("CONV_2D", [p, w, b], [h], padding="VALID", stride_w=1, stride_h=1, fused_activation_function="NONE")
    p2 = mb.tensor("p2", [2, 7, 8, 8], I8, quant=qh)
    cv = mb.const("cv", np.array([-128], np.int8), quant=(np.float32(qh[0]), qh[1]))
    mb.op("PADV2", [h, mb.const("pads2", np.array([[0, 0], [1, 1], [1, 1], [0, 0]], np.int32)), cv], [p2])
    y = mb.tensor("y", [2, 3, 3, 8], I8, quant=qh)
    mb.op("MAX_POOL_2D", [p2], [y], padding="VALID", stride_w=2, stride_h=2, filter_width=3, filter_height=3,
          fused_activation_function="NONE")
    mb.output(y)
    mb.output(p)
    model = mb.finish()
    ops = _ops(model)
    assert {"INT8_TRANSPOSE", "INT8_PAD", "INT8_CONV_2D", "INT8_MAX_POOL_2D"} <= set(ops), ops
    assert ops.count("INT8_PAD") == 1, ops        # (the -128 PADV2 folds into the max pool; PAD is an output)
    _exact(gpu, model, [_qin(rng, (2, 4, 5, 6))], "INT8_PAD")


def test_tiled_coopmat_variant_is_valid_spirv_and_gated(gpu, monkeypatch):
    """The tiled kernel's s8 x s8 -> s32 cooperative-matrix form (coopmat_int8) is valid SPIR-V and is
    offered with its requirement; a device with int8 cooperative matrices runs it bit-exact, any other
    reports the missing capability (lavapipe: no cooperative matrices)."""
    from gpuc.compiler.codegen import glsl
    from gpuc.compiler.codegen.glslang import spirv_val
    from gpuc.compiler.codegen.variants import all_variants
    from gpuc.compiler.ops import int8_conv
    from gpuc.runtime.capabilities import missing
    cm = [k for t, k, _ in all_variants() if t == "int8_conv_tiled" and k.defines.get("COOPMAT")]
    assert cm
    for t, k, dt in all_variants():
        if t == "int8_conv_tiled":
            spirv_val(glsl.kernel_spirv(k, dt))
    req = int8_conv.COOPMAT_VARIANT.requires
    assert req["cooperative_matrix"][3:] == ["sint8", "sint8", "sint32", "sint32"]
    why = missing(req, gpu.device)
    if why is not None:
        assert "cooperative" in why or "subgroup" in why, why
        return
    monkeypatch.setenv("GPUC_VARIANTS", "coopmat_int8=force")
    test_conv_bit_exact(gpu, CONV_CASES[5])


def test_tiled_coopmat_form_emulated_bit_exact(gpu, monkeypatch, compile_options):
    """coopmat_int8's staging (16-word K steps as 8-word slices, two register sets), subgroup tiling and
    epilogue with its products by scalar DOT4 (EMU) are bit-exact on any device: partial tiles, an RGB stem,
    an odd and an even number of K steps, a fused residual ADD."""
    compile_options(int8_emulate=True)
    monkeypatch.setenv("GPUC_VARIANTS", "off,coopmat_int8_emu=force")
    for case in (CONV_CASES[2], CONV_CASES[5], CONV_CASES[7]):
        test_conv_bit_exact(gpu, case)
    test_residual_add_fuses_into_tiled_conv_bit_exact(gpu, "later_conv")


def test_activation_bound_overflowing_int32_is_refused_as_litert_does():
    """A RELU6 output scale so small that 6 / scale exceeds int32 (a collapsed calibration): LiteRT fails
    the model at prepare; gpuc refuses it with an error naming the tensor."""
    import gpuc
    from gpuc.errors import GpucError
    rng = np.random.default_rng(5)
    mb = ModelBuilder()
    x = mb.input("x", [1, 4, 4, 4], I8, quant=(0.05, 0))
    ws = np.full(4, 0.01, np.float32)
    w = mb.const("w", rng.integers(-127, 128, (4, 1, 1, 4)).astype(np.int8), quant=(ws, 0, 0))
    b = mb.const("b", np.zeros(4, np.int32), quant=(np.float32(0.05) * ws, 0, 0))
    y = mb.tensor("tiny", [1, 4, 4, 4], I8, quant=(1e-10, -128))
    mb.op("CONV_2D", [x, w, b], [y], padding="SAME", stride_w=1, stride_h=1, fused_activation_function="RELU6")
    mb.output(y)
    model = mb.finish()
    with pytest.raises(Exception):
        run_litert(model, [_qin(rng, (1, 4, 4, 4))])
    with pytest.raises(GpucError, match="tiny"):
        gpuc.compile(model)


@pytest.mark.parametrize("op", ["CONV_2D", "DEPTHWISE_CONV_2D", "RGB"])
def test_zero_point_pad_folds_into_int8_conv(gpu, op):
    """PAD (H and W, the zero point) -> conv: the pad becomes the conv's padding (no INT8_PAD left); an
    RGB stem's (input channels widened to 4 after the fold: one INT8_PAD, of the channels)."""
    if op == "RGB":
        rng = np.random.default_rng(33)
        mb = ModelBuilder()
        q = (0.03, 9)
        x = mb.input("x", [2, 32, 32, 3], I8, quant=q)
        p = mb.tensor("p", [2, 35, 35, 3], I8, quant=q)
        mb.op("PAD", [x, mb.const("pads", np.array([[0, 0], [1, 2], [2, 1], [0, 0]], np.int32))], [p])
        ws = rng.uniform(0.002, 0.02, 16).astype(np.float32)
        w = mb.const("w", rng.integers(-127, 128, (16, 3, 3, 3)).astype(np.int8), quant=(ws, 0, 0))
        b = mb.const("b", rng.integers(-3000, 3000, 16).astype(np.int32), quant=(np.float32(q[0]) * ws, 0, 0))
        y = mb.tensor("y", [2, 33, 33, 16], I8, quant=(0.06, -4))
        mb.op("CONV_2D", [p, w, b], [y], padding="VALID", stride_w=1, stride_h=1, fused_activation_function="RELU")
        mb.output(y)
        model = mb.finish()
        assert _ops(model).count("INT8_PAD") == 1
        _exact(gpu, model, [_qin(rng, (2, 32, 32, 3))], "INT8_CONV_2D")
        return
    rng = np.random.default_rng(31)
    mb = ModelBuilder()
    q = (0.03, 9)
    x = mb.input("x", [1, 6, 7, 8], I8, quant=q)
    p = mb.tensor("p", [1, 9, 8, 8], I8, quant=q)
    mb.op("PAD", [x, mb.const("pads", np.array([[0, 0], [1, 2], [0, 1], [0, 0]], np.int32))], [p])
    dw = op == "DEPTHWISE_CONV_2D"
    ws = rng.uniform(0.002, 0.02, 8).astype(np.float32)
    w = mb.const("w", rng.integers(-127, 128, (1, 3, 3, 8) if dw else (8, 3, 3, 8)).astype(np.int8),
                 quant=(ws, 0, 3 if dw else 0))
    b = mb.const("b", rng.integers(-3000, 3000, 8).astype(np.int32), quant=(np.float32(q[0]) * ws, 0, 0))
    y = mb.tensor("y", [1, 4, 3, 8], I8, quant=(0.06, -4))
    opts = dict(padding="VALID", stride_w=2, stride_h=2, fused_activation_function="NONE")
    if dw:
        opts["depth_multiplier"] = 1
    mb.op(op, [p, w, b], [y], **opts)
    mb.output(y)
    model = mb.finish()
    assert "INT8_PAD" not in _ops(model)
    _exact(gpu, model, [_qin(rng, (1, 6, 7, 8))], "INT8_" + op)


def _conv(mb, rng, x, shape, co, k, act, name):
    n, h, w, ci = shape
    ws = rng.uniform(0.002, 0.02, co).astype(np.float32)
    wt = mb.const(f"{name}_w", rng.integers(-127, 128, (co, k, k, ci)).astype(np.int8), quant=(ws, 0, 0))
    b = mb.const(f"{name}_b", rng.integers(-4000, 4000, co).astype(np.int32), quant=(np.float32(0.05) * ws, 0, 0))
    y = mb.tensor(name, [n, h, w, co], I8, quant=(float(rng.uniform(0.05, 0.3)), int(rng.integers(-20, 20))))
    mb.op("CONV_2D", [x, wt, b], [y], padding="SAME", stride_w=1, stride_h=1, fused_activation_function=act)
    return y


@pytest.mark.parametrize("case", ["input", "later_conv", "conv_is_output"])
def test_residual_add_fuses_into_tiled_conv_bit_exact(gpu, case):
    """An int8 ADD of a tiled conv's output and a residual ready before it folds into the conv's epilogue
    (ops/int8_conv.py _fuse_residual_adds: no INT8_ADD dispatch), bit-exact with LiteRT's conv then ADD; it
    stays a separate ADD where the conv's output is also a model output."""
    rng = np.random.default_rng({"input": 5, "later_conv": 6, "conv_is_output": 7}[case])
    shape = (2, 16, 17, 8)
    mb = ModelBuilder()
    x = mb.input("x", list(shape), I8, quant=(0.05, 3))
    c1 = _conv(mb, rng, x, shape, 64, 3, "RELU", "c1")
    if case == "later_conv":
        r = _conv(mb, rng, x, shape, 64, 1, "NONE", "c2")       # (made after c1: the ADD folds into c2)
        a, b = c1, r
    else:
        r = mb.input("r", [*shape[:3], 64], I8, quant=(0.08, -7))
        a, b = r, c1
    y = mb.tensor("y", [*shape[:3], 64], I8, quant=(0.11, -4))
    mb.op("ADD", [a, b], [y], fused_activation_function="RELU")
    mb.output(y)
    if case == "conv_is_output":
        mb.output(c1)
    model = mb.finish()
    ops = _ops(model)
    assert ("INT8_ADD" in ops) == (case == "conv_is_output"), ops
    ins = [_qin(rng, shape)] + ([] if case == "later_conv" else [_qin(rng, (*shape[:3], 64))])
    ref = run_litert(model, ins)
    out = gpu.run(model, ins)
    for o, r_ in zip(out, ref):
        assert o.shape == r_.shape and o.dtype == np.int8
        bad = np.flatnonzero(o.reshape(-1) != r_.reshape(-1))
        assert bad.size == 0, f"{bad.size} of {r_.size} differ"


@pytest.mark.parametrize("plan", ["coopmat_int8_128x128", "coopmat_int8_128x64", "coopmat_int8_64x128",
                                  "coopmat_int8_64x64", "coopmat_int8_32x64"])
def test_big_tile_coopmat_plans_stage_and_finish_bit_exact(gpu, monkeypatch, compile_options, plan):
    """The big-tile cooperative-matrix plans (shaders/int8_conv_cm.comp, `measured` candidates) with their
    products done by scalar DOT4 (EMU): the double-buffered staging, the tile and fragment indexing and the
    per-subgroup epilogue are bit-exact on any device (partial tiles, strides, word and 16-byte staging, a fused
    residual ADD, a fully connected layer the flat kernel takes otherwise); their
    cooperative-matrix form is valid SPIR-V, gated on int8 cooperative matrices."""
    from gpuc.compiler.codegen import glsl
    from gpuc.compiler.codegen.glslang import spirv_val
    from gpuc.compiler.codegen.variants import all_variants
    from gpuc.compiler.ops import int8_conv
    for t, k, dt in all_variants():
        if t == "int8_conv_cm":
            spirv_val(glsl.kernel_spirv(k, dt))
    big = int8_conv.cm_variants(65536, 256, 4)
    assert len(big) == len(int8_conv.CM_PLANS) and all(v.measured for v in big)
    assert [v.name for v in int8_conv.cm_variants(2048, 256, 4)] == ["coopmat_int8_64x64", "coopmat_int8_32x64"]
    assert all(int8_conv.cm_smem(p) <= int8_conv.CM_PORTABLE_SMEM for p in int8_conv.CM_PLANS.values())
    assert not any("shared_memory" in v.requires for v in big)   # (the residual tables reuse the staging)
    compile_options(int8_emulate=True)                       # (tiny layers: every plan offered, EMU forms)
    monkeypatch.setenv("GPUC_VARIANTS", f"off,{plan}_emu=force")
    test_conv_bit_exact(gpu, CONV_CASES[7])         # (2, 33, 31, 8) -> 72 channels, 3x3 stride 2: partial tiles
    test_conv_bit_exact(gpu, ("CONV_2D", (2, 13, 11, 32), 72, 3, 2, "SAME", "RELU", True, True))   # 16-byte staging (V4)
    test_residual_add_fuses_into_tiled_conv_bit_exact(gpu, "later_conv")
    test_fully_connected_bit_exact(gpu, True, 40, 64)   # (the flat kernel's layer: the plans are its candidates too)


@pytest.mark.parametrize("rows", [1, 37])
def test_split_k_fully_connected_candidate_bit_exact(gpu, monkeypatch, compile_options, rows):
    """shaders/int8_fc_splitk.comp (K split over a workgroup, a `measured` candidate of the flat kernel's
    plain-GEMM layers) is bit-exact with LiteRT: one pixel, and blocks of 8 with a partial one."""
    compile_options(int8_measured=False)                    # (the plans first choices)
    monkeypatch.setenv("GPUC_VARIANTS", "off,int8_splitk=force")
    test_fully_connected_bit_exact(gpu, True, rows, 64)


def test_concatenation_across_int8_grids_is_refused_as_litert_does():
    """LiteRT's int8 CONCATENATION refuses an input on another scale or zero point than its output; so does
    gpuc, naming the op and the input."""
    mb = ModelBuilder()
    x = mb.input("x", [1, 4], I8, quant=(0.05, 3))
    k = mb.const("k", np.array([[1, 2]], np.int8), quant=(0.07, 3))
    y = mb.tensor("y", [1, 6], I8, quant=(0.05, 3))
    mb.op("CONCATENATION", [x, k], [y], axis=1, fused_activation_function="NONE")
    mb.output(y)
    model = mb.finish()
    with pytest.raises(Exception):
        run_litert(model, [np.zeros((1, 4), np.int8)])
    with pytest.raises(UnsupportedError, match=r"CONCATENATION \(operator #0\): int8 input 'k' .* another grid"):
        gpuc.compile(model, cache=False)


def test_concatenation_with_an_int8_constant_moves_bytes(gpu):
    """A constant int8 input on the output's grid is concatenated as its bytes (not dequantized), after a max
    pool (a model of data movement only keeps the float program: native int8 needs an int8 kernel)."""
    rng = np.random.default_rng(4)
    mb = ModelBuilder()
    x = mb.input("x", [1, 4, 4, 3], I8, quant=(0.05, 3))
    p = mb.tensor("p", [1, 4, 4, 3], I8, quant=(0.05, 3))
    mb.op("MAX_POOL_2D", [x], [p], padding="SAME", stride_w=1, stride_h=1, filter_width=2, filter_height=2)
    k = mb.const("k", rng.integers(-128, 128, (1, 2, 4, 3)).astype(np.int8), quant=(0.05, 3))
    y = mb.tensor("y", [1, 6, 4, 3], I8, quant=(0.05, 3))
    mb.op("CONCATENATION", [k, p], [y], axis=1, fused_activation_function="NONE")
    mb.output(y)
    _exact(gpu, mb.finish(), [_qin(rng, (1, 4, 4, 3))], "INT8_CONCATENATION")


@pytest.mark.parametrize("op", ["RELU", "RELU6", "RELU_N1_TO_1"])
@pytest.mark.parametrize("ratio", [0.37, 0.5, 0.73, 1.0, 2.9])
def test_relu_requantizes_bit_exact(gpu, op, ratio):
    """A standalone int8 RELU / RELU6 / RELU_N1_TO_1 onto another grid (input scale / output scale below 1,
    1 and above 1: a right shift, none, a left shift), LiteRT's bits; every input value, twice over."""
    rng = np.random.default_rng(int(ratio * 100) + len(op))
    si, zi = float(rng.uniform(0.01, 0.08)), int(rng.integers(-30, 30))
    mb = ModelBuilder()
    x = mb.input("x", [2, 256], I8, quant=(si, zi))
    y = mb.tensor("y", [2, 256], I8, quant=(si / ratio, int(rng.integers(-20, 20))))
    mb.op(op, [x], [y])
    mb.output(y)
    xin = np.tile(np.arange(-128, 128, dtype=np.int8), (2, 1))
    _exact(gpu, mb.finish(), [xin], "INT8_" + op)


@pytest.mark.parametrize("op", ["LOGISTIC", "TANH"])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_table_activations_bit_exact(gpu, op, seed):
    """int8 LOGISTIC / TANH through LiteRT's lookup table, every input value, on LiteRT's fixed output grids."""
    rng = np.random.default_rng(seed)
    mb = ModelBuilder()
    x = mb.input("x", [1, 256], I8, quant=(float(rng.uniform(0.005, 0.1)), int(rng.integers(-40, 40))))
    y = mb.tensor("y", [1, 256], I8, quant=(1 / 256, -128) if op == "LOGISTIC" else (1 / 128, 0))
    mb.op(op, [x], [y])
    mb.output(y)
    _exact(gpu, mb.finish(), [np.arange(-128, 128, dtype=np.int8)[None]], "INT8_" + op)


@pytest.mark.parametrize("seed,big", [(1, False), (2, False), (3, True), (4, True)])
def test_exp_bit_exact(gpu, seed, big):
    """int8 EXP ("INT8_EXP") through LiteRT's lookup table, every input value, any output grid; big: input scales
    whose exp overflows the output's int8 range (and float32), saturating as LiteRT's table does."""
    rng = np.random.default_rng(seed)
    mb = ModelBuilder()
    si = float(rng.uniform(0.05, 0.8) if big else rng.uniform(0.005, 0.05))
    x = mb.input("x", [1, 256], I8, quant=(si, int(rng.integers(-40, 40))))
    y = mb.tensor("y", [1, 256], I8, quant=(float(rng.uniform(0.005, 0.5)), int(rng.integers(-128, 0))))
    mb.op("EXP", [x], [y])
    mb.output(y)
    _exact(gpu, mb.finish(), [np.arange(-128, 128, dtype=np.int8)[None]], "INT8_EXP")


@pytest.mark.parametrize("swap", [False, True])
def test_sub_bit_exact(gpu, swap):
    """int8 SUB, the broadcast operand second or first (the form then subtracts the other way), LiteRT's bits."""
    rng = np.random.default_rng(21 + swap)
    mb = ModelBuilder()
    a = mb.input("a", [2, 5, 6, 8], I8, quant=_q(rng))
    b = mb.input("b", [8], I8, quant=_q(rng))
    y = mb.tensor("y", [2, 5, 6, 8], I8, quant=_q(rng))
    mb.op("SUB", [b, a] if swap else [a, b], [y], fused_activation_function="RELU6" if swap else "NONE")
    mb.output(y)
    _exact(gpu, mb.finish(), [_qin(rng, (2, 5, 6, 8)), _qin(rng, (8,))], "INT8_SUB")


@pytest.mark.parametrize("alpha", [0.1, 0.2, 0.37])
def test_leaky_relu_bit_exact(gpu, alpha):
    """int8 LEAKY_RELU onto another grid, every input value, LiteRT's bits."""
    rng = np.random.default_rng(int(alpha * 100))
    mb = ModelBuilder()
    x = mb.input("x", [1, 256], I8, quant=_q(rng))
    y = mb.tensor("y", [1, 256], I8, quant=_q(rng))
    mb.op("LEAKY_RELU", [x], [y], alpha=alpha)
    mb.output(y)
    _exact(gpu, mb.finish(), [np.arange(-128, 128, dtype=np.int8)[None]], "INT8_LEAKY_RELU")


@pytest.mark.parametrize("op", ["ADD", "MUL", "SUB"])
def test_binary_with_an_int8_constant_bit_exact(gpu, op):
    """ADD / MUL / SUB of an activation and a quantized int8 constant (its own grid), the constant read as its
    bytes, LiteRT's bits."""
    rng = np.random.default_rng(len(op))
    mb = ModelBuilder()
    a = mb.input("a", [2, 5, 6, 8], I8, quant=_q(rng))
    k = mb.const("k", _qin(rng, (8,)), quant=_q(rng))
    y = mb.tensor("y", [2, 5, 6, 8], I8, quant=_q(rng))
    mb.op(op, [k, a] if op == "SUB" else [a, k], [y], fused_activation_function="NONE")
    mb.output(y)
    _exact(gpu, mb.finish(), [_qin(rng, (2, 5, 6, 8))], "INT8_" + op)


@pytest.mark.parametrize("op,ashape,bshape", [("ADD", (3, 10, 5, 5), (3, 1, 5, 5)), ("MUL", (1, 6, 6, 5), (1, 1, 6, 1)),
                                              ("SUB", (3, 1), (3, 13)), ("MUL", (2, 1, 4), (1, 3, 1))])
def test_binary_general_broadcast_bit_exact(gpu, op, ashape, bshape):
    """ADD / MUL / SUB under numpy broadcasting beyond a trailing-dims operand (both inputs broadcast in the
    last case), LiteRT's bits."""
    rng = np.random.default_rng(len(ashape) + len(bshape) + len(op))
    out = list(np.broadcast_shapes(ashape, bshape))
    mb = ModelBuilder()
    a = mb.input("a", list(ashape), I8, quant=_q(rng))
    b = mb.input("b", list(bshape), I8, quant=_q(rng))
    y = mb.tensor("y", out, I8, quant=_q(rng))
    mb.op(op, [a, b], [y], fused_activation_function="RELU")
    mb.output(y)
    _exact(gpu, mb.finish(), [_qin(rng, ashape), _qin(rng, bshape)], "INT8_" + op)


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_hard_swish_bit_exact(gpu, seed):
    """int8 HARD_SWISH (LiteRT's 16-bit fixed-point kernel, evaluated into a table), every input value."""
    rng = np.random.default_rng(seed)
    mb = ModelBuilder()
    x = mb.input("x", [1, 256], I8, quant=(float(rng.uniform(0.01, 0.1)), int(rng.integers(-40, 40))))
    y = mb.tensor("y", [1, 256], I8, quant=(float(rng.uniform(0.01, 0.1)), int(rng.integers(-40, 40))))
    mb.op("HARD_SWISH", [x], [y])
    mb.output(y)
    _exact(gpu, mb.finish(), [np.arange(-128, 128, dtype=np.int8)[None]], "INT8_HARD_SWISH")


def _i32(v):
    return np.array(v, np.int32)


# (op, input shape, constant operands before / after the data input, options, output shapes)
BYTE_MOVE_CASES = [
    ("SLICE", [1, 4, 4, 3], [], [_i32([0, 1, 0, 0]), _i32([1, 2, 3, 3])], {}, [[1, 2, 3, 3]]),
    ("STRIDED_SLICE", [1, 4, 4, 3], [], [_i32([0, 0, 1, 0]), _i32([1, 4, 4, 3]), _i32([1, 2, 1, 1])],
     dict(begin_mask=0, end_mask=0, ellipsis_mask=0, new_axis_mask=0, shrink_axis_mask=0), [[1, 2, 3, 3]]),
    ("GATHER", [1, 4, 4, 3], [], [_i32([2, 0])], dict(axis=3, batch_dims=0), [[1, 4, 4, 2]]),
    ("GATHER", [1, 4, 4, 3], [], [np.array([3, 1, 1], np.int64)], dict(axis=1, batch_dims=0), [[1, 3, 4, 3]]),
    ("GATHER_ND", [1, 4, 4, 3], [], [_i32([[0, 1], [0, 3]])], {}, [[2, 4, 3]]),
    ("SPACE_TO_DEPTH", [1, 4, 4, 3], [], [], dict(block_size=2), [[1, 2, 2, 12]]),
    ("DEPTH_TO_SPACE", [1, 4, 4, 8], [], [], dict(block_size=2), [[1, 8, 8, 2]]),
    ("TILE", [1, 4, 4, 3], [], [_i32([1, 2, 1, 1])], {}, [[1, 8, 4, 3]]),
    ("SPLIT", [1, 4, 4, 3], [_i32(3)], [], dict(num_splits=3), [[1, 4, 4, 1]] * 3),
    ("SPLIT_V", [1, 4, 4, 3], [], [_i32([1, 2]), _i32(3)], dict(num_splits=2), [[1, 4, 4, 1], [1, 4, 4, 2]]),
    ("UNPACK", [1, 4, 4, 3], [], [], dict(num=4, axis=1), [[1, 4, 3]] * 4),
    ("MIRROR_PAD", [1, 4, 4, 3], [], [_i32([[0, 0], [1, 1], [1, 1], [0, 0]])], dict(mode="REFLECT"), [[1, 6, 6, 3]]),
    ("REVERSE_V2", [1, 4, 4, 3], [], [_i32([1])], {}, [[1, 4, 4, 3]]),
    ("SPACE_TO_BATCH_ND", [1, 4, 4, 3], [], [_i32([2, 2]), _i32([[0, 0], [0, 0]])], {}, [[4, 2, 2, 3]]),
    ("BATCH_TO_SPACE_ND", [4, 2, 2, 3], [], [_i32([2, 2]), _i32([[0, 0], [0, 0]])], {}, [[1, 4, 4, 3]]),
    ("BROADCAST_TO", [1, 4, 4, 3], [], [_i32([2, 4, 4, 3])], dict(version=2), [[2, 4, 4, 3]]),
    ("PACK", [1, 4, 4, 3], [], [], dict(values_count=2, axis=0), [[2, 1, 4, 4, 3]]),
]


@pytest.mark.parametrize("case", BYTE_MOVE_CASES, ids=lambda c: f"{c[0]}-{len(c[1])}d-{c[3][0].dtype if c[3] else ''}")
def test_byte_moves_stay_int8(gpu, case):
    """Data movement between int8 tensors after an int8 max pool: the model stays int8 (INT8_<op>), and the
    bytes are LiteRT's."""
    op, shape, before, after, options, outs = case
    rng = np.random.default_rng(len(op))
    q = _q(rng)
    mb = ModelBuilder()
    x = mb.input("x", shape, I8, quant=q)
    p = mb.tensor("p", shape, I8, quant=q)
    mb.op("MAX_POOL_2D", [x], [p], padding="SAME", stride_w=1, stride_h=1, filter_width=2, filter_height=2)
    ins = [mb.const(f"b{i}", v) for i, v in enumerate(before)] + [p] * (2 if op == "PACK" else 1) + \
        [mb.const(f"a{i}", v) for i, v in enumerate(after)]
    ys = [mb.tensor(f"y{i}", s, I8, quant=q) for i, s in enumerate(outs)]
    mb.op(op, ins, ys, **options)
    for y in ys:
        mb.output(y)
    _exact(gpu, mb.finish(), [_qin(rng, shape)], "INT8_" + op)


@pytest.mark.parametrize("op,bshape", [("MAXIMUM", (2, 5, 6, 8)), ("MINIMUM", (8,)), ("MAXIMUM", (2, 1, 6, 1))])
def test_maximum_minimum_compare_raw_bytes(gpu, op, bshape):
    """int8 MAXIMUM / MINIMUM on inputs and output of different grids: LiteRT compares the raw bytes, so does the
    int8 form (the float view would compare real values)."""
    rng = np.random.default_rng(len(bshape) + len(op))
    mb = ModelBuilder()
    a = mb.input("a", [2, 5, 6, 8], I8, quant=_q(rng))
    b = mb.input("b", list(bshape), I8, quant=_q(rng))
    y = mb.tensor("y", [2, 5, 6, 8], I8, quant=_q(rng))
    mb.op(op, [a, b], [y])
    mb.output(y)
    _exact(gpu, mb.finish(), [_qin(rng, (2, 5, 6, 8)), _qin(rng, bshape)], "INT8_" + op)


@pytest.mark.parametrize("case", ["mean_hw", "mean_last", "avg_global", "max_same"])
def test_long_reductions_take_partial_sums_bit_exact(gpu, case):
    """MEANs and pools over more than int8_eltwise.PARTIAL_FROM elements: int32 partial sums (pools: sums and
    counts, or maxima) of parts, then the outputs; LiteRT's bits. 4 outputs of 22,500 elements an invocation were
    off by one on lavapipe (llvmpipe's loop limit)."""
    rng = np.random.default_rng(len(case))
    mb = ModelBuilder()
    q = (float(rng.uniform(0.02, 0.1)), int(rng.integers(-30, 30)))
    if case.startswith("mean"):
        shape, axes = ([1, 150, 160, 5], [1, 2]) if case == "mean_hw" else ([3, 2, 30000], [-1])
        x = mb.input("x", shape, I8, quant=q)
        oshape = [1, 1, 1, 5] if case == "mean_hw" else [3, 2, 1]
        y = mb.tensor("y", oshape, I8, quant=_q(rng))
        mb.op("MEAN", [x, mb.const("ax", np.array(axes, np.int32))], [y], keep_dims=True)
        form = "INT8_MEAN"
    else:
        op, shape, k, pad = ("AVERAGE_POOL_2D", [2, 150, 150, 3], 150, "VALID") if case == "avg_global" else \
            ("MAX_POOL_2D", [1, 90, 80, 4], 70, "SAME")
        x = mb.input("x", shape, I8, quant=q)
        o = 1 if pad == "VALID" else -(-shape[1] // 40)
        ow = 1 if pad == "VALID" else -(-shape[2] // 40)
        s = 1 if pad == "VALID" else 40
        y = mb.tensor("y", [shape[0], o, ow, shape[3]], I8, quant=q)
        mb.op(op, [x], [y], padding=pad, stride_w=s, stride_h=s, filter_width=k, filter_height=k)
        form = "INT8_" + op
    mb.output(y)
    xv = rng.integers(0, 100, shape).astype(np.int8)             # (a mean far from the zero point)
    if case == "max_same":
        xv = rng.integers(-128, 100, shape).astype(np.int8)
        xv[:, 40:80:7] = 127                                      # (maxima in a window's late rows)
    _exact(gpu, mb.finish(), [xv], form)
