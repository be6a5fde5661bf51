"""RESIZE_BILINEAR / RESIZE_NEAREST_NEIGHBOR against LiteRT: every align_corners / half_pixel_centers
combination LiteRT accepts, integer and non-integer up- and downscaling, degenerate sizes."""
import itertools

import numpy as np
import pytest

pytest.importorskip("vulkan")

import gpuc  # noqa: E402
from gpuc.errors import UnsupportedError  # noqa: E402
from helpers.builder import ModelBuilder  # noqa: E402
from helpers.data import rnd, seed_of  # noqa: E402
from helpers.litert import run_litert  # noqa: E402
from helpers.ops import assert_close  # noqa: E402


def resize_model(op, in_shape, size, align_corners, half_pixel, const_size=True):
    mb = ModelBuilder()
    x = mb.input("x", in_shape)
    s = mb.const("size", np.asarray(size, np.int32)) if const_size else mb.input("size", [2], "int32")
    y = mb.tensor("y", [in_shape[0], size[0], size[1], in_shape[3]])
    mb.op(op, [x, s], [y], version=3 if half_pixel else 1, align_corners=align_corners,
          half_pixel_centers=half_pixel)
    mb.output(y)
    return mb.finish()


# (input NHWC, output size): integer / non-integer up and down, mixed, 1-pixel in or out, identity
SHAPES = [
    ((1, 4, 5, 3), (8, 10)),
    ((2, 3, 4, 2), (7, 9)),
    ((1, 9, 7, 2), (4, 3)),
    ((1, 6, 10, 1), (4, 15)),
    ((1, 5, 3, 2), (5, 3)),
    ((1, 1, 1, 3), (3, 2)),
    ((1, 4, 4, 2), (1, 1)),
    ((1, 3, 7, 4), (9, 21)),
]
FLAGS = [(False, False), (True, False), (False, True), (True, True)]
CASES = [(op, ac, hp, shp, size)
         for op in ("RESIZE_BILINEAR", "RESIZE_NEAREST_NEIGHBOR")
         for (ac, hp), (shp, size) in itertools.product(FLAGS, SHAPES)
         if not (op == "RESIZE_BILINEAR" and ac and hp)]


def _id(c):
    op, ac, hp, shp, size = c
    return (f"{'bilinear' if op == 'RESIZE_BILINEAR' else 'nearest'}-ac{int(ac)}-hp{int(hp)}-"
            f"{'x'.join(map(str, shp))}to{size[0]}x{size[1]}")


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_resize(gpu, case):
    op, ac, hp, shp, size = case
    model = resize_model(op, shp, size, ac, hp)
    x = rnd(shp, seed_of(_id(case)), -2, 2)
    ref = run_litert(model, [x])
    assert_close(gpu.run(model, [x]), ref, [(shp[0], size[0], size[1], shp[3])], ["float32"])


def test_resize_rerun_new_inputs(gpu):
    model = resize_model("RESIZE_BILINEAR", (1, 5, 6, 3), (11, 4), False, True)
    m = gpu.load(model)
    try:
        for seed in range(3):
            x = rnd((1, 5, 6, 3), 50 + seed, -3, 3)
            assert_close(m.run([x]), run_litert(model, [x]), [(1, 11, 4, 3)], ["float32"])
    finally:
        m.close()


def test_bilinear_align_corners_and_half_pixel_unsupported_like_litert():
    model = resize_model("RESIZE_BILINEAR", (1, 4, 4, 1), (8, 8), True, True)
    with pytest.raises(Exception, match="half_pixel_centers"):
        run_litert(model, [rnd((1, 4, 4, 1))])
    with pytest.raises(UnsupportedError, match="RESIZE_BILINEAR.*align_corners and half_pixel_centers"):
        gpuc.compile(model)


def test_runtime_size_unsupported():
    model = resize_model("RESIZE_NEAREST_NEIGHBOR", (1, 4, 4, 1), (8, 8), False, False, const_size=False)
    run_litert(model, [rnd((1, 4, 4, 1)), np.array([8, 8], np.int32)])
    with pytest.raises(UnsupportedError, match="RESIZE_NEAREST_NEIGHBOR.*'size'"):
        gpuc.compile(model)
