"""Native int8 TRANSPOSE_CONV ("INT8_TRANSPOSE_CONV": compiler/ops/int8_transpose_conv.py): bit for bit LiteRT's
builtin kernel (BUILTIN_WITHOUT_DEFAULT_DELEGATES) on random grids: strides 1-3, SAME / VALID, output sizes with
the extra row / column, per-channel and per-tensor weights, with and without bias, fused activations, depths that
take the byte loop, the word-wise loop and 4-channel words, more than 8 output channels (LiteRT's blocks of 8
requantize otherwise than the rest), TANH / SIGN_BIT (LiteRT clamps to int8 only), weights with nonzero zero
points (LiteRT ignores them), every input byte times every weight byte, and a decoder chain."""
import numpy as np
import pytest

pytest.importorskip("vulkan")

from helpers.builder import ModelBuilder  # noqa: E402
from helpers.int8_exact import exact as _exact, int_dot_mode, ops_after_passes as _ops, qin as _qin  # noqa: E402

I8 = "int8"


def _grid(rng, lo=0.005, hi=0.1):
    return float(np.exp(rng.uniform(np.log(lo), np.log(hi)))), int(rng.integers(-128, 128))


def _tconv(mb, rng, x, xq, xshape, co, k, stride, padding, out_hw, act="NONE", per_channel=True, bias=True,
           oq=None, name="y", w=None, wzp=0):
    kh, kw = k
    ci = xshape[3]
    ws = rng.uniform(0.001, 0.02, co if per_channel else 1).astype(np.float32)
    w = rng.integers(-127, 128, (co, kh, kw, ci)).astype(np.int8) if w is None else w
    out = [xshape[0], *out_hw, co]
    ins = [mb.const(f"{name}_shape", np.array(out, np.int32)), mb.const(f"{name}_w", w, quant=(ws, np.full(ws.size, wzp), 0)), x]
    if bias:
        bs = (np.float32(xq[0]) * ws).astype(np.float32)
        ins.append(mb.const(f"{name}_b", rng.integers(-3000, 3000, co).astype(np.int32), quant=(bs, 0)))
    y = mb.tensor(name, out, I8, quant=oq or _grid(rng, 0.02, 0.5))
    mb.op("TRANSPOSE_CONV", ins, [y], version=4 if act != "NONE" else 3 if bias else 2, padding=padding,
          stride_h=stride[0], stride_w=stride[1], fused_activation_function=act)
    return y


CASES = [   # (input NHWC, cout, kernel, stride, padding, output hw, activation, per-channel, bias[, weights' zero point])
    ((1, 4, 5, 3), 5, (3, 3), (2, 2), "SAME", (8, 10), "NONE", True, True),           # byte loop
    ((2, 3, 4, 4), 8, (3, 3), (2, 2), "SAME", (5, 7), "RELU", True, True),            # VEC4 + OC4, odd output
    ((1, 5, 5, 8), 12, (4, 4), (2, 2), "SAME", (10, 10), "NONE", True, False),       # a block of 8 + 4, no bias
    ((1, 3, 3, 4), 6, (3, 2), (3, 1), "VALID", (9, 4), "RELU6", False, True),         # per-tensor, VALID
    ((1, 3, 4, 2), 3, (2, 3), (2, 3), "VALID", (7, 13), "RELU_N1_TO_1", True, True),  # VALID with the extra row
    ((1, 6, 6, 16), 20, (3, 3), (1, 1), "SAME", (6, 6), "NONE", True, True),          # stride 1
    ((1, 4, 4, 8), 16, (2, 2), (2, 2), "VALID", (8, 8), "NONE", True, True),          # two blocks of 8
    ((1, 3, 4, 4), 8, (2, 2), (3, 3), "VALID", (9, 11), "NONE", True, True),         # strides past the kernel
    ((1, 3, 3, 8), 8, (5, 5), (2, 2), "SAME", (6, 5), "RELU", True, True),            # 5x5: 3 or 2 taps a row
    ((1, 3, 3, 4), 9, (3, 3), (2, 2), "SAME", (6, 6), "TANH", True, True, 5),         # TANH: int8 clamp only;
    ((1, 3, 3, 3), 4, (3, 3), (2, 2), "SAME", (5, 5), "SIGN_BIT", False, True, -9),   # weight zero points ignored
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0][3]}to{c[1]}-{c[2][0]}x{c[2][1]}s{c[3][0]}{c[3][1]}{c[4]}-{c[6]}")
def test_transpose_conv_bit_exact(gpu, case):
    shape, co, k, stride, padding, out_hw, act, per_ch, bias, *wzp = case
    rng = np.random.default_rng(abs(hash(str(case))) % 2**32)
    xq = _grid(rng)
    mb = ModelBuilder()
    x = mb.input("x", list(shape), I8, quant=xq)
    mb.output(_tconv(mb, rng, x, xq, shape, co, k, stride, padding, out_hw, act, per_ch, bias, wzp=(wzp or [0])[0]))
    _exact(gpu, mb.finish(), [_qin(rng, shape)], "INT8_TRANSPOSE_CONV")


