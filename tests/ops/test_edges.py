"""Edge semantics that must match LiteRT: +-inf in fused epilogues (LiteRT's default XNNPACK kernels
keep them, its builtin kernels clamp them to +-FLT_MAX: either), bool outputs that are constants,
saturating CAST folding."""
import numpy as np
import pytest

import gpuc
from helpers.builder import ModelBuilder
from helpers.litert import assert_equals_either, run_litert

pytest.importorskip("vulkan")


@pytest.mark.parametrize("op", ["ADD", "SUB", "MUL"])
def test_overflow_like_litert(op):
    mb = ModelBuilder()
    a, b = mb.input("a", [4]), mb.input("b", [4])
    y = mb.tensor("y", [4])
    mb.op(op, [a, b], [y])
    mb.output(y)
    m = mb.finish()
    x1 = np.array([3e38, -3e38, np.inf, np.nan], np.float32)
    x2 = np.array([3e38, -3e38, 1, 1], np.float32)
    with gpuc.load(gpuc.compile(m, cache=False)) as g:
        assert_equals_either(g.run([x1, x2]), m, [x1, x2])


def test_constant_bool_output_and_saturating_cast_fold():
    mb = ModelBuilder()
    x = mb.input("x", [3])
    c = mb.const("c", np.array([3e9, np.nan, -1.5, 7.9, 0.0], np.float32))
    ci = mb.tensor("ci", [5], "int32")
    mb.op("CAST", [c], [ci])
    cb = mb.tensor("cb", [5], "bool")
    mb.op("CAST", [c], [cb])
    y = mb.tensor("y", [3])
    mb.op("RELU", [x], [y])
    for t in (y, ci, cb):
        mb.output(t)
    m = mb.finish()
    xs = [np.array([-1, 0, 2], np.float32)]
    ref = run_litert(m, xs)
    with gpuc.load(gpuc.compile(m, cache=False)) as g:
        out = g.run(xs)
    for o, r in zip(out, ref):
        assert o.dtype == r.dtype
        np.testing.assert_array_equal(o, r)
