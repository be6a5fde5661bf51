"""LOG_SOFTMAX and L2_NORMALIZATION (compiler/ops/normalize.py) against LiteRT: short rows (one
invocation per row) and long rows (one workgroup per row), ranks 1..4, large-magnitude inputs
(LOG_SOFTMAX's max subtraction), all-zero rows (L2's epsilon)."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("vulkan")

from helpers.op_support import gpu_reason  # noqa: E402
from helpers.ops import check, one_op  # noqa: E402

SHAPES = [(5,), (2, 5), (3, 4, 7), (2, 1, 2, 3), (2, 100), (1, 600)]


def _x(shape, seed, scale=3.0):
    return np.random.default_rng(seed).uniform(-scale, scale, shape).astype(np.float32)


@pytest.mark.parametrize("shape", SHAPES)
def test_log_softmax(gpu, shape):
    check(gpu, *one_op("LOG_SOFTMAX", [_x(shape, len(shape))], "float32"))


def test_log_softmax_large_values(gpu):
    x = _x((3, 9), 4, scale=80.0)
    x[1, :] = 1000.0                                  # equal large values: log(1/9) each
    check(gpu, *one_op("LOG_SOFTMAX", [x], "float32"))


@pytest.mark.parametrize("shape", SHAPES)
def test_l2_normalization(gpu, shape):
    check(gpu, *one_op("L2_NORMALIZATION", [_x(shape, 7 + len(shape))], "float32"))


def test_l2_normalization_zero_and_tiny_rows(gpu):
    x = _x((4, 6), 3)
    x[1] = 0.0                                        # norm 0 -> epsilon -> zeros
    x[2] = 1e-8                                       # norm below epsilon: x / 1e-6
    check(gpu, *one_op("L2_NORMALIZATION", [x], "float32"))
    x = _x((2, 130), 5)
    x[0] = 0.0
    check(gpu, *one_op("L2_NORMALIZATION", [x], "float32"))


def test_l2_normalization_relu_unsupported():
    model, _ = one_op("L2_NORMALIZATION", [_x((2, 3), 0)], "float32", fused_activation_function="RELU")
    assert "activation" in (gpu_reason(model) or "")


@pytest.mark.parametrize("op", ["LOG_SOFTMAX", "L2_NORMALIZATION"])
def test_non_finite_rows(gpu, op):
    """-inf / +inf entries and squared norms that overflow give LiteRT's -inf / NaN / 0."""
    x = np.array([[-np.inf, 1, 2], [np.inf, 1, 2], [0, 0, 0], [1e30, 1e30, 1]], np.float32)
    check(gpu, *one_op(op, [x], "float32"))
