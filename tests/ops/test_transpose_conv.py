"""TRANSPOSE_CONV against LiteRT, and MediaPipe's CUSTOM:Convolution2DTransposeBias (which LiteRT
cannot run) against a numpy transcription of its reference scatter loop (itself checked against
LiteRT's TRANSPOSE_CONV) and against TRANSPOSE_CONV + bias where the two ops' paddings coincide."""
import struct

import numpy as np
import pytest

pytest.importorskip("vulkan")

import gpuc  # noqa: E402
from gpuc.errors import UnsupportedError  # noqa: E402
from helpers.builder import ModelBuilder, write_root  # noqa: E402
from helpers.catalogue import np_act  # noqa: E402
from helpers.data import rnd, seed_of  # noqa: E402
from helpers.litert import run_litert  # noqa: E402
from helpers.ops import assert_close  # noqa: E402

CUSTOM = "Convolution2DTransposeBias"


def scatter_ref(x, w, b, out_hw, sh, sw, pt, pl):
    """TFLite's reference TransposeConv loop, vectorised over channels (float64 accumulation)."""
    n, h, wd, _ = x.shape
    oh, ow = out_hw
    out = np.zeros((n, oh, ow, w.shape[0]))
    for iy in range(h):
        for ix in range(wd):
            for ky in range(w.shape[1]):
                for kx in range(w.shape[2]):
                    oy, ox = iy * sh - pt + ky, ix * sw - pl + kx
                    if 0 <= oy < oh and 0 <= ox < ow:
                        out[:, oy, ox, :] += x[:, iy, ix, :].astype(np.float64) @ w[:, ky, kx, :].T
    return (out + (0 if b is None else b)).astype(np.float32)


def tc_model(x_shape, w, out_shape, stride, padding, act="NONE", bias="const", weights="const"):
    """TRANSPOSE_CONV; bias: 'const' | 'input' | 'absent' (3 inputs) | 'minus1' (4th input -1)."""
    mb = ModelBuilder()
    os_ = mb.const("output_shape", np.asarray(out_shape, np.int32))
    wi = mb.const("w", w) if weights == "const" else mb.input("w", w.shape)
    xi = mb.input("x", x_shape)
    ins = [os_, wi, xi]
    b = rnd((w.shape[0],), 7)
    if bias == "const":
        ins.append(mb.const("b", b))
    elif bias == "input":
        ins.append(mb.input("b", b.shape))
    elif bias == "minus1":
        ins.append(-1)
    y = mb.tensor("y", out_shape)
    mb.op("TRANSPOSE_CONV", ins, [y], version=4 if act != "NONE" else 3 if len(ins) == 4 else 1,
          padding=padding, stride_h=stride[0], stride_w=stride[1], fused_activation_function=act)
    mb.output(y)
    return mb.finish(), b


# (input NHWC, weights OHWI, output hw, stride hw, padding, activation, bias)
TC = [
    ((1, 4, 4, 3), (2, 2, 2, 3), (8, 8), (2, 2), "VALID", "NONE", "const"),      # unet-style 2x up
    ((1, 4, 5, 3), (4, 3, 3, 3), (8, 10), (2, 2), "SAME", "NONE", "const"),
    ((1, 4, 5, 3), (4, 3, 3, 3), (7, 9), (2, 2), "SAME", "RELU", "const"),
    ((2, 4, 5, 2), (3, 3, 3, 2), (9, 11), (2, 2), "VALID", "NONE", "absent"),
    ((1, 4, 5, 2), (3, 3, 3, 2), (10, 12), (2, 2), "VALID", "RELU6", "const"),
    ((1, 5, 6, 4), (3, 3, 3, 4), (5, 6), (1, 1), "SAME", "RELU_N1_TO_1", "const"),
    ((1, 5, 6, 4), (3, 1, 1, 4), (5, 6), (1, 1), "VALID", "NONE", "minus1"),
    ((1, 3, 4, 2), (3, 5, 2, 2), (9, 4), (3, 1), "SAME", "NONE", "const"),
    ((1, 3, 4, 2), (2, 2, 2, 2), (8, 12), (3, 3), "VALID", "NONE", "const"),      # stride > kernel: gaps
    ((1, 3, 3, 3), (2, 4, 4, 3), (6, 6), (2, 2), "SAME", "TANH", "const"),         # TANH ignored by LiteRT
    ((2, 3, 4, 3), (5, 5, 3, 3), (6, 11), (2, 3), "SAME", "NONE", "input"),
    ((1, 1, 1, 2), (3, 3, 3, 2), (3, 3), (2, 2), "VALID", "RELU", "const"),
]


