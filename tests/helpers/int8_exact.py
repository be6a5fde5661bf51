"""Shared by the native int8 tests (tests/ops/test_int8_*.py): the ops a model has after the passes, the
bit-for-bit comparison against LiteRT's builtin kernels, random int8 inputs, the int_dot variant mode."""
from __future__ import annotations

import numpy as np
import pytest

from gpuc.compiler.frontend.importer import load_tflite
from gpuc.compiler.passes import run_passes
from helpers.litert import run_litert


def ops_after_passes(model) -> list:
    g = load_tflite(model).main
    run_passes(g)
    return [n.op for n in g.nodes]


def exact(gpu, model, inputs, form) -> None:
    """`model` runs its int8 op `form` and gives LiteRT's int8 outputs byte for byte."""
    assert form in ops_after_passes(model)
    ref = run_litert(model, inputs)
    out = gpu.run(model, inputs)
    for o, r in zip(out, ref):
        assert o.dtype == r.dtype == np.int8 and o.shape == r.shape
        bad = np.flatnonzero(o.reshape(-1) != r.reshape(-1))
        assert bad.size == 0, f"{bad.size} of {r.size} differ, first at {bad[0]}: {o.reshape(-1)[bad[0]]} vs {r.reshape(-1)[bad[0]]}"


def qin(rng, shape) -> np.ndarray:
    return rng.integers(-128, 128, size=shape).astype(np.int8)


def conv_prefix(mb, rng, shape) -> int:
    """An int8 input of `shape` (NHWC) through a per-channel int8 3x3 CONV_2D to 6 channels (grid 0.04, 6): the
    int8 activation the op under test reads, so that the whole model is int8.  Returns that tensor."""
    n, h, w, c = shape
    x = mb.input("x", list(shape), "int8", quant=(0.05, -1))
    ws = rng.uniform(0.002, 0.02, 6).astype(np.float32)
    wt = mb.const("w", rng.integers(-127, 128, (6, 3, 3, c)).astype(np.int8), quant=(ws, 0, 0))
    b = mb.const("b", rng.integers(-500, 500, 6).astype(np.int32), quant=(np.float32(0.05) * ws, 0, 0))
    y = mb.tensor("h", [n, h, w, 6], "int8", quant=(0.04, 6))
    mb.op("CONV_2D", [x, wt, b], [y], padding="SAME", stride_w=1, stride_h=1, fused_activation_function="NONE")
    return y


def int_dot_mode(gpu, monkeypatch, mode: str) -> None:
    """GPUC_VARIANTS int_dot=`mode` ("off": the plain int32 word loop; "force": the packed OpSDot variant, skipped
    on a device without VK_KHR_shader_integer_dot_product) for the rest of the test."""
    if mode == "force" and not getattr(gpu.device, "int_dot", False):
        pytest.skip("the device has no VK_KHR_shader_integer_dot_product")
    monkeypatch.setenv("GPUC_VARIANTS", f"int_dot={mode}")
