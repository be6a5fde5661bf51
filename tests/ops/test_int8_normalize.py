"""Native int8 LOG_SOFTMAX and L2_NORMALIZATION ("INT8_LOG_SOFTMAX", "INT8_L2_NORMALIZATION":
compiler/ops/int8_normalize.py): bit for bit LiteRT's builtin kernels (BUILTIN_WITHOUT_DEFAULT_DELEGATES: LOG_SOFTMAX's
float table path with glibc's logf, L2_NORMALIZATION's fixed-point inverse square root) on rows of random bytes,
every byte as a row's largest, input scales whose table underflows, long rows, sums of squares from 0 to past 2^29;
LiteRT's fixed output grids (16/256, 127; 1/128, 0) required, any other refused by name."""
import numpy as np
import pytest

pytest.importorskip("vulkan")

import gpuc  # noqa: E402
from gpuc.errors import UnsupportedError  # noqa: E402
from helpers.builder import ModelBuilder  # noqa: E402
from helpers.litert import run_litert  # noqa: E402
from helpers.int8_exact import exact as _exact, ops_after_passes as _ops  # noqa: E402

I8 = "int8"
GRID = (16.0 / 256, 127)


def _log_softmax(shape, quant):
    mb = ModelBuilder()
    x = mb.input("x", list(shape), I8, quant=quant)
    y = mb.tensor("y", list(shape), I8, quant=GRID)
    mb.op("LOG_SOFTMAX", [x], [y])
    mb.output(y)
    return mb.finish()


def _rows(rng, rows, depth):
    """Random rows; row j's largest byte is j - 128 (rows 0..255 cycle through every byte)."""
    x = rng.integers(-128, 128, (rows, depth))
    top = (np.arange(rows) % 256) - 128
    x = np.minimum(x, top[:, None])
    x[np.arange(rows), rng.integers(0, depth, rows)] = top
    return x.astype(np.int8)


@pytest.mark.parametrize("seed,depth,lo,hi", [(1, 7, 0.005, 0.05), (2, 16, 0.02, 0.2), (3, 33, 0.1, 0.6),
                                              (4, 1, 0.01, 0.1), (5, 200, 0.003, 0.03)])
def test_log_softmax_bit_exact(gpu, seed, depth, lo, hi):
    """512 rows of `depth` (1: every output 127; 200: sums up to 200), random input grids (0.1 .. 0.6: most of
    the table underflows to 0)."""
    rng = np.random.default_rng(seed)
    model = _log_softmax((2, 256, depth), (float(rng.uniform(lo, hi)), int(rng.integers(-60, 60))))
    _exact(gpu, model, [_rows(rng, 512, depth).reshape(2, 256, depth)], "INT8_LOG_SOFTMAX")


def test_log_softmax_many_sums_bit_exact(gpu):
    """4096 rows of 64 narrow-range bytes: thousands of distinct sums through the logf emulation."""
    rng = np.random.default_rng(9)
    x = rng.integers(-20, 21, (4096, 64)).astype(np.int8)
    _exact(gpu, _log_softmax((4096, 64), (0.011, 3)), [x], "INT8_LOG_SOFTMAX")


def test_log_softmax_after_fc_stays_int8(gpu):
    """A classifier head (FULLY_CONNECTED -> LOG_SOFTMAX): the whole model int8."""
    rng = np.random.default_rng(5)
    mb = ModelBuilder()
    x = mb.input("x", [6, 24], I8, quant=(0.03, -5))
    ws = rng.uniform(0.002, 0.02, 10).astype(np.float32)
    w = mb.const("w", rng.integers(-127, 128, (10, 24)).astype(np.int8), quant=(ws, 0, 0))
    b = mb.const("b", rng.integers(-400, 400, 10).astype(np.int32), quant=(np.float32(0.03) * ws, 0, 0))
    h = mb.tensor("h", [6, 10], I8, quant=(0.05, 2))
    mb.op("FULLY_CONNECTED", [x, w, b], [h], fused_activation_function="NONE")
    y = mb.tensor("y", [6, 10], I8, quant=GRID)
    mb.op("LOG_SOFTMAX", [h], [y])
    mb.output(y)
    model = mb.finish()
    assert {"INT8_FULLY_CONNECTED", "INT8_LOG_SOFTMAX"} <= set(_ops(model))
    _exact(gpu, model, [rng.integers(-128, 128, (6, 24)).astype(np.int8)], "INT8_LOG_SOFTMAX")


