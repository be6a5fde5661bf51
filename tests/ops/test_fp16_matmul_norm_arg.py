"""`--precision fp16` through the issue-3 templates (batch_matmul incl. CONV_3D, row_norm, arg_reduce carry
`// @storage16`): their intermediate tensors are stored as float16 and the results stay within
the fp16 tolerance (helpers/precision.py) of LiteRT's float32 kernels."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("vulkan")

from helpers.builder import ModelBuilder  # noqa: E402
from helpers.litert import run_litert  # noqa: E402
from helpers.precision import assert_close16, dtype_of, run16  # noqa: E402


def test_fp16_conv3d_chain(gpu):
    rng = np.random.default_rng(3)
    mb = ModelBuilder()
    x = mb.input("x", [1, 3, 4, 4, 2])
    c = mb.tensor("c", [1, 3, 4, 4, 8])
    y = mb.tensor("y", [1, 2, 2, 2, 3])
    conv = dict(padding="SAME", stride_d=1, stride_h=1, stride_w=1)
    mb.op("CONV_3D", [x, mb.const("w1", rng.uniform(-1, 1, (2, 3, 3, 2, 8)).astype(np.float32)),
                      mb.const("b1", rng.uniform(-1, 1, 8).astype(np.float32))], [c], fused_activation_function="RELU6",
          **conv)
    mb.op("CONV_3D", [c, mb.const("w2", rng.uniform(-1, 1, (3, 2, 2, 8, 3)).astype(np.float32))], [y],
          **dict(conv, stride_d=2, stride_h=2, stride_w=2))
    mb.output(y)
    model = mb.finish()
    xs = [rng.uniform(-1, 1, (1, 3, 4, 4, 2)).astype(np.float32)]
    outs, b = run16(gpu, model, xs)
    assert dtype_of(b, "c") == "float16"
    assert_close16(outs, run_litert(model, xs))


def test_fp16_attention_like_chain(gpu):
    """L2_NORMALIZATION -> BATCH_MATMUL (n @ n^T) -> LOG_SOFTMAX and ARG_MAX."""
    rng = np.random.default_rng(4)
    mb = ModelBuilder()
    x = mb.input("x", [2, 5, 8])
    n = mb.tensor("n", [2, 5, 8])
    s = mb.tensor("s", [2, 5, 5])
    y = mb.tensor("y", [2, 5, 5])
    i = mb.tensor("i", [2, 5], "int32")
    mb.op("L2_NORMALIZATION", [x], [n])
    mb.op("BATCH_MATMUL", [n, n], [s], adj_y=True)
    mb.op("LOG_SOFTMAX", [s], [y])
    mb.op("ARG_MAX", [s, mb.const("axis", np.array([2], np.int32))], [i], output_type="INT32")
    mb.output(y)
    mb.output(i)
    model = mb.finish()
    xs = [rng.uniform(-1, 1, (2, 5, 8)).astype(np.float32)]
    (got_y, got_i), b = run16(gpu, model, xs)
    assert dtype_of(b, "n") == "float16" and dtype_of(b, "s") == "float16"
    ref_y, ref_i = run_litert(model, xs)
    assert_close16([got_y], [ref_y])
    # fp16 rounding of s may flip near-ties: the chosen index must hold the row's maximum to fp16 precision
    ref_s = np.exp(ref_y)
    picked = np.take_along_axis(ref_s, got_i[..., None].astype(np.int64), -1)[..., 0]
    assert np.all(picked >= ref_s.max(-1) * (1 - 2e-2))
