"""Seeded random configurations of BATCH_MATMUL, CONV_3D, CUMSUM, ARG_MAX / ARG_MIN, LOG_SOFTMAX and
L2_NORMALIZATION, differential against LiteRT: where LiteRT runs the model, gpuc must compile it for
the GPU and match; where LiteRT rejects it, gpuc must not put it on the GPU either."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("vulkan")

from helpers.litert import run_litert  # noqa: E402
from helpers.op_support import gpu_reason  # noqa: E402
from helpers.ops import Const, assert_matches, one_op  # noqa: E402

OPS = ["BATCH_MATMUL", "CONV_3D", "CUMSUM", "ARG_MAX", "ARG_MIN", "LOG_SOFTMAX", "L2_NORMALIZATION"]


def _dims(rng, n, lo=1, hi=5):
    return [int(rng.integers(lo, hi)) for _ in range(n)]


def _batch_matmul(rng):
    ra, rb = int(rng.integers(2, 6)), int(rng.integers(2, 6))
    m, k, n = _dims(rng, 3, 1, 9)
    ax, ay = bool(rng.integers(2)), bool(rng.integers(2))
    ba, bb = _dims(rng, ra - 2, 1, 3), _dims(rng, rb - 2, 1, 3)
    a = rng.uniform(-1, 1, ba + ([k, m] if ax else [m, k])).astype(np.float32)
    b = rng.uniform(-1, 1, bb + ([n, k] if ay else [k, n])).astype(np.float32)
    try:
        batch = list(np.broadcast_shapes(tuple(ba), tuple(bb)))
    except ValueError:
        batch = ba
    return one_op("BATCH_MATMUL", [a, Const(b) if rng.integers(2) else b], "float32", out_shape=batch + [m, n],
                  adj_x=ax, adj_y=ay)


def _conv3d(rng):
    x = rng.uniform(-1, 1, _dims(rng, 1, 1, 3) + _dims(rng, 3, 1, 7) + _dims(rng, 1, 1, 5)).astype(np.float32)
    k, st, dl = _dims(rng, 3, 1, 4), _dims(rng, 3, 1, 3), _dims(rng, 3, 1, 3)
    co, same = int(rng.integers(1, 9)), bool(rng.integers(2))
    out = [x.shape[0]]
    for i in range(3):
        s = x.shape[1 + i]
        out.append(-(-s // st[i]) if same else max((s - (k[i] - 1) * dl[i] - 1) // st[i] + 1, 0))
    w = rng.uniform(-1, 1, k + [x.shape[4], co]).astype(np.float32)
    ins = [x, Const(w)] + ([Const(rng.uniform(-1, 1, co).astype(np.float32))] if rng.integers(2) else [])
    act = str(rng.choice(["NONE", "RELU", "RELU6", "TANH", "RELU_N1_TO_1"]))
    return one_op("CONV_3D", ins, "float32", out_shape=out + [co], padding="SAME" if same else "VALID",
                  stride_d=st[0], stride_h=st[1], stride_w=st[2], dilation_dfactor=dl[0], dilation_hfactor=dl[1],
                  dilation_wfactor=dl[2], fused_activation_function=act)


def _axis_op(rng, op):
    r = int(rng.integers(1, 5))
    shape = _dims(rng, r, 1, 6)
    dt = str(rng.choice(["float32", "int32"]))
    x = (rng.integers(-4, 4, shape) if dt == "int32" else rng.uniform(-3, 3, shape)).astype(dt)
    axis = int(rng.integers(-r, r))
    if op == "CUMSUM":
        return one_op(op, [x, Const(np.array(axis, np.int32))], dt, exclusive=bool(rng.integers(2)),
                      reverse=bool(rng.integers(2)))
    if op in ("ARG_MAX", "ARG_MIN"):
        od = str(rng.choice(["int32", "int64"]))
        s = list(shape)
        del s[axis % r]
        return one_op(op, [x, Const(np.array([axis], np.int32))], od, out_shape=s, output_type=od.upper())
    return one_op(op, [x.astype(np.float32)], "float32")


@pytest.mark.parametrize("seed", range(60))
def test_random_config(gpu, seed):
    rng = np.random.default_rng(1000 + seed)
    op = OPS[seed % len(OPS)]
    model, feeds = (_batch_matmul(rng) if op == "BATCH_MATMUL" else _conv3d(rng) if op == "CONV_3D"
                    else _axis_op(rng, op))
    try:
        refs = run_litert(model, [f.copy() for f in feeds])
    except (RuntimeError, ValueError):
        assert gpu_reason(model) is not None, f"{op}: LiteRT rejects the model, gpuc would run it on the GPU"
        return
    assert gpu_reason(model) is None, f"{op}: {gpu_reason(model)}"
    assert_matches(gpu.run(model, [f.copy() for f in feeds]), refs)
