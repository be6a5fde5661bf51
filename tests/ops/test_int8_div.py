"""Native int8 DIV ("INT8_DIV": compiler/ops/int8_div.py): bit for bit LiteRT's builtin kernel
(BUILTIN_WITHOUT_DEFAULT_DELEGATES) over every pair of a dividend byte and a divisor byte (bar the divisor's zero
point, on which LiteRT fails the invocation) on random grids, with fused activations, broadcast and constant
divisors; a constant divisor holding its zero point is refused by name."""
import numpy as np
import pytest

pytest.importorskip("vulkan")

import gpuc  # noqa: E402
from gpuc.errors import UnsupportedError  # noqa: E402
from helpers.builder import ModelBuilder  # noqa: E402
from helpers.int8_exact import conv_prefix, exact as _exact, ops_after_passes as _ops, qin as _qin  # noqa: E402

I8 = "int8"


def _grid(rng, lo, hi):
    return float(np.exp(rng.uniform(np.log(lo), np.log(hi)))), int(rng.integers(-128, 128))


@pytest.mark.parametrize("seed,act", [(1, "NONE"), (2, "NONE"), (3, "RELU"), (4, "RELU6"), (5, "NONE")])
def test_div_every_byte_pair_bit_exact(gpu, seed, act):
    """[256, 1] / [1, 255] broadcast: every dividend byte by every divisor byte but its zero point (seed 5: the
    divisor first, so the form swaps its table)."""
    rng = np.random.default_rng(seed)
    q1, q2, qo = _grid(rng, 0.001, 1.0), _grid(rng, 0.001, 1.0), _grid(rng, 0.001, 10.0)
    divisors = np.array([v for v in range(-128, 128) if v != q2[1]], np.int8).reshape(1, 255)
    mb = ModelBuilder()
    if seed == 5:
        b = mb.input("b", [1, 255], I8, quant=q2)
        a = mb.input("a", [256, 1], I8, quant=q1)
        feeds = [divisors, np.arange(-128, 128, dtype=np.int8).reshape(256, 1)]
    else:
        a = mb.input("a", [256, 1], I8, quant=q1)
        b = mb.input("b", [1, 255], I8, quant=q2)
        feeds = [np.arange(-128, 128, dtype=np.int8).reshape(256, 1), divisors]
    y = mb.tensor("y", [256, 255], I8, quant=qo)
    mb.op("DIV", [a, b], [y], fused_activation_function=act)
    mb.output(y)
    _exact(gpu, mb.finish(), feeds, "INT8_DIV")


def test_div_by_constant_after_conv_stays_int8(gpu):
    """conv -> DIV by a constant int8 per-channel divisor: the whole model int8, the divisor read as its bytes."""
    rng = np.random.default_rng(7)
    mb = ModelBuilder()
    h = conv_prefix(mb, rng, (1, 5, 5, 4))
    d = mb.const("d", np.array([20, -30, 50, 100, -127, 7], np.int8), quant=(0.02, 3))
    y = mb.tensor("y", [1, 5, 5, 6], I8, quant=(0.05, -4))
    mb.op("DIV", [h, d], [y], fused_activation_function="NONE")
    mb.output(y)
    model = mb.finish()
    assert {"INT8_CONV_2D", "INT8_DIV"} <= set(_ops(model))
    _exact(gpu, model, [_qin(rng, (1, 5, 5, 4))], "INT8_DIV")


def test_div_by_constant_holding_its_zero_point_is_refused():
    mb = ModelBuilder()
    a = mb.input("a", [4], I8, quant=(0.1, 0))
    d = mb.const("d", np.array([5, 3, 9, 2], np.int8), quant=(0.1, 3))
    y = mb.tensor("y", [4], I8, quant=(0.1, 0))
    mb.op("DIV", [a, d], [y], fused_activation_function="NONE")
    mb.output(y)
    with pytest.raises(UnsupportedError, match=r"DIV \(operator #0\): constant int8 divisor 'd' holds its zero point"):
        gpuc.compile(mb.finish(), cache=False)
