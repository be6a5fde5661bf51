"""pad_conv_channels (compiler/ops/channel_pad.py): under --precision fp16, a big convolution over 3 input channels reads
them padded to 4 with zeros (a zero weight channel beside), the pad folded into the movement chain its input comes
from; the results agree with the unpadded program and LiteRT."""
import numpy as np
import pytest

pytest.importorskip("vulkan")

import gpuc  # noqa: E402
from gpuc.compiler.ops import channel_pad  # noqa: E402
from gpuc.runtime.bundle import read_bundle  # noqa: E402
from helpers.builder import ModelBuilder  # noqa: E402
from helpers.litert import run_litert  # noqa: E402


def stem(nchw: bool, seed=0):
    """An RGB stem: (NCHW input -> TRANSPOSE ->) PAD 3 -> CONV_2D 7x7 stride 2, 3 -> 16 channels, RELU."""
    rng = np.random.default_rng(seed)
    mb = ModelBuilder()
    if nchw:
        x = mb.input("x", [1, 3, 20, 20])
        h = mb.tensor("h", [1, 20, 20, 3])
        mb.op("TRANSPOSE", [x, mb.const("perm", np.array([0, 2, 3, 1], np.int32))], [h])
    else:
        h = x = mb.input("x", [1, 20, 20, 3])
    p = mb.tensor("p", [1, 26, 26, 3])
    mb.op("PAD", [h, mb.const("pads", np.array([[0, 0], [3, 3], [3, 3], [0, 0]], np.int32))], [p])
    c = mb.tensor("c", [1, 10, 10, 16])
    mb.op("CONV_2D", [p, mb.const("w", rng.normal(0, 0.3, (16, 7, 7, 3)).astype(np.float32)),
                      mb.const("b", rng.normal(0, 0.1, 16).astype(np.float32))], [c],
          padding="VALID", stride_w=2, stride_h=2, fused_activation_function="RELU")
    y = mb.tensor("y", [1, 10, 10, 16])
    mb.op("NEG", [c], [y])
    mb.output(y)
    shape = (1, 3, 20, 20) if nchw else (1, 20, 20, 3)
    return mb.finish(), [rng.uniform(-1, 1, shape).astype(np.float32)]


@pytest.mark.parametrize("nchw", [True, False])
def test_padded_stem_matches(monkeypatch, nchw):
    import os
    if os.environ.get("GPUC_DISABLE_FP16"):
        pytest.skip("fp16 storage disabled")
    monkeypatch.setattr(channel_pad, "MIN_MACS", 0)       # (a test-sized stem)
    model, xs = stem(nchw)
    outs, shapes = [], []
    for disabled in ([], ["pad_conv_channels"]):
        b = gpuc.compile(model, precision="fp16", disable_passes=disabled, cache=False)
        bb = read_bundle(b)
        conv = next(d for d in bb.dispatches if d.label.startswith("CONV_2D"))
        shapes.append(list(bb.tensors[conv.bindings[1]].shape))
        labels = [d.label.split()[0] for d in bb.dispatches]
        with gpuc.load(b) as m:
            outs.append(np.asarray(m.run(xs)[0], np.float64))
        if not disabled:       # the channel pad joins the spatial pad (and the transpose) in one copy
            assert labels == ["GATHER_COPY", "CONV_2D"]      # (NEG: in the convolution's epilogue)
    assert shapes == [[1, 26, 26, 4], [1, 26, 26, 3] if nchw else [1, 20, 20, 3]]   # (NHWC: the PAD folds into it)
    np.testing.assert_allclose(outs[0], outs[1], rtol=2e-3, atol=2e-3)
    ref = run_litert(model, xs)[0]
    np.testing.assert_allclose(outs[0], ref, rtol=1e-2, atol=1e-2 * float(np.abs(ref).max()))


def test_only_big_fp16_few_channel_convolutions():
    model, _ = stem(True)
    for prec in ("fp32", "fp16"):                # MIN_MACS: a test-sized stem stays as it is
        bb = read_bundle(gpuc.compile(model, precision=prec, cache=False))
        conv = next(d for d in bb.dispatches if d.label.startswith("CONV_2D"))
        assert list(bb.tensors[conv.bindings[1]].shape) == [1, 26, 26, 3]


@pytest.mark.parametrize("nchw", [True, False])
def test_padded_stem_in_a_batch_native_bundle(monkeypatch, nchw):
    """--max-batch 3 (batch-native: every dispatch computes the items): the padded program's items agree with the
    unpadded one's, for a run of 3 items and of 2."""
    import os
    if os.environ.get("GPUC_DISABLE_FP16"):
        pytest.skip("fp16 storage disabled")
    monkeypatch.setattr(channel_pad, "MIN_MACS", 0)
    model, xs = stem(nchw)
    x3 = np.concatenate([xs[0], xs[0][..., ::-1], -xs[0]], 0)
    outs = []
    for disabled in ([], ["pad_conv_channels"]):
        b = gpuc.compile(model, precision="fp16", max_batch=3, disable_passes=disabled, cache=False)
        with gpuc.load(b) as m:
            outs.append([np.asarray(m.run([x3])[0], np.float64), np.asarray(m.run([x3[:2]])[0], np.float64)])
    for a, b in zip(*outs):
        np.testing.assert_allclose(a, b, rtol=2e-3, atol=2e-3)
    np.testing.assert_array_equal(outs[0][1], outs[0][0][:2])
