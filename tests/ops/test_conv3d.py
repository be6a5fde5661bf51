"""CONV_3D (compiler/ops/conv3d.py) against LiteRT: strides, dilations, SAME / VALID, with and without
bias, fused activations (TANH is left unclamped, like LiteRT), constant and runtime filters, output
channels in groups of 4 (vec4 path) or not."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("vulkan")

from helpers.op_support import gpu_reason  # noqa: E402
from helpers.ops import Const, check, one_op  # noqa: E402


def _out(size, k, s, d, same):
    num = size + s - ((k - 1) * d + 1)
    return -(-size // s) if same else (num // s if num >= 0 else -(-num // s))


def _conv3d(x_shape, f_shape, strides=(1, 1, 1), dil=(1, 1, 1), same=True, bias=True, act="NONE",
            const_w=True, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, x_shape).astype(np.float32)
    w = rng.uniform(-1, 1, f_shape).astype(np.float32)
    ins = [x, Const(w) if const_w else w]
    if bias:
        ins.append(Const(rng.uniform(-1, 1, f_shape[4]).astype(np.float32)))
    out = [x_shape[0]] + [_out(x_shape[1 + i], f_shape[i], strides[i], dil[i], same) for i in range(3)] + [f_shape[4]]
    return one_op("CONV_3D", ins, "float32", out_shape=out, padding="SAME" if same else "VALID",
                  stride_d=strides[0], stride_h=strides[1], stride_w=strides[2], dilation_dfactor=dil[0],
                  dilation_hfactor=dil[1], dilation_wfactor=dil[2], fused_activation_function=act)


@pytest.mark.parametrize("same", [True, False])
@pytest.mark.parametrize("cfg", [
    dict(x_shape=(1, 4, 5, 6, 3), f_shape=(2, 3, 3, 3, 4)),
    dict(x_shape=(2, 5, 6, 4, 2), f_shape=(3, 2, 3, 2, 5), strides=(2, 1, 2)),
    dict(x_shape=(1, 6, 7, 7, 3), f_shape=(2, 3, 2, 3, 2), dil=(2, 2, 3)),
    dict(x_shape=(1, 3, 4, 4, 8), f_shape=(1, 1, 1, 8, 6), bias=False),
    dict(x_shape=(1, 5, 5, 5, 2), f_shape=(3, 3, 3, 2, 3), strides=(2, 2, 2), act="RELU6"),
    dict(x_shape=(2, 4, 9, 9, 5), f_shape=(3, 3, 3, 5, 70), strides=(1, 2, 1), act="RELU"),   # many GEMM tiles
])
def test_conv3d(gpu, cfg, same):
    check(gpu, *_conv3d(same=same, **cfg))


@pytest.mark.parametrize("co", [3, 4])
@pytest.mark.parametrize("act", ["RELU", "RELU_N1_TO_1", "TANH"])
def test_conv3d_activations(gpu, act, co):
    check(gpu, *_conv3d((1, 3, 4, 5, 2), (2, 2, 2, 2, co), act=act, seed=2))


@pytest.mark.parametrize("co", [3, 8])
def test_conv3d_runtime_filter(gpu, co):
    check(gpu, *_conv3d((1, 3, 4, 4, 2), (2, 2, 3, 2, co), const_w=False, bias=True, act="RELU", seed=5))


def test_conv3d_bad_filter_rejected():
    model, _ = one_op("CONV_3D", [np.zeros((1, 3, 3, 3, 2), np.float32), Const(np.zeros((1, 1, 1, 3, 4), np.float32))],
                      "float32", out_shape=[1, 3, 3, 3, 4], padding="SAME", stride_d=1, stride_h=1, stride_w=1)
    assert "filter" in (gpu_reason(model) or "")


def test_conv3d_valid_empty_output(gpu):
    """VALID with a filter deeper than the input: LiteRT's C division gives an empty output."""
    check(gpu, *_conv3d((1, 1, 4, 4, 2), (4, 1, 1, 2, 3), strides=(2, 1, 1), same=False))
