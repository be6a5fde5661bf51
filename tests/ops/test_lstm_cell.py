"""LSTM (the non-sequence builtin; compiler/ops/lstm_basic.py) against LiteRT: plain, CIFG, peephole,
projection, clips, batch > 1; the variable state carries over between runs of one loaded model."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("vulkan")

from helpers.builder import ModelBuilder  # noqa: E402
from helpers.litert import litert_runs  # noqa: E402
from helpers.op_support import gpu_reason  # noqa: E402


def lstm_step_model(b=2, i=5, c=6, o=None, cifg=False, peephole=False, proj=False, act=4, cell_clip=0.0,
                    proj_clip=0.0, seed=0, kernel_type=0):
    rng = np.random.default_rng(seed)
    o = o if o is not None else (c if not proj else c - 2)
    w = lambda *s: rng.uniform(-0.5, 0.5, s).astype(np.float32)  # noqa: E731
    mb = ModelBuilder()
    x = mb.input("x", (b, i))
    ins = [x]
    ins += [-1 if (cifg and g == 0) else mb.const(f"wx{g}", w(c, i)) for g in range(4)]
    ins += [-1 if (cifg and g == 0) else mb.const(f"wh{g}", w(c, o)) for g in range(4)]
    ins += [-1 if (not peephole or (cifg and g == 0)) else mb.const(f"p{g}", w(c)) for g in range(3)]
    ins += [-1 if (cifg and g == 0) else mb.const(f"b{g}", w(c)) for g in range(4)]
    ins += [mb.const("pw", w(o, c)) if proj else -1, mb.const("pb", w(o)) if proj else -1]
    h0 = mb.tensor("h_state", (b, o))
    c0 = mb.tensor("c_state", (b, c))
    for s in (h0, c0):
        mb.tensors[s]["is_variable"] = True
    ins += [h0, c0]
    y = mb.tensor("y", (b, o))
    mb.op("LSTM", ins, [y], version=1, fused_activation_function=act, cell_clip=cell_clip, proj_clip=proj_clip,
          kernel_type=kernel_type)
    mb.output(y)
    return mb.finish()


CASES = {
    "plain": dict(),
    "batch1": dict(b=1),
    "cifg": dict(cifg=True),
    "peephole": dict(peephole=True),
    "projection": dict(proj=True, c=8, o=5),
    "clips": dict(peephole=True, proj=True, c=8, o=4, cell_clip=0.3, proj_clip=0.2),
    "relu6": dict(act=3),
}


@pytest.mark.parametrize("name", list(CASES))
def test_lstm_step_stream(gpu, name):
    """Three runs of one loaded model: each step's state comes from the previous run, as in LiteRT."""
    model = lstm_step_model(**CASES[name])
    b, i = CASES[name].get("b", 2), 5
    xs = [np.random.default_rng(10 + s).uniform(-1, 1, (b, i)).astype(np.float32) for s in range(3)]
    refs = litert_runs(model, xs)
    m = gpu.load(model)
    try:
        for x, ref in zip(xs, refs):
            (got,) = m.run([x.copy()])
            assert got.shape == ref.shape
            np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-5)
    finally:
        m.close()


def test_lstm_basic_kernel_rejected():
    assert "kernel_type" in (gpu_reason(lstm_step_model(kernel_type=1)) or "")
