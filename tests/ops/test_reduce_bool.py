"""REDUCE_ALL / REDUCE_ANY of bool tensors on the GPU (compiler/ops/reduce_bool.py) against LiteRT."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("vulkan")

import gpuc  # noqa: E402
from gpuc.runtime.bundle import read_bundle  # noqa: E402
from helpers.builder import ModelBuilder  # noqa: E402
from helpers.litert import run_litert  # noqa: E402


@pytest.mark.parametrize("op", ["REDUCE_ALL", "REDUCE_ANY"])
@pytest.mark.parametrize("shape,axes,keep", [([3, 5, 2], [1], False), ([2, 3, 4], [0, 2], True), ([7, 1], [1], False)])
def test_against_litert(op, shape, axes, keep):
    mb = ModelBuilder()
    x = mb.input("x", shape, "float32")
    b = mb.tensor("b", shape, "bool")
    mb.op("GREATER", [x, mb.const("t", np.array(0.0 if op == "REDUCE_ANY" else -0.9, np.float32))], [b])
    out_shape = [1 if i in axes else d for i, d in enumerate(shape)] if keep else \
        [d for i, d in enumerate(shape) if i not in axes]
    y = mb.tensor("y", out_shape, "bool")
    mb.op(op, [b, mb.const("axes", np.array(axes, np.int32))], [y], keep_dims=keep)
    mb.output(y)
    model = mb.finish()
    bundle = gpuc.compile(model)
    assert read_bundle(bundle).stats["cpu_nodes"] == 0
    rng = np.random.default_rng(len(shape))
    with gpuc.load(bundle) as m:
        for _ in range(3):
            xv = rng.uniform(-1, 1, shape).astype(np.float32)
            xv[rng.uniform(size=shape) < 0.5] = 0.5 if op == "REDUCE_ALL" else -0.5
            assert np.array_equal(m.run([xv])[0], run_litert(model, [xv])[0])