def _tc_id(c):
    xs, ws, ohw, s, pad, act, bias = c
    return (f"{'x'.join(map(str, xs))}-w{'x'.join(map(str, ws))}-to{ohw[0]}x{ohw[1]}-s{s[0]}x{s[1]}-"
            f"{pad}-{act}-bias_{bias}")


@pytest.mark.parametrize("case", TC, ids=_tc_id)
def test_transpose_conv(gpu, case):
    xs, ws, ohw, stride, pad, act, bias = case
    s = seed_of(_tc_id(case))
    w = rnd(ws, s + 1)
    out_shape = (xs[0], *ohw, ws[0])
    model, b = tc_model(xs, w, out_shape, stride, pad, act, bias)
    x = rnd(xs, s, -2, 2)
    inputs = [x, b] if bias == "input" else [x]
    ref = run_litert(model, inputs)
    assert_close(gpu.run(model, inputs), ref, [out_shape], ["float32"])
    # the numpy transcription used for the custom op agrees with LiteRT here
    tot = [max((-(-o // st) - 1) * st + k - o, 0) if pad == "SAME" else 0
           for o, st, k in zip(ohw, stride, ws[1:3])]
    mine = scatter_ref(x, w, None if bias in ("absent", "minus1") else b, ohw, *stride, tot[0] // 2, tot[1] // 2)
    mine = np_act(act if act != "TANH" else "NONE")(mine)
    assert_close([mine], ref, [out_shape], ["float32"])


def test_transpose_conv_runtime_weights(gpu):
    w = rnd((3, 3, 3, 2), 11)
    model, _ = tc_model((1, 3, 4, 2), w, (1, 6, 8, 3), (2, 2), "SAME", weights="input")
    x = rnd((1, 3, 4, 2), 12)
    assert_close(gpu.run(model, [w, x]), run_litert(model, [w, x]), [(1, 6, 8, 3)], ["float32"])


def test_transpose_conv_inconsistent_output_shape_unsupported_like_litert():
    model, _ = tc_model((1, 4, 5, 3), rnd((2, 3, 3, 3)), (1, 12, 12, 2), (2, 2), "SAME")
    with pytest.raises(Exception, match="computed_input_height"):
        run_litert(model, [rnd((1, 4, 5, 3))])
    with pytest.raises(UnsupportedError, match="TRANSPOSE_CONV.*maps back to 6x6"):
        gpuc.compile(model)


def custom_model(x_shape, w, b, out_shape, padding, stride_w, stride_h, options=None):
    """One CUSTOM:Convolution2DTransposeBias op (inputs input, weights, bias)."""
    mb = ModelBuilder()
    xi = mb.input("x", x_shape)
    wi, bi = mb.const("w", w), mb.const("b", b)
    y = mb.tensor("y", out_shape)
    mb.op("CUSTOM", [xi, wi, bi], [y])
    mb.output(y)
    d = mb.model_dict()
    d["operator_codes"][0]["custom_code"] = CUSTOM
    opts = struct.pack("<iii", padding, stride_w, stride_h) if options is None else options
    d["subgraphs"][0]["operators"][0]["custom_options"] = np.frombuffer(opts, np.uint8)
    return write_root("Model", d, file_identifier=b"TFL3", size=4096 + w.nbytes)


def mp_out(n, k, s, same):
    tot = max(0, k - (n - 1) % s - 1) if same else 0
    return s * (n - 1) + k - tot, tot // 2


# (input NHWC, weights OHWI, padding 1 SAME / 2 VALID, stride hw)
CUSTOM_CASES = [
    ((1, 8, 8, 4), (1, 2, 2, 4), 1, (2, 2)),       # selfie-segmentation's shape, scaled down
    ((2, 4, 5, 3), (3, 3, 3, 3), 1, (2, 2)),
    ((1, 4, 5, 3), (3, 4, 3, 3), 1, (3, 2)),
    ((1, 4, 5, 3), (2, 3, 3, 3), 2, (2, 2)),
    ((1, 3, 4, 2), (2, 2, 2, 2), 2, (3, 3)),
    ((1, 5, 5, 2), (2, 3, 3, 2), 1, (1, 1)),
]


@pytest.mark.parametrize("case", CUSTOM_CASES, ids=lambda c: f"{c[0]}-w{c[1]}-pad{c[2]}-s{c[3]}")
def test_convolution2d_transpose_bias(gpu, case):
    xs, ws, pad, (sh, sw) = case
    (oh, pt), (ow, pl) = mp_out(xs[1], ws[1], sh, pad == 1), mp_out(xs[2], ws[2], sw, pad == 1)
    w, b, x = rnd(ws, 1), rnd((ws[0],), 2), rnd(xs, 3, -2, 2)
    out_shape = (xs[0], oh, ow, ws[0])
    model = custom_model(xs, w, b, out_shape, pad, sw, sh)
    assert_close(gpu.run(model, [x]), [scatter_ref(x, w, b, (oh, ow), sh, sw, pt, pl)], [out_shape], ["float32"])


def test_convolution2d_transpose_bias_matches_litert_transpose_conv(gpu):
    """Where MediaPipe's padding equals TRANSPOSE_CONV's, the custom op equals LiteRT's TRANSPOSE_CONV."""
    w, x = rnd((3, 3, 3, 2), 4), rnd((1, 4, 5, 2), 5)
    (oh, _), (ow, _) = mp_out(4, 3, 2, True), mp_out(5, 3, 2, True)      # 8x10: SAME, total padding 1
    ref_model, b = tc_model((1, 4, 5, 2), w, (1, oh, ow, 3), (2, 2), "SAME")
    model = custom_model((1, 4, 5, 2), w, b, (1, oh, ow, 3), 1, 2, 2)
    assert_close(gpu.run(model, [x]), run_litert(ref_model, [x]), [(1, oh, ow, 3)], ["float32"])


@pytest.mark.parametrize("options,match", [
    (b"\x01\x00\x00\x00\x02\x00\x00\x00", "12 bytes"),
    (struct.pack("<iii", 0, 2, 2), "padding enum 0"),
    (struct.pack("<iii", 1, 0, 2), "strides"),
    (struct.pack("<iii", 2, 2, 2), "does not match"),           # VALID gives 9x9, the tensor says 8x8
])
def test_convolution2d_transpose_bias_bad_options(options, match):
    model = custom_model((1, 4, 4, 2), rnd((1, 2, 2, 2)) if match != "does not match" else rnd((1, 3, 3, 2)),
                         rnd((1,)), (1, 8, 8, 1), 0, 0, 0, options=options)
    with pytest.raises(UnsupportedError, match=f"{CUSTOM}.*{match}"):
        gpuc.compile(model)


def test_selfie_segmentation_custom_op_supported(models_dir):
    from gpuc.compiler import ops
    from gpuc.compiler.frontend.importer import load_tflite
    g = load_tflite((models_dir / "mp_selfie_segmentation.tflite").read_bytes()).main
    nodes = [n for n in g.nodes if n.op == "CUSTOM:" + CUSTOM]
    assert nodes and all(ops.unsupported_reason(n, g) is None for n in nodes)
    k = ops.lower(nodes[0], g)[0]
    assert (k.defines["SH"], k.defines["SW"], k.defines["PT"], k.defines["PL"]) == (2, 2, 0, 0)