@pytest.mark.parametrize("seed", [1, 2])
def test_transpose_conv_every_byte_product_bit_exact(gpu, seed):
    """1x1, stride 1: each of the 256 input bytes times each of the 255 weight bytes, one output channel each (31
    whole blocks of 8 and 7 channels past them), on random grids (seed 2: one on which LiteRT's double multipliers
    and float ones give different outputs)."""
    rng = np.random.default_rng(seed)
    xq, oq = _grid(rng), _grid(rng, 0.01, 0.5)
    if seed == 2:
        xq, oq = (0.0511544, 56), (0.0467681, 99)
    mb = ModelBuilder()
    x = mb.input("x", [1, 16, 16, 1], I8, quant=xq)
    w = np.arange(-127, 128, dtype=np.int8).reshape(255, 1, 1, 1)
    mb.output(_tconv(mb, rng, x, xq, [1, 16, 16, 1], 255, (1, 1), (1, 1), "VALID", (16, 16), bias=False, oq=oq, w=w))
    _exact(gpu, mb.finish(), [np.arange(-128, 128, dtype=np.int8).reshape(1, 16, 16, 1)], "INT8_TRANSPOSE_CONV")


def test_int8_decoder_chain_stays_int8(gpu):
    """conv -> TRANSPOSE_CONV (x2 upsampling) -> ADD of a skip -> TRANSPOSE_CONV: the whole model int8."""
    rng = np.random.default_rng(5)
    mb = ModelBuilder()
    xq = (0.04, -3)
    x = mb.input("x", [1, 4, 4, 8], I8, quant=xq)
    skip = mb.input("skip", [1, 8, 8, 4], I8, quant=(0.05, 7))
    hq = (0.06, 2)
    h = _tconv(mb, rng, x, xq, [1, 4, 4, 8], 4, (3, 3), (2, 2), "SAME", (8, 8), "RELU", oq=hq, name="h")
    s = mb.tensor("s", [1, 8, 8, 4], I8, quant=(0.08, -5))
    mb.op("ADD", [h, skip], [s], fused_activation_function="NONE")
    mb.output(_tconv(mb, rng, s, (0.08, -5), [1, 8, 8, 4], 3, (2, 2), (2, 2), "VALID", (16, 16), name="y"))
    model = mb.finish()
    assert {"INT8_TRANSPOSE_CONV", "INT8_ADD"} <= set(_ops(model))
    _exact(gpu, model, [_qin(rng, (1, 4, 4, 8)), _qin(rng, (1, 8, 8, 4))], "INT8_TRANSPOSE_CONV")


@pytest.mark.parametrize("case", [1, 3], ids=["oc4", "vec4"])
@pytest.mark.parametrize("mode", ["off", "force"])
def test_transpose_conv_dot_product_variant_and_plain_kernel_agree(gpu, monkeypatch, mode, case):
    """The `int_dot` variant (packed OpSDot) and the plain int32 word loop give LiteRT's bits."""
    int_dot_mode(gpu, monkeypatch, mode)
    test_transpose_conv_bit_exact(gpu, CASES[case])
