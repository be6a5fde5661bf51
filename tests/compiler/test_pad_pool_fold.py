"""fold_pad_pool (passes/fusion.py): PAD / PADV2 folded into MAX_POOL_2D / AVERAGE_POOL_2D only where
the result is identical; checked bit-for-bit against the unfolded program and against LiteRT."""
import numpy as np
import pytest

pytest.importorskip("vulkan")

import gpuc  # noqa: E402
from gpuc.compiler.frontend.importer import load_tflite  # noqa: E402
from gpuc.compiler.passes import run_passes  # noqa: E402
from gpuc.runtime.bundle import read_bundle  # noqa: E402
from helpers.builder import ModelBuilder  # noqa: E402
from helpers.litert import run_litert  # noqa: E402

RNG = np.random.default_rng(5)


def pad_pool_model(pool, pads, padding="VALID", value=None, relu=False, k=3, s=2, shape=(1, 7, 6, 3)):
    mb = ModelBuilder()
    x = mb.input("x", list(shape))
    src = x
    if relu:
        src = mb.tensor("r", list(shape))
        mb.op("RELU", [x], [src])
    n, h, w, c = shape
    ph = (h + pads[0] + pads[1], w + pads[2] + pads[3])
    p = mb.tensor("p", [n, ph[0], ph[1], c])
    inputs = [src, mb.const("pads", np.array([[0, 0], pads[:2], pads[2:], [0, 0]], np.int32))]
    if value is None:
        mb.op("PAD", inputs, [p])
    else:
        mb.op("PADV2", inputs + [mb.const("v", np.array([value], np.float32))], [p])
    if padding == "SAME":
        oh, ow = -(-ph[0] // s), -(-ph[1] // s)
    else:
        oh, ow = (ph[0] - k) // s + 1, (ph[1] - k) // s + 1
    y = mb.tensor("y", [n, oh, ow, c])
    mb.op(pool, [p], [y], padding=padding, stride_w=s, stride_h=s, filter_width=k, filter_height=k)
    mb.output(y)
    return mb.finish()


def compare(model, folded: bool):
    g = load_tflite(model).main
    run_passes(g)
    assert any(n.op in ("PAD", "PADV2") for n in g.nodes) != folded
    x = RNG.uniform(-3, 3, (1, 7, 6, 3)).astype(np.float32)
    outs = []
    for disabled in ([], ["fold_pad_pool"]):
        b = gpuc.compile(model, disable_passes=disabled, cache=False)
        with gpuc.load(b) as m:
            outs.append(np.array(m.run([x])[0]))
        outs[-1] = (outs[-1], len(read_bundle(b).dispatches))
    (on, d_on), (off, d_off) = outs
    np.testing.assert_array_equal(on, off)
    assert d_on == d_off - int(folded)
    ref = run_litert(model, [x])[0]
    np.testing.assert_allclose(on, ref, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("relu", [False, True])
@pytest.mark.parametrize("padding", ["VALID", "SAME"])
@pytest.mark.parametrize("pads", [(1, 1, 1, 1), (0, 2, 1, 0), (2, 0, 0, 3)])
def test_zero_pad_into_max_pool(pads, padding, relu):
    """Exact for any input: windows touching the padding see its zeros, as in the padded tensor."""
    compare(pad_pool_model("MAX_POOL_2D", pads, padding, relu=relu), folded=True)


@pytest.mark.parametrize("value", [-np.inf, -1.5, 2.0])
def test_padv2_constant_into_max_pool(value):
    compare(pad_pool_model("MAX_POOL_2D", (1, 2, 2, 1), "VALID", value=value), folded=True)


@pytest.mark.parametrize("padding", ["VALID", "SAME"])
@pytest.mark.parametrize("pads", [(1, 1, 1, 1), (0, 3, 2, 0)])
def test_zero_pad_into_average_pool(pads, padding):
    """Padded cells are counted (as zeros), implicit SAME cells are not: as LiteRT on the padded tensor."""
    compare(pad_pool_model("AVERAGE_POOL_2D", pads, padding, k=2, s=1), folded=True)


def test_nonzero_pad_is_not_folded_into_average_pool():
    compare(pad_pool_model("AVERAGE_POOL_2D", (1, 1, 1, 1), "VALID", value=0.5), folded=False)


def test_fp16_folded_and_unfolded_programs_are_identical():
    """--precision fp16: ABS -> PAD -> MAX_POOL -> NEG, the padded tensor and the pool's input fp16 alike."""
    import os
    if os.environ.get("GPUC_DISABLE_FP16"):
        pytest.skip("fp16 storage disabled")
    mb = ModelBuilder()
    x = mb.input("x", [1, 7, 6, 3])
    a = mb.tensor("a", [1, 7, 6, 3])
    mb.op("ABS", [x], [a])
    p = mb.tensor("p", [1, 9, 8, 3])
    mb.op("PAD", [a, mb.const("pads", np.array([[0, 0], [1, 1], [1, 1], [0, 0]], np.int32))], [p])
    m = mb.tensor("m", [1, 4, 3, 3])
    mb.op("MAX_POOL_2D", [p], [m], padding="VALID", stride_w=2, stride_h=2, filter_width=3, filter_height=3)
    y = mb.tensor("y", [1, 4, 3, 3])
    mb.op("NEG", [m], [y])
    mb.output(y)
    model = mb.finish()
    x = RNG.uniform(-3, 3, (1, 7, 6, 3)).astype(np.float32)
    outs = []
    for disabled in ([], ["fold_pad_pool"]):
        b = gpuc.compile(model, disable_passes=disabled, precision="fp16", cache=False)
        assert any(t.dtype == "float16" for t in read_bundle(b).tensors)
        with gpuc.load(b) as mm:
            outs.append(np.array(mm.run([x])[0]))
    np.testing.assert_array_equal(outs[0], outs[1])
    np.testing.assert_allclose(outs[0], run_litert(model, [x])[0], rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("pool_act", ["NONE", "RELU"])
def test_fp16_pad_after_an_fp32_producer_folds_into_max_pool(pool_act):
    """--precision fp16, a float32-pinned producer (a 7x7 stride-2 convolution over 3 channels: the plain gemm,
    which keeps its tensors float32) -> PADV2 -inf -> MAX_POOL_2D stored float16 -> NEG: the pool reads the
    unrounded values and still gives the unfolded program's bits (rounding to float16 is monotone), one dispatch
    fewer; into an AVERAGE_POOL_2D (PADV2 0) the pad stays."""
    import os
    if os.environ.get("GPUC_DISABLE_FP16"):
        pytest.skip("fp16 storage disabled")
    rng = np.random.default_rng(3)

    def build(pool):
        mb = ModelBuilder()
        x = mb.input("x", [1, 20, 20, 3])
        c = mb.tensor("c", [1, 10, 10, 16])
        mb.op("CONV_2D", [x, mb.const("w", rng.normal(0, 0.3, (16, 7, 7, 3)).astype(np.float32)),
                          mb.const("b", rng.normal(0, 0.1, 16).astype(np.float32))], [c],
              padding="SAME", stride_w=2, stride_h=2, fused_activation_function="RELU")
        p = mb.tensor("p", [1, 12, 12, 16])
        value = -np.inf if pool == "MAX_POOL_2D" else 0.0
        mb.op("PADV2", [c, mb.const("pads", np.array([[0, 0], [1, 1], [1, 1], [0, 0]], np.int32)),
                        mb.const("v", np.array([value], np.float32))], [p])
        m = mb.tensor("m", [1, 5, 5, 16])
        mb.op(pool, [p], [m], padding="VALID", stride_w=2, stride_h=2, filter_width=3, filter_height=3,
              fused_activation_function=pool_act)
        y = mb.tensor("y", [1, 5, 5, 16])          # (the pool's output inside the network: stored float16)
        mb.op("NEG", [m], [y])
        mb.output(y)
        return mb.finish()

    x = rng.uniform(-1, 1, (1, 20, 20, 3)).astype(np.float32)
    for pool, folds in (("MAX_POOL_2D", True), ("AVERAGE_POOL_2D", False)):
        model = build(pool)
        outs, counts = [], []
        for disabled in ([], ["fold_pad_pool"]):
            b = gpuc.compile(model, disable_passes=disabled, precision="fp16", cache=False)
            counts.append(sum(d.label.split()[0] in ("PADV2", "PAD") for d in read_bundle(b).dispatches))
            with gpuc.load(b) as mm:
                outs.append(np.array(mm.run([x])[0]))
        assert counts == ([0, 1] if folds else [1, 1]), (pool, counts)
        np.testing.assert_array_equal(outs[0], outs[1])
        np.testing.assert_allclose(outs[0], run_litert(model, [x])[0], rtol=1e-2, atol=1e-2)