def test_log_softmax_other_output_grid_is_refused():
    """LiteRT's Prepare fails an int8 LOG_SOFTMAX whose output is not on 16/256, 127: gpuc refuses it by name."""
    mb = ModelBuilder()
    x = mb.input("x", [2, 5], I8, quant=(0.1, 0))
    y = mb.tensor("y", [2, 5], I8, quant=(0.1, 127))
    mb.op("LOG_SOFTMAX", [x], [y])
    mb.output(y)
    model = mb.finish()
    with pytest.raises(Exception):
        run_litert(model, [np.zeros((2, 5), np.int8)])
    with pytest.raises(UnsupportedError, match=r"LOG_SOFTMAX \(operator #0\): int8 output 'y' .* 16/256"):
        gpuc.compile(model, cache=False)


def _l2(shape, quant, act="NONE"):
    mb = ModelBuilder()
    x = mb.input("x", list(shape), I8, quant=quant)
    y = mb.tensor("y", list(shape), I8, quant=(1.0 / 128, 0))
    mb.op("L2_NORMALIZATION", [x], [y], fused_activation_function=act)
    mb.output(y)
    return mb.finish()


@pytest.mark.parametrize("seed,depth", [(1, 1), (2, 3), (3, 16), (4, 100), (5, 9000)])
def test_l2_normalization_bit_exact(gpu, seed, depth):
    """Random rows of `depth` around random zero points: sums of squares from 0 and 1 (rows at the zero point,
    one step off it) to past 2^29 (9000: LiteRT's inverse square root first divides by 4)."""
    rng = np.random.default_rng(seed)
    zp = int(rng.integers(-100, 100))
    rows = max(8, 4096 // depth)
    x = rng.integers(-128, 128, (rows, depth))
    x[0] = zp
    x[1] = zp
    x[1, 0] = zp + 1
    x[2] = np.clip(zp + rng.integers(-3, 4, depth), -128, 127)
    x[3] = 127 if zp < 0 else -128
    model = _l2((rows, depth), (float(rng.uniform(0.01, 1.0)), zp))
    _exact(gpu, model, [x.astype(np.int8)], "INT8_L2_NORMALIZATION")


def test_l2_normalization_other_output_grid_is_refused():
    """LiteRT's Prepare fails an int8 L2_NORMALIZATION whose output is not on 1/128, 0: gpuc refuses it by name."""
    mb = ModelBuilder()
    x = mb.input("x", [2, 5], I8, quant=(0.1, 0))
    y = mb.tensor("y", [2, 5], I8, quant=(1.0 / 128, 3))
    mb.op("L2_NORMALIZATION", [x], [y], fused_activation_function="NONE")
    mb.output(y)
    model = mb.finish()
    with pytest.raises(Exception):
        run_litert(model, [np.zeros((2, 5), np.int8)])
    with pytest.raises(UnsupportedError, match=r"L2_NORMALIZATION \(operator #0\): int8 output 'y' .* 1/128"):
        gpuc.compile(model, cache=False)


@pytest.mark.parametrize("op,depth", [("SOFTMAX", 5000), ("SOFTMAX", 40000), ("LOG_SOFTMAX", 40000),
                                      ("L2_NORMALIZATION", 70000)])
def test_long_rows_take_row_statistics_bit_exact(gpu, op, depth):
    """Rows past int8_eltwise.ROW_STATS_FROM: each row's max and in-order sum once (in chunks of the row past
    step_chunks.LOOP_BUDGET), then the elements; LiteRT's bits. Every invocation walking its row twice was wrong
    on lavapipe past 32,767 and took O(L^2) work a row."""
    from gpuc.compiler.ops.int8_eltwise import ROW_STATS_FROM
    assert depth > ROW_STATS_FROM
    rng = np.random.default_rng(depth)
    q = (float(rng.uniform(0.02, 0.1)), int(rng.integers(-30, 30)))
    if op == "L2_NORMALIZATION":
        model = _l2((2, depth), q)
    elif op == "LOG_SOFTMAX":
        model = _log_softmax((2, depth), q)
    else:
        mb = ModelBuilder()
        x = mb.input("x", [2, depth], I8, quant=q)
        y = mb.tensor("y", [2, depth], I8, quant=(1.0 / 256, -128))
        mb.op("SOFTMAX", [x], [y], beta=1.0)
        mb.output(y)
        model = mb.finish()
    _exact(gpu, model, [_rows(rng, 2, depth)], "INT8_" + op)
