"""fuse_depthwise_pointwise (passes/dw_pointwise.py, ops/dw_pointwise.py, gemm.comp DWA): a depthwise
conv read only by a pointwise conv runs inside that conv's GEMM.  The fusion fires on tiny models in each
legal variation (strides, VALID / SAME, dilation, a folded PAD, bias or none, its activation, 4-aligned
channels or not, the pointwise conv's residual ADD, batch-native bundles), matching LiteRT within 1e-5
and the unfused program within fp32 rounding; and it is refused (two convs stay) when a precondition
fails."""
import numpy as np
import pytest

pytest.importorskip("vulkan")

import gpuc  # noqa: E402
from gpuc.compiler.frontend.importer import load_tflite  # noqa: E402
from gpuc.compiler.passes import run_passes  # noqa: E402
from gpuc.runtime.bundle import read_bundle  # noqa: E402
from helpers.builder import ModelBuilder  # noqa: E402
from helpers.litert import run_litert  # noqa: E402

PASS = "fuse_depthwise_pointwise"
RNG = np.random.default_rng(21)


def rand(*shape, scale=1.0):
    return (RNG.uniform(-1, 1, shape) * scale).astype(np.float32)


def dw_pw(shape, co, *, k=3, stride=1, dil=1, padding="SAME", dw_bias=True, pw_bias=True, dw_act="RELU6",
          pw_act="NONE", residual=False, pad=None, mult=1, pw_k=1, pw_stride=1, dw_out=False, dw_extra=False):
    n, h, w, c = shape
    mb = ModelBuilder()
    x = mb.input("x", shape)
    src, hh, ww = x, h, w
    if pad is not None:                  # an explicit PAD (fold_pad folds it into the depthwise conv)
        hh, ww = h + pad[0] + pad[1], w + pad[2] + pad[3]
        src = mb.tensor("xp", [n, hh, ww, c])
        mb.op("PAD", [x, mb.const("pads", np.array([[0, 0], pad[:2], pad[2:], [0, 0]], np.int32))], [src])
    ek = (k - 1) * dil + 1
    if padding == "SAME":
        oh, ow = -(-hh // stride), -(-ww // stride)
    else:
        oh, ow = (hh - ek) // stride + 1, (ww - ek) // stride + 1
    cm = c * mult
    mid = mb.tensor("mid", [n, oh, ow, cm])
    dw_in = [src, mb.const("dw_w", rand(1, k, k, cm)), mb.const("dw_b", rand(cm)) if dw_bias else -1]
    mb.op("DEPTHWISE_CONV_2D", dw_in, [mid], padding=padding, stride_h=stride, stride_w=stride,
          dilation_hfactor=dil, dilation_wfactor=dil, depth_multiplier=mult, fused_activation_function=dw_act)
    ph, pw_ = -(-oh // pw_stride), -(-ow // pw_stride)
    y = mb.tensor("y", [n, ph, pw_, co])
    pw_in = [mid, mb.const("pw_w", rand(co, pw_k, pw_k, cm, scale=0.5)), mb.const("pw_b", rand(co)) if pw_bias else -1]
    mb.op("CONV_2D", pw_in, [y], padding="SAME", stride_h=pw_stride, stride_w=pw_stride,
          fused_activation_function=pw_act)
    feeds = [rand(*shape, scale=2.0)]
    if residual:
        r = mb.input("r", [n, ph, pw_, co])
        z = mb.tensor("z", [n, ph, pw_, co])
        mb.op("ADD", [y, r], [z])
        mb.output(z)
        feeds.append(rand(n, ph, pw_, co))
    else:
        mb.output(y)
    if dw_out:
        mb.output(mid)
    if dw_extra:                         # a second reader of the depthwise result
        e = mb.tensor("e", [n, oh, ow, cm])
        mb.op("RELU", [mid], [e])
        mb.output(e)
    return mb.finish(), feeds


def ops_after_passes(model, **kw):
    g = load_tflite(model).main
    run_passes(g, **kw)
    return [n.op for n in g.nodes]


def run(model, feeds, **opts):
    b = gpuc.compile(model, cache=False, **opts)
    with gpuc.load(b) as m:
        return [np.array(o) for o in m.run(feeds)], len(read_bundle(b).dispatches)


FIRES = {
    "3x3-same-relu6-c8": dict(shape=[1, 9, 10, 8], co=12),
    "3x3-s2-valid-c6-nobias": dict(shape=[1, 11, 9, 6], co=5, stride=2, padding="VALID", dw_bias=False,
                                   dw_act="NONE"),
    "5x5-dil2-relu-c12": dict(shape=[1, 12, 12, 12], co=16, k=5, dil=2, dw_act="RELU", pw_act="RELU6"),
    "residual-n2": dict(shape=[2, 7, 7, 16], co=16, residual=True),
    "no-pointwise-bias": dict(shape=[1, 7, 6, 8], co=4, pw_bias=False),
    "folded-pad-s2": dict(shape=[1, 10, 10, 4], co=8, stride=2, padding="VALID", pad=(0, 1, 0, 1)),
    "c3-7x7": dict(shape=[1, 8, 9, 3], co=7, k=7),
}


@pytest.mark.parametrize("case", FIRES, ids=list(FIRES))
def test_fires_and_matches(case):
    model, feeds = dw_pw(**FIRES[case])
    ops = ops_after_passes(model)
    assert "DEPTHWISE_POINTWISE" in ops and "DEPTHWISE_CONV_2D" not in ops, ops
    on, d_on = run(model, feeds)
    off, d_off = run(model, feeds, disable_passes=[PASS])
    assert d_on == d_off - 1
    # (LiteRT's convs want a bias: without one the unfused gpuc program is the reference)
    biased = FIRES[case].get("dw_bias", True) and FIRES[case].get("pw_bias", True)
    ref = run_litert(model, [f.copy() for f in feeds]) if biased else off
    for o, u, r in zip(on, off, ref):
        scale = max(1.0, float(np.abs(r).max()))
        np.testing.assert_allclose(o, r, rtol=1e-5, atol=1e-5 * scale)
        np.testing.assert_allclose(o, u, rtol=1e-6, atol=1e-6 * scale)


def test_batch_native():
    model, feeds = dw_pw([1, 9, 9, 8], 12, stride=2)
    b = gpuc.compile(model, cache=False, max_batch=4)
    x = rand(3, 9, 9, 8, scale=2.0)
    with gpuc.load(b) as m:
        out = m.run([x])[0]
    assert "DEPTHWISE_POINTWISE" in [d.label.split(" ")[0] for d in read_bundle(b).dispatches]
    with gpuc.load(gpuc.compile(model, cache=False)) as one:
        for i in range(3):
            np.testing.assert_allclose(out[i:i + 1], one.run([x[i:i + 1]])[0], rtol=1e-6, atol=1e-6)


REFUSED = {
    "dw-output-is-model-output": dict(dw_out=True),
    "dw-output-read-twice": dict(dw_extra=True),
    "depth-multiplier-2": dict(mult=2),
    "pointwise-stride-2": dict(pw_stride=2),
    "not-pointwise-3x3": dict(pw_k=3),
}


@pytest.mark.parametrize("case", REFUSED, ids=list(REFUSED))
def test_refused(case):
    model, feeds = dw_pw([1, 8, 8, 8], 8, **REFUSED[case])
    ops = ops_after_passes(model)
    assert "DEPTHWISE_POINTWISE" not in ops and "DEPTHWISE_CONV_2D" in ops, ops
    outs, _ = run(model, feeds)
    for o, r in zip(outs, run_litert(model, [f.copy() for f in feeds])):
        np.testing.assert_allclose(o, r, rtol=1e-5, atol=1e-5 * max(1.0, float(np.abs(r).max())))


def test_refused_under_fp16():
    model, _ = dw_pw([1, 8, 8, 8], 8)
    g = load_tflite(model).main
    g.precision = "fp16"
    run_passes(g)
    assert "DEPTHWISE_POINTWISE" not in [n.op for n in g.nodes]
