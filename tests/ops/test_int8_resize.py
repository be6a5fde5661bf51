"""Native int8 RESIZE_BILINEAR / RESIZE_NEAREST_NEIGHBOR (compiler/ops/int8_resize.py: "INT8_RESIZE_BILINEAR",
"INT8_RESIZE_NEAREST_NEIGHBOR") on one-op int8 models and after an int8 conv: bit for bit LiteRT's builtin
kernels (BUILTIN_WITHOUT_DEFAULT_DELEGATES), on the raw bytes whatever the input and output grids, every
align_corners / half_pixel_centers combination LiteRT takes, up- and downsampling."""
import itertools

import numpy as np
import pytest

pytest.importorskip("vulkan")

import gpuc  # noqa: E402
from gpuc.errors import GpucError  # noqa: E402
from helpers.builder import ModelBuilder  # noqa: E402
from helpers.litert import run_litert  # noqa: E402
from helpers.int8_exact import exact as _exact, ops_after_passes as _ops, qin as _qin  # noqa: E402

I8 = "int8"
# (input shape, output size): up, down, mixed, to one pixel, from one pixel
SIZES = [((2, 3, 4, 5), (7, 9)), ((1, 9, 8, 3), (4, 3)), ((1, 5, 2, 6), (3, 7)), ((1, 4, 5, 2), (1, 1)),
         ((1, 1, 1, 3), (3, 2))]
MODES = [(False, False), (True, False), (False, True), (True, True)]


def _resize(op, shape, size, ac, hp, qy=(0.07, -5)):
    mb = ModelBuilder()
    x = mb.input("x", list(shape), I8, quant=(0.05, 3))
    y = mb.tensor("y", [shape[0], *size, shape[3]], I8, quant=qy)
    mb.op(op, [x, mb.const("size", np.array(size, np.int32))], [y], align_corners=ac, half_pixel_centers=hp)
    mb.output(y)
    return mb.finish()


@pytest.mark.parametrize("op", ["RESIZE_BILINEAR", "RESIZE_NEAREST_NEIGHBOR"])
@pytest.mark.parametrize("mode", MODES, ids=lambda m: f"ac{int(m[0])}hp{int(m[1])}")
def test_resize_bit_exact(gpu, op, mode):
    """Every size case on another output grid than the input's (LiteRT ignores both)."""
    ac, hp = mode
    if op == "RESIZE_BILINEAR" and ac and hp:
        pytest.skip("LiteRT refuses it (test_bilinear_align_corners_with_half_pixel_is_refused)")
    rng = np.random.default_rng(len(op) + 2 * ac + hp)
    for shape, size in SIZES:
        _exact(gpu, _resize(op, shape, size, ac, hp), [_qin(rng, shape)], "INT8_" + op)


def test_bilinear_align_corners_with_half_pixel_is_refused():
    model = _resize("RESIZE_BILINEAR", (1, 3, 4, 2), (5, 7), True, True)
    with pytest.raises(Exception):
        run_litert(model, [np.zeros((1, 3, 4, 2), np.int8)])
    with pytest.raises(GpucError, match="align_corners"):
        gpuc.compile(model, cache=False)


def test_bilinear_tables_match_litert_on_many_sizes(gpu):
    """The host tables (lo, hi, weights) against LiteRT over many small sizes: one model of 40 resizes of one
    input each way, all outputs compared."""
    rng = np.random.default_rng(7)
    for op in ("RESIZE_BILINEAR", "RESIZE_NEAREST_NEIGHBOR"):
        mb = ModelBuilder()
        x = mb.input("x", [1, 6, 5, 2], I8, quant=(0.05, 3))
        for k, ((oh, ow), (ac, hp)) in enumerate(itertools.product([(1, 2), (2, 3), (5, 4), (6, 5), (11, 13),
                                                                     (12, 10), (3, 17), (17, 1), (4, 9), (13, 7)],
                                                                    MODES)):
            if op == "RESIZE_BILINEAR" and ac and hp:
                continue
            y = mb.tensor(f"y{k}", [1, oh, ow, 2], I8, quant=(0.05, 3))
            mb.op(op, [x, mb.const(f"s{k}", np.array([oh, ow], np.int32))], [y], align_corners=ac,
                  half_pixel_centers=hp)
            mb.output(y)
        _exact(gpu, mb.finish(), [_qin(rng, (1, 6, 5, 2))], "INT8_" + op)


@pytest.mark.parametrize("op", ["RESIZE_BILINEAR", "RESIZE_NEAREST_NEIGHBOR"])
def test_resize_after_int8_conv_stays_native(gpu, op):
    """conv -> resize (an upsampling decoder's step): the whole model int8, LiteRT's bits."""
    rng = np.random.default_rng(3)
    mb = ModelBuilder()
    x = mb.input("x", [1, 5, 6, 4], I8, quant=(0.05, -1))
    ws = rng.uniform(0.002, 0.02, 8).astype(np.float32)
    w = mb.const("w", rng.integers(-127, 128, (8, 3, 3, 4)).astype(np.int8), quant=(ws, 0, 0))
    b = mb.const("b", rng.integers(-500, 500, 8).astype(np.int32), quant=(np.float32(0.05) * ws, 0, 0))
    h = mb.tensor("h", [1, 5, 6, 8], I8, quant=(0.04, 6))
    mb.op("CONV_2D", [x, w, b], [h], padding="SAME", stride_w=1, stride_h=1, fused_activation_function="RELU")
    y = mb.tensor("y", [1, 10, 12, 8], I8, quant=(0.04, 6))
    mb.op(op, [h, mb.const("size", np.array([10, 12], np.int32))], [y], align_corners=False, half_pixel_centers=True)
    mb.output(y)
    model = mb.finish()
    assert {"INT8_CONV_2D", "INT8_" + op} <= set(_ops(model))
    _exact(gpu, model, [_qin(rng, (1, 5, 6, 4))], "INT8_" + op)
