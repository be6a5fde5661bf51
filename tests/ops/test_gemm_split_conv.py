"""Split-K across workgroups for implicit-GEMM convolutions (ops/gemm_split.py: the input channels split
S ways as S groups, weights re-laid out per group, gemm.comp SPLIT_REDUCE): LiteRT's results with
strides, padding, dilation, bias, activation and a residual, in fp32 and --precision fp16 (the partial
dispatch's small-tile cooperative-matrix plan, emulated on lavapipe), and batch-native bundles."""
from __future__ import annotations

import numpy as np
import pytest

import gpuc
from gpuc.compiler.ops import gemm_candidates, gemm_coopmat, gemm_split
from gpuc.runtime.bundle import read_bundle
from helpers.builder import ModelBuilder
from helpers.litert import run_litert
from helpers.runner import assert_batch_prefixes, assert_rel_close, run_uncached

RNG = np.random.default_rng(5)


def conv_model(n=1, h=7, w=7, ci=32, co=12, k=3, stride=1, dil=1, padding="SAME", act="RELU", residual=False,
               double=False, pad=False):
    mb = ModelBuilder()
    x = mb.input("x", [n, h, w, ci])
    xs = [RNG.uniform(-1, 1, (n, h, w, ci)).astype(np.float32)]
    if pad:                                        # PAD then a VALID conv: the pad folds into the conv's gather
        p = mb.tensor("p", [n, h + 3, w + 2, ci])
        mb.op("PAD", [x, mb.const("pads", np.array([[0, 0], [1, 2], [1, 1], [0, 0]], np.int32))], [p])
        x, h, w, padding = p, h + 3, w + 2, "VALID"
    if double:                                     # x + x first: an activation that fp16 may store as float16
        x2 = mb.tensor("x2", [n, h, w, ci])        # (model inputs stay float32)
        mb.op("ADD", [x, x], [x2])
        x = x2
    oh = -(-h // stride) if padding == "SAME" else (h - (k - 1) * dil - 1) // stride + 1
    ow = -(-w // stride) if padding == "SAME" else (w - (k - 1) * dil - 1) // stride + 1
    y = mb.tensor("y", [n, oh, ow, co])
    mb.op("CONV_2D", [x, mb.const("w", RNG.normal(0, 0.2, (co, k, k, ci)).astype(np.float32)),
                      mb.const("b", RNG.normal(0, 0.2, co).astype(np.float32))], [y], padding=padding,
          stride_h=stride, stride_w=stride, dilation_hfactor=dil, dilation_wfactor=dil, fused_activation_function=act)
    if residual:
        r = mb.input("r", [n, oh, ow, co])
        xs.append(RNG.uniform(-1, 1, (n, oh, ow, co)).astype(np.float32))
        z = mb.tensor("z", [n, oh, ow, co])
        mb.op("ADD", [y, r], [z])
        y = z
    mb.output(y)
    return mb.finish(), xs


def test_conv_split_weights_layout():
    """Group j of the re-laid out weights is the full filter's channels [j*CI/S, (j+1)*CI/S) of every tap."""
    taps, ci, n, s = 9, 8, 3, 4
    w = RNG.normal(size=(1, taps * ci, n))
    g = gemm_split.conv_split_weights(w, taps, s)
    assert g.shape == (s, taps * ci // s, n)
    full = w[0].reshape(taps, ci, n)
    for j in range(s):
        np.testing.assert_array_equal(g[j].reshape(taps, ci // s, n), full[:, j * 2:(j + 1) * 2])


@pytest.mark.parametrize("s,geo", [(4, {}), (2, dict(stride=2, h=9, w=8, padding="VALID")),
                                   (8, dict(dil=2, h=8, w=8, ci=64, act="RELU6")), (4, dict(residual=True, act="NONE")),
                                   (2, dict(pad=True, stride=2))])
def test_conv_split_matches_litert(compile_options, s, geo):
    model, xs = conv_model(**geo)
    compile_options(split_k=s)
    out, b = run_uncached(model, xs)
    assert len(b.dispatches) == 2                  # partials + reduce (bias, activation, residual there)
    assert_rel_close(out, run_litert(model, xs)[0])
    compile_options(split_k=1)
    one, b1 = run_uncached(model, xs)
    assert len(b1.dispatches) == 1
    assert_rel_close(out, one)


@pytest.mark.parametrize("plan", [gemm_coopmat.CoopPlan(1, 4, 1, 1, 32, 2), gemm_coopmat.CoopPlan(1, 2, 1, 2, 64, 2, 4),
                                  gemm_coopmat.CoopPlan(1, 4, 1, 2, 32, 1, 2)])
def test_conv_split_fp16_coopmat_partials(compile_options, monkeypatch, plan):
    """--precision fp16: the partial dispatch carries a small-tile cooperative-matrix plan (16-row tiles
    over the S groups, K also split across subgroups (KS) and summed in shared memory; emulated) and the
    result matches LiteRT within fp16 storage rounding."""
    monkeypatch.setattr(gemm_candidates, "SMALL_PLANS", (plan,))
    model, xs = conv_model(h=5, w=5, ci=64, co=40, residual=True, double=True)
    compile_options(split_k=4, coopmat_emulate=True)
    out, b = run_uncached(model, xs, precision="fp16")
    assert len(b.dispatches) == 3                  # x + x, partials, reduce
    partial = [v for v in b.variants if v.dispatch == 1]
    assert partial and all(v.name == "coopmat" for v in partial)
    assert not [v for v in b.variants if v.dispatch == 2]
    assert_rel_close(out, run_litert(model, xs)[0], rel=2e-2)


def test_conv_split_batch_native(compile_options):
    """--max-batch 3: each batch b runs the prefix of both dispatches and gives its items' outputs."""
    model, _ = conv_model(ci=32, co=8)
    compile_options(split_k=4)
    data = gpuc.compile(model, cache=False, max_batch=3)
    assert len(read_bundle(data).dispatches) == 2
    assert_batch_prefixes(data, model, RNG.uniform(-1, 1, (3, 1, 7, 7, 32)).astype(np.float32), (1, 3))


def test_model_splits_batch1_resnet_convs():
    """The cost model splits ResNet-50's batch-1 7x7x512 3x3 convolution (49 x 512 x 4608: one row tile)
    and keeps a batch-32 one (plenty of workgroups) in one dispatch."""
    from gpuc.compiler.ops.gemm_dispatch import _split
    assert _split(49, 512, 4608, True, True, 512, "fp16")[0] > 1
    assert _split(32 * 49, 512, 4608, True, True, 512, "fp16")[0] == 1


def test_fp32_programs_split_small_m_convs_sooner():
    """A float32 program models its convolutions at IM2COL_FACTOR_FP32 (2.0: only the plain kernel runs them),
    a float16 one at IM2COL_FACTOR (1.5: tensor-core candidates run the one dispatch too): the batch-1 2x2
    stride-2 convolution of a ConvNeXt downsample (49 x 768 x 1536, 384 channels) splits in fp32."""
    from gpuc.compiler.ops.gemm_dispatch import _split
    from gpuc.compiler.ops import gemm_split
    assert gemm_split.im2col_factor("fp32") == gemm_split.IM2COL_FACTOR_FP32 > gemm_split.im2col_factor("fp16")
    assert _split(49, 768, 1536, True, True, 384, "fp32")[0] > 1
    assert _split(49, 768, 1536, True, False, 1536, "fp32")[0] == 1      # an FC: factor 1 either way


def test_fp16_programs_retry_deep_splits_into_whole_chunks():
    """A float16 program whose convolution IM2COL_FACTOR keeps whole takes IM2COL_FACTOR_FP32's split only into
    at least FP16_RETRY_MIN_S parts of whole FP16_RETRY_DEPTH-deep chunks: ConvNeXt's 2x2 stride-2 downsamplings
    split (parts of 96), an Inception 3x3 convolution over 192 channels (parts of 432 / 216 / 108, or 2 of 864)
    stays one dispatch in fp16 and splits in fp32."""
    from gpuc.compiler.ops.gemm_dispatch import _split
    from gpuc.compiler.ops import gemm_split
    assert _split(49, 768, 1536, True, True, 384, "fp16")[0] == 16
    assert _split(196, 384, 768, True, True, 192, "fp16")[0] == 8
    assert _split(784, 192, 384, True, True, 96, "fp16")[0] == 4
    assert _split(64, 320, 1728, True, True, 192, "fp16")[0] == 1
    assert _split(64, 320, 1728, True, True, 192, "fp32")[0] > 1
    fits = gemm_split.fp16_retry_fits(1536, lambda s: True)
    assert [s for s in (2, 4, 8, 16) if fits(s)] == [4, 8, 16]


def test_split_k_conv_off_keeps_convs_in_one_dispatch():
    """CompileOptions.split_k_conv=False: the convolution above stays one dispatch; an FC still splits."""
    from gpuc.compiler.ops.gemm_dispatch import _split
    from gpuc.compiler.options import DEFAULT, using
    assert _split(49, 768, 3072, True, False, 3072, "fp16")[0] > 1
    with using(DEFAULT.replace(split_k_conv=False)):
        assert _split(49, 512, 4608, True, True, 512, "fp16")[0] == 1
        assert _split(49, 768, 3072, True, False, 3072, "fp16")[0] > 1


def test_small_m_candidates_only_where_regular_variants_are_not():
    assert gemm_candidates.small_m(49, 768, 3072)                 # batch-1 FC: 1 row tile
    assert not gemm_candidates.small_m(4096, 4096, 4096)          # the regular families fill the GPU
    assert not gemm_candidates.small_m(49, 16, 3072)              # a sliver of N
    assert not gemm_candidates.small_m(49, 512, 4608, gather=True)
    plans = gemm_candidates.small_plans(49, 512, 576, 8, 3)
    assert len(set(plans)) == 3 and all(p.BM <= 32 for p in plans)
    for p in gemm_candidates.SMALL_PLANS:             # portable: 32 KiB of shared memory, 256 invocations
        assert p.smem_bytes() <= gemm_coopmat.WG_SMEM and p.threads <= 256 and p.BK % (16 * p.KS) == 0
    assert all(p.KS == 1 for p in gemm_candidates.small_plans(49, 512, 24, 1, 9))     # K slices need depth
