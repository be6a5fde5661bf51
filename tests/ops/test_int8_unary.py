"""Native int8 ABS, NEG, ELU and LOG ("INT8_ABS", "INT8_NEG", "INT8_ELU", "INT8_LOG": compiler/ops/int8_unary.py):
bit for bit LiteRT's builtin kernels (BUILTIN_WITHOUT_DEFAULT_DELEGATES) over every input byte on random grids
(ABS on equal scales too, ELU and LOG onto grids they overflow), and after an int8 conv (the model stays int8)."""
import numpy as np
import pytest

pytest.importorskip("vulkan")

from helpers.builder import ModelBuilder  # noqa: E402
from helpers.int8_exact import conv_prefix, exact as _exact, ops_after_passes as _ops, qin as _qin  # noqa: E402

I8 = "int8"
ALL = np.arange(-128, 128, dtype=np.int8).reshape(1, 256)


def _grid(rng, lo, hi):
    return float(np.exp(rng.uniform(np.log(lo), np.log(hi)))), int(rng.integers(-100, 100))


def _every_byte(gpu, op, qx, qy):
    """One-op model over all 256 input bytes on grids qx -> qy, against LiteRT byte for byte."""
    mb = ModelBuilder()
    x = mb.input("x", [1, 256], I8, quant=qx)
    y = mb.tensor("y", [1, 256], I8, quant=qy)
    mb.op(op, [x], [y])
    mb.output(y)
    _exact(gpu, mb.finish(), [ALL], "INT8_" + op)


@pytest.mark.parametrize("op", ["ABS", "NEG", "ELU", "LOG"])
@pytest.mark.parametrize("seed", range(6))
def test_unary_every_byte_bit_exact(gpu, op, seed):
    """Every input byte; seeds 0-3 random grids, 4 the output on a far finer grid (saturating; ABS: equal
    scales), 5 a far coarser one."""
    rng = np.random.default_rng([seed, len(op)])
    qx = _grid(rng, 0.002, 0.5)
    qy = _grid(rng, 0.002, 0.5)
    if seed == 4:
        qy = (qx[0], qy[1]) if op == "ABS" else (qx[0] / 50, qy[1])
    elif seed == 5:
        qy = (qx[0] * 30, qy[1])
    _every_byte(gpu, op, qx, qy)


@pytest.mark.parametrize("op", ["ABS", "ELU"])
def test_unary_after_conv_stays_int8(gpu, op):
    rng = np.random.default_rng(len(op))
    mb = ModelBuilder()
    h = conv_prefix(mb, rng, (1, 5, 5, 4))
    y = mb.tensor("y", [1, 5, 5, 6], I8, quant=(0.03, -20))
    mb.op(op, [h], [y])
    mb.output(y)
    model = mb.finish()
    assert {"INT8_CONV_2D", "INT8_" + op} <= set(_ops(model))
    _exact(gpu, model, [_qin(rng, (1, 5, 5, 4))], "INT8_" + op)


@pytest.mark.parametrize("op,qx", [("TANH", (0.006718071789636067, 119)), ("LOGISTIC", (0.0009246281231943652, 24)),
                                   ("TANH", (0.021995578752995616, -81)), ("TANH", (0.0081130818602762, -88))])
def test_lut_tables_follow_glibc(gpu, op, qx):
    """LOGISTIC / TANH grids on which numpy's float32 exp / tanh (the tables' former source) moved one entry off
    LiteRT's (glibc's expf / tanhf, compiler/ops/int8_libm.py): every byte exact."""
    mb = ModelBuilder()
    x = mb.input("x", [1, 256], I8, quant=qx)
    y = mb.tensor("y", [1, 256], I8, quant=(1 / 256, -128) if op == "LOGISTIC" else (1 / 128, 0))
    mb.op(op, [x], [y])
    mb.output(y)
    _exact(gpu, mb.finish(), [ALL], "INT8_" + op)


@pytest.mark.parametrize("op,qx,qy", [("LOG", (1.0, -128), (1e-9, 0)), ("ELU", (1.0, 0), (1e-8, 0))])
def test_lut_values_past_int32_saturate(gpu, op, qx, qy):
    """Table values past 2^31 on the output grid give 127, as LiteRT's build converts them."""
    _every_byte(gpu, op, qx, qy)
