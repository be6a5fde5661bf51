"""PADV2 with a zero of either sign: LiteRT writes +0.0 (its kernels fill zero padding as zero bytes), so
gpuc does too on every path that writes the padding: the pad kernel, the copy regions of a folded
movement chain, a pad folded into a max pool, and the constant folder (the CPU op)."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("vulkan")

import gpuc  # noqa: E402
from helpers.builder import ModelBuilder  # noqa: E402
from helpers.litert import run_litert  # noqa: E402


def padv2(shape, pads, value, then=None, const_input=False):
    mb = ModelBuilder()
    x = (mb.const("xc", np.linspace(-1, 1, int(np.prod(shape)), dtype=np.float32).reshape(shape)) if const_input
         else mb.input("x", shape))
    out = [a + lo + hi for a, (lo, hi) in zip(shape, pads)]
    y = mb.tensor("y", out)
    mb.op("PADV2", [x, mb.const("p", np.array(pads, np.int32)), mb.const("v", np.array(value, np.float32))], [y])
    if then == "pool":
        z = mb.tensor("z", [out[0], out[1] - 1, out[2] - 1, out[3]])
        mb.op("MAX_POOL_2D", [y], [z], padding="VALID", stride_w=1, stride_h=1, filter_width=2, filter_height=2)
        y = z
    elif then == "add":                     # a consumer, so a constant PADV2 folds at compile time
        c = mb.input("c", out)
        z = mb.tensor("z", out)
        mb.op("ADD", [y, c], [z])
        y = z
    mb.output(y)
    return mb.finish()


CASES = [([1, 2, 3], [[0, 0], [1, 1], [0, 0]], None, False),     # a pad along a middle axis
         ([1, 2, 8], [[0, 0], [0, 0], [0, 4]], None, False),     # whole channel runs (wide copy words)
         ([1, 3, 3, 4], [[0, 0], [1, 1], [1, 1], [0, 0]], "pool", False),   # folded into the max pool
         ([2, 3], [[1, 0], [0, 2]], "add", True)]                 # folded by the constant folder


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
@pytest.mark.parametrize("value", [-0.0, 0.0, -1.5])
@pytest.mark.parametrize("shape,pads,then,const_input", CASES)
def test_padv2_zero_is_written_as_litert_writes_it(shape, pads, then, const_input, value, precision):
    model = padv2(shape, pads, value, then, const_input)
    rng = np.random.default_rng(0)
    inputs = [] if const_input else [-np.abs(rng.normal(size=shape)).astype(np.float32)]   # (negative: the
    if then == "add":                                                                 # max pool keeps the pad)
        out = [a + lo + hi for a, (lo, hi) in zip(shape, pads)]
        inputs.append(np.full(out, -0.0, np.float32))         # -0.0 + pad: +0.0 stays +0.0, -0.0 gives -0.0
    ref = run_litert(model, inputs)
    with gpuc.load(gpuc.compile(model, cache=False, precision=precision)) as m:
        got = [np.array(o) for o in m.run(inputs)]
    for g, r in zip(got, ref):
        assert np.array_equal(np.signbit(g), np.signbit(r))        # every zero's sign as LiteRT's
        if precision == "fp32":
            assert g.tobytes() == r.tobytes()
        else:                                                      # (values stored as float16 or not)
            np.testing.assert_allclose(g, r, rtol=1e-3, atol=0)
