"""TILE and BROADCAST_TO against LiteRT: ranks 1..9, int32 / int64 multiples and shapes, float32 and
int32 data, repeated and broadcast dimensions anywhere, empty outputs."""
import numpy as np
import pytest

pytest.importorskip("vulkan")

import gpuc  # noqa: E402
from gpuc.errors import UnsupportedError  # noqa: E402
from helpers.builder import ModelBuilder  # noqa: E402
from helpers.data import rnd, seed_of  # noqa: E402
from helpers.litert import run_litert  # noqa: E402
from helpers.ops import assert_close  # noqa: E402


def model(op, in_shape, arg, arg_dtype="int32", dtype="float32", const_arg=True):
    out_shape = (np.tile(np.zeros(in_shape), arg) if op == "TILE" else np.broadcast_to(np.zeros(in_shape), arg)).shape
    mb = ModelBuilder()
    x = mb.input("x", in_shape, dtype)
    a = mb.const("arg", np.asarray(arg, arg_dtype)) if const_arg else mb.input("arg", [len(arg)], arg_dtype)
    y = mb.tensor("y", out_shape, dtype)
    mb.op(op, [x, a], [y], version=2 if op == "BROADCAST_TO" else 1)   # LiteRT has BROADCAST_TO v2+ only
    mb.output(y)
    return mb.finish(), out_shape


# (op, input shape, multiples / shape, multiples dtype, data dtype)
CASES = [
    ("TILE", (5,), (3,), "int32", "float32"),
    ("TILE", (2, 3), (2, 2), "int32", "float32"),
    ("TILE", (2, 3), (1, 4), "int64", "float32"),
    ("TILE", (2, 1, 3), (3, 2, 1), "int32", "int32"),
    ("TILE", (1, 4, 1, 4, 3), (1, 1, 2, 1, 1), "int32", "float32"),      # unet's nearest-upsample idiom
    ("TILE", (2, 3, 2, 1, 2, 1), (2, 1, 3, 2, 1, 3), "int64", "float32"),
    ("TILE", (2, 3), (0, 2), "int32", "float32"),                      # empty output
    ("TILE", (2, 3), (1, 1), "int32", "float32"),
    ("BROADCAST_TO", (3, 1), (2, 3, 4), "int32", "float32"),
    ("BROADCAST_TO", (1, 4), (3, 4), "int64", "float32"),
    ("BROADCAST_TO", (), (2, 3), "int32", "float32"),
    ("BROADCAST_TO", (2, 1, 3), (2, 4, 3), "int32", "int32"),
    ("BROADCAST_TO", (1, 2), (2, 1, 3, 2, 1, 1, 1, 2), "int32", "float32"),
    ("BROADCAST_TO", (1, 1, 1, 1, 1, 1, 1, 1, 2), (2, 1, 1, 1, 1, 1, 1, 3, 2), "int64", "float32"),
    ("BROADCAST_TO", (3, 2), (3, 2), "int32", "float32"),
    ("BROADCAST_TO", (3, 2), (0, 3, 2), "int32", "float32"),
]


def _id(c):
    op, xs, arg, adt, dt = c
    return f"{op.lower()}-{'x'.join(map(str, xs)) or 'scalar'}-by{'x'.join(map(str, arg))}-{adt}-{dt}"


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_tile(gpu, case):
    op, xs, arg, adt, dt = case
    m, out_shape = model(op, xs, arg, adt, dt)
    x = rnd(xs, seed_of(_id(case)), -5, 5)
    if dt == "int32":
        x = (x * 1000).astype(np.int32)
    ref = run_litert(m, [x])
    out = gpu.run(m, [x])
    assert_close(out, ref, [out_shape], [dt])
    np.testing.assert_array_equal(out[0], ref[0])       # a pure copy: bit exact


def test_tile_rerun(gpu):
    m, out_shape = model("TILE", (2, 3, 4), (2, 1, 3))
    g = gpu.load(m)
    try:
        for seed in range(3):
            x = rnd((2, 3, 4), 90 + seed)
            np.testing.assert_array_equal(g.run([x])[0], run_litert(m, [x])[0])
    finally:
        g.close()


@pytest.mark.parametrize("op", ["TILE", "BROADCAST_TO"])
def test_runtime_multiples_unsupported(op):
    arg = (2, 2) if op == "TILE" else (2, 2, 3)
    m, _ = model(op, (2, 3), arg, const_arg=False)
    run_litert(m, [rnd((2, 3)), np.asarray(arg, np.int32)])          # fine in LiteRT (dynamic output)
    with pytest.raises(UnsupportedError, match=f"{op}.*'arg'"):
        gpuc.compile(m)
