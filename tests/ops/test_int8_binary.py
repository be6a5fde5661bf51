"""Native int8 SQUARED_DIFFERENCE and PRELU ("INT8_SQUARED_DIFFERENCE", "INT8_PRELU": compiler/ops/int8_binary.py):
bit for bit LiteRT's builtin kernels (BUILTIN_WITHOUT_DEFAULT_DELEGATES) over every pair of input bytes on random
grids, broadcast operands and constant alphas; an int8 SQUARED_DIFFERENCE whose output multiplier LiteRT's
kernel aborts on is refused."""
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("vulkan")

import gpuc  # noqa: E402
from gpuc.errors import UnsupportedError  # noqa: E402
from helpers.builder import ModelBuilder  # noqa: E402
from helpers.int8_exact import conv_prefix, exact as _exact, ops_after_passes as _ops, qin as _qin  # noqa: E402

I8 = "int8"
ALL = np.arange(-128, 128, dtype=np.int8)


def _q(rng, lo=0.005, hi=0.1):
    return float(rng.uniform(lo, hi)), int(rng.integers(-40, 40))


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_squared_difference_every_byte_pair_bit_exact(gpu, seed):
    """[256, 1] against [1, 256] (numpy broadcasting): every pair of input bytes; equal input grids in one case."""
    rng = np.random.default_rng(seed)
    qa = _q(rng)
    qb = qa if seed == 4 else _q(rng)
    mb = ModelBuilder()
    a = mb.input("a", [256, 1], I8, quant=qa)
    b = mb.input("b", [1, 256], I8, quant=qb)
    y = mb.tensor("y", [256, 256], I8, quant=(float(rng.uniform(0.01, 0.5)), int(rng.integers(-128, -60))))
    mb.op("SQUARED_DIFFERENCE", [a, b], [y])
    mb.output(y)
    _exact(gpu, mb.finish(), [ALL.reshape(256, 1), ALL.reshape(1, 256)], "INT8_SQUARED_DIFFERENCE")


@pytest.mark.parametrize("bshape", [(2, 5, 6, 8), (8,), (1, 5, 1, 8)])
def test_squared_difference_after_int8_mean_bit_exact(gpu, bshape):
    """x - mean(x) squared, as a layer norm's variance writes it (b: the same shape, a trailing-dims operand, a
    general broadcast), after an int8 conv-free chain: the model stays int8."""
    rng = np.random.default_rng(len(bshape))
    mb = ModelBuilder()
    a = mb.input("a", [2, 5, 6, 8], I8, quant=_q(rng))
    b = mb.input("b", list(bshape), I8, quant=_q(rng))
    y = mb.tensor("y", [2, 5, 6, 8], I8, quant=(0.02, -128))
    mb.op("SQUARED_DIFFERENCE", [a, b], [y])
    m = mb.tensor("m", [2, 1, 1, 8], I8, quant=(0.02, -128))
    mb.op("MEAN", [y, mb.const("ax", np.array([1, 2], np.int32))], [m], keep_dims=True)
    mb.output(m)
    mb.output(y)
    model = mb.finish()
    assert {"INT8_SQUARED_DIFFERENCE", "INT8_MEAN"} <= set(_ops(model))
    _exact(gpu, model, [_qin(rng, (2, 5, 6, 8)), _qin(rng, bshape)], "INT8_SQUARED_DIFFERENCE")


_ABORT = """
import sys; sys.path.insert(0, {tests!r})
import numpy as np
from helpers.litert import run_litert
run_litert(bytes.fromhex({model!r}), [np.ones(4, np.int8), np.zeros(4, np.int8)])
"""


def test_squared_difference_output_multiplier_above_one_is_refused():
    """An output scale below (2 * max input scale)^2 / 2^14: LiteRT's kernel aborts the process (a CHECK in
    QuantizeMultiplierSmallerThanOneExp); gpuc refuses the model, naming the op."""
    mb = ModelBuilder()
    a = mb.input("a", [4], I8, quant=(0.1, 0))
    b = mb.input("b", [4], I8, quant=(0.1, 0))
    y = mb.tensor("y", [4], I8, quant=(1e-6, 0))
    mb.op("SQUARED_DIFFERENCE", [a, b], [y])
    mb.output(y)
    model = mb.finish()
    tests = str(Path(__file__).resolve().parents[1])
    r = subprocess.run([sys.executable, "-c", _ABORT.format(tests=tests, model=bytes(model).hex())],
                       capture_output=True, timeout=120)
    assert r.returncode != 0
    with pytest.raises(UnsupportedError, match=r"SQUARED_DIFFERENCE \(operator #0\): output scale .* aborts"):
        gpuc.compile(model, cache=False)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_prelu_every_byte_pair_bit_exact(gpu, seed):
    """Input byte x alpha byte, all 65536 pairs, alpha an activation of the input's shape."""
    rng = np.random.default_rng(seed)
    mb = ModelBuilder()
    x = mb.input("x", [256, 256], I8, quant=_q(rng))
    al = mb.input("al", [256, 256], I8, quant=_q(rng, 0.001, 0.05))
    y = mb.tensor("y", [256, 256], I8, quant=_q(rng))
    mb.op("PRELU", [x, al], [y])
    mb.output(y)
    xs = np.broadcast_to(ALL.reshape(256, 1), (256, 256)).copy()
    als = np.broadcast_to(ALL.reshape(1, 256), (256, 256)).copy()
    _exact(gpu, mb.finish(), [xs, als], "INT8_PRELU")


@pytest.mark.parametrize("ashape", [(1, 1, 6), (6,), (5, 1, 6)])
def test_prelu_with_constant_alpha_after_conv_bit_exact(gpu, ashape):
    """conv -> PRELU with a constant int8 alpha (shared over H and W, as converters write it): the whole model int8,
    the alpha read as its bytes."""
    rng = np.random.default_rng(len(ashape))
    mb = ModelBuilder()
    h = conv_prefix(mb, rng, (2, 5, 4, 3))
    al = mb.const("alpha", _qin(rng, ashape), quant=(0.002, -3))
    y = mb.tensor("y", [2, 5, 4, 6], I8, quant=(0.03, 10))
    mb.op("PRELU", [h, al], [y])
    mb.output(y)
    model = mb.finish()
    assert {"INT8_CONV_2D", "INT8_PRELU"} <= set(_ops(model))
    _exact(gpu, model, [_qin(rng, (2, 5, 4, 3))], "INT8_PRELU")
