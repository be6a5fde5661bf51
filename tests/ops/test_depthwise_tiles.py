"""The `depthwise` kernel's TILE=1 path (compiler/ops/depthwise_plan.py, shaders/depthwise.comp): one
channel x an RY x PX output tile per invocation, weights in registers, input rows swept once.  Every
tile shape is forced through the planner on tiny models with odd sizes, edges, strides, dilations,
depth multipliers, channels not a multiple of 4, batches, fp16 storage and fused epilogues (bias,
activation, residual, an elementwise chain), against LiteRT CPU; and the planner's choices."""
import numpy as np
import pytest

pytest.importorskip("vulkan")

import gpuc  # noqa: E402
from gpuc.compiler.ops import depthwise_plan as dp  # noqa: E402
from gpuc.inspect import inspect_bundle  # noqa: E402
from helpers.builder import ModelBuilder  # noqa: E402
from helpers.data import rnd, seed_of  # noqa: E402
from helpers.litert import run_litert  # noqa: E402
from helpers.precision import assert_close16  # noqa: E402


def out_size(n, k, s, d, padding):
    return -(-n // s) if padding == "SAME" else (n - (k - 1) * d - 1) // s + 1


def dw_model(name, n, h, w, ci, mult, k, stride=(1, 1), dil=(1, 1), padding="SAME", act="NONE", bias=True,
             residual=None, chain=False, const_w=True, zero_bias=False):
    """DEPTHWISE_CONV_2D(x, w, b) [-> ADD(., r) with activation `residual`] [-> MUL(., c) -> LOGISTIC].
    Without a bias, zero_bias=True gives LiteRT (which needs one) a zero bias instead."""
    s = seed_of(name)
    co = ci * mult
    wt = rnd((1, *k, co), s + 1)
    mb = ModelBuilder()
    x = mb.input("x", [n, h, w, ci])
    wi = mb.const("w", wt) if const_w else mb.input("w", wt.shape)
    bi = mb.const("b", rnd((co,), s + 2)) if bias else mb.const("b", np.zeros(co, np.float32)) if zero_bias else -1
    oshape = [n, out_size(h, k[0], stride[0], dil[0], padding), out_size(w, k[1], stride[1], dil[1], padding), co]
    y = mb.tensor("y", oshape)
    mb.op("DEPTHWISE_CONV_2D", [x, wi, bi], [y], padding=padding, stride_h=stride[0], stride_w=stride[1],
          dilation_hfactor=dil[0], dilation_wfactor=dil[1], fused_activation_function=act, depth_multiplier=mult)
    feeds = [rnd((n, h, w, ci), s + 3)] + ([] if const_w else [wt])
    if residual is not None:
        r = mb.input("r", oshape)
        z = mb.tensor("z", oshape)
        mb.op("ADD", [y, r], [z], fused_activation_function=residual)
        feeds.append(rnd(oshape, s + 4, -2, 2))
        y = z
    if chain:
        m, g = mb.tensor("m", oshape), mb.tensor("g", oshape)
        mb.op("MUL", [y, mb.const("c", rnd((co,), s + 5, 0.5, 2))], [m])
        mb.op("LOGISTIC", [m], [g])
        y = g
    mb.output(y)
    return mb.finish(), feeds


# (name, n, h, w, ci, mult, kernel, stride, dilation, padding, act, bias, residual, chain, const_w)
CASES = [
    ("k3-odd-c6", 1, 9, 11, 6, 1, (3, 3), (1, 1), (1, 1), "SAME", "RELU6", True, None, False, True),
    ("k3-s2-c8-batch3", 3, 9, 7, 8, 1, (3, 3), (2, 2), (1, 1), "SAME", "NONE", True, None, False, True),
    ("k3-dil2-mult2", 2, 9, 10, 4, 2, (3, 3), (1, 1), (2, 2), "SAME", "NONE", False, None, False, True),
    ("k5x3-s1x2-valid", 1, 11, 9, 5, 1, (5, 3), (1, 2), (1, 1), "VALID", "RELU", True, None, False, True),
    ("k7-c12-edges", 1, 6, 5, 12, 1, (7, 7), (1, 1), (1, 1), "SAME", "NONE", True, None, False, True),
    ("k3x5-s2-dil2-c3-mult3", 1, 13, 12, 3, 3, (3, 5), (2, 2), (1, 2), "SAME", "NONE", True, None, False, True),
    ("k3-residual-chain", 2, 7, 6, 6, 1, (3, 3), (1, 1), (1, 1), "SAME", "RELU", True, "RELU6", True, True),
    ("k1-s2", 1, 7, 8, 5, 1, (1, 1), (2, 2), (1, 1), "SAME", "NONE", True, None, False, True),
    ("k3-runtime-weights-s2", 1, 8, 7, 4, 1, (3, 3), (2, 1), (1, 1), "VALID", "NONE", True, None, False, False),
]
TILES = [(1, 1), (2, 3), (3, 2), (4, 4), (8, 8)]


def run_case(gpu, case, precision="fp32", max_batch=None, items=None):
    name, n, h, w, ci, m, k, s, d, p, act, bias, res, chain, const_w = case
    model, feeds = dw_model(name, n, h, w, ci, m, k, s, d, p, act, bias, res, chain, const_w)
    ref_model = model if bias else dw_model(name, n, h, w, ci, m, k, s, d, p, act, bias, res, chain, const_w, True)[0]
    opts = dict(cache=False, precision=precision)
    if max_batch:
        opts["max_batch"] = max_batch
        feeds = [np.concatenate([f] * -(-items // f.shape[0]))[:items] if i != 1 or const_w else f
                 for i, f in enumerate(feeds)]
    bundle = gpuc.compile(model, **opts)
    assert inspect_bundle(bundle)[0]["dispatches"] == 1          # residual and chain fused into the one dispatch
    with gpuc.load(bundle, device=gpu.device) as mod:
        out = mod.run(feeds)[0]
    refs = [run_litert(ref_model, [f[j:j + 1] if f.shape[0] == items else f for f in feeds])[0]
            for j in range(items)] if max_batch else run_litert(ref_model, feeds)
    ref = np.concatenate(refs) if max_batch else refs[0]
    assert out.shape == ref.shape
    if precision == "fp16":
        assert_close16([out], [ref])
    else:
        np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5 * max(1.0, float(np.abs(ref).max())))


@pytest.mark.parametrize("tile", TILES, ids=[f"{r}x{p}" for r, p in TILES])
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_forced_tile(gpu, compile_options, tile, case):
    """vec4 channel groups where CO % 4 == 0 and MULT == 1 (taps in registers for 3x3, from L1 for
    7x7), one channel per invocation otherwise."""
    compile_options(dw_plan=dp.DwPlan(1, *tile))
    run_case(gpu, case)


VEC_CASES = [c for c in CASES if c[4] % 4 == 0 and c[5] == 1]


@pytest.mark.parametrize("tile", TILES[1:4], ids=[f"{r}x{p}" for r, p in TILES[1:4]])
@pytest.mark.parametrize("case", VEC_CASES, ids=[c[0] for c in VEC_CASES])
def test_forced_tile_scalar(gpu, compile_options, tile, case):
    """The one-channel tile on shapes that would take vec4 views."""
    compile_options(dw_plan=dp.DwPlan(1, *tile, scalar=True))
    run_case(gpu, case)


@pytest.mark.parametrize("case", CASES[::2], ids=[c[0] for c in CASES[::2]])
def test_forced_tile_fp16(gpu, compile_options, case):
    compile_options(dw_plan=dp.DwPlan(1, 3, 2))
    run_case(gpu, case, precision="fp16")


def test_forced_tile_batch_native(gpu, compile_options):
    """A --max-batch 4 bundle run on 3 items: a prefix of the grid computes a prefix of the items."""
    compile_options(dw_plan=dp.DwPlan(1, 2, 4))
    run_case(gpu, CASES[0], max_batch=4, items=3)


def test_forced_tile_reaches_kernel(monkeypatch, compile_options):
    """CompileOptions.dw_plan reaches the rendered kernel (so the tests above run the TILE=1 path)."""
    from gpuc.compiler.codegen.kernel import Kernel
    from gpuc.compiler.ops import conv
    seen = []
    real = conv.Kernel

    def spy(*a, **k):
        kern = real(*a, **k)
        seen.append(kern)
        return kern
    monkeypatch.setattr(conv, "Kernel", spy)
    compile_options(dw_plan=dp.DwPlan(1, 3, 2))
    model, _ = dw_model("spy", 1, 9, 11, 6, 1, (3, 3))
    gpuc.compile(model, cache=False)
    (k,) = [k for k in seen if isinstance(k, Kernel) and k.template == "depthwise"]
    assert (k.defines["TILE"], k.defines["RY"], k.defines["PX"], k.defines["OYB"], k.defines["OXB"]) == (1, 3, 2, 3, 6)
    assert k.invocations == 1 * 3 * 6 * 6 and k.vec4 == () and k.defines["WREG"] == 1
    seen.clear()
    model, _ = dw_model("spy7", 1, 9, 11, 8, 1, (7, 7))          # vec4 groups, 7x7 taps loaded per use
    gpuc.compile(model, cache=False)
    (k,) = [k for k in seen if isinstance(k, Kernel) and k.template == "depthwise"]
    assert (k.defines["VEC"], k.defines["WREG"], k.invocations) == (1, 0, 1 * 3 * 6 * 2) and "x" in k.vec4


# ---------------------------------------------------------------------------------------------------
# the planner

def test_plan_big_batch_takes_a_tile():
    """ConvNeXt-T's first 7x7 layer at batch 32: a multi-row tile, with at least MIN_INVOCATIONS threads."""
    p = dp.plan_depthwise(32, 56, 56, 96, 7, 7, 1, 1, 1, 1)
    assert p.tile == 1 and p.ry * p.px >= 8
    assert 32 * -(-56 // p.ry) * -(-56 // p.px) * 96 >= dp.MIN_INVOCATIONS


@pytest.mark.parametrize("shape", [(1, 7, 7, 768, 7), (1, 14, 14, 576, 3), (1, 112, 112, 32, 3), (1, 56, 56, 96, 7)])
def test_plan_batch1_keeps_invocations(shape):
    """Batch-1 layers keep at least as many invocations as the old plan gave (or MIN_INVOCATIONS)."""
    n, oh, ow, co, k = shape
    p = dp.plan_depthwise(n, oh, ow, co, k, k, 1, 1, 1, 1)
    old = dp.plan_depthwise(n, oh, ow, co, k, k, 1, 1, 1, 1, old=True)
    inv = n * -(-oh // p.ry) * -(-ow // p.px) * (co if p.tile else -(-co // 4))
    inv_old = n * oh * -(-ow // old.px) * -(-co // 4)
    assert inv >= min(inv_old, dp.MIN_INVOCATIONS)


@pytest.mark.parametrize("k, stride, want", [(3, 1, (1, 2, 4, False)), (3, 2, (1, 2, 2, False)),
                                             (5, 1, (1, 4, 4, True)), (11, 1, (0, 1, 4, False))])
def test_plan_big_batch_by_kernel(k, stride, want):
    """Batch 32 of a 56x56x144 layer: vec4 2x4 tiles for 3x3 (2x2 at stride 2), one channel 4x4 for 5x5,
    TILE=0 (4 pixels) for 11x11 (over TILE_MAX_TAPS)."""
    p = dp.plan_depthwise(32, -(-56 // stride), -(-56 // stride), 144, k, k, stride, stride, 1, 1)
    assert (p.tile, p.ry, p.px, p.scalar) == want


def test_plan_small_tile_keeps_invocations():
    """A big layer with few output pixels shrinks its tile to keep MIN_INVOCATIONS invocations."""
    p = dp.plan_depthwise(1, 128, 128, 64, 3, 3, 1, 1, 1, 1)          # 2x4 would leave 32768
    assert (p.tile, p.ry, p.px, p.scalar) == (1, 2, 2, False) and 64 * 64 * 16 >= dp.MIN_INVOCATIONS


def test_plan_not_vec_takes_one_channel():
    p = dp.plan_depthwise(32, 56, 56, 10, 3, 3, 1, 1, 1, 1, vec=False)
    assert p.tile == 1 and p.scalar


# batch 1, vec4 views: the plan carries the layer's other batch1_plans as measured variants
B1_CASES = [c for c in CASES if c[1] == 1 and c[5] == 1 and c[4] % 4 == 0] + [
    ("k3-b1-residual-chain", 1, 9, 10, 8, 1, (3, 3), (1, 1), (1, 1), "SAME", "NONE", True, "RELU", True, True),
    ("k5-b1-s2", 1, 11, 9, 8, 1, (5, 5), (2, 2), (1, 1), "SAME", "RELU6", True, None, False, True)]


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
@pytest.mark.parametrize("case", B1_CASES, ids=[c[0] for c in B1_CASES])
def test_batch1_plan_variants(gpu, case, precision):
    """Each `dw_t*` variant, derived from the final kernel of the planned form (fused residual and
    chain included), run as the dispatch's kernel, against LiteRT."""
    import dataclasses
    from gpuc.runtime import bundle as B
    from gpuc.runtime.variants import resolve
    name, n, h, w, ci, m, k, s, d, p, act, bias, res, chain, const_w = case
    model, feeds = dw_model(name, n, h, w, ci, m, k, s, d, p, act, bias, res, chain, const_w)
    b = B.read_bundle(gpuc.compile(model, cache=False, precision=precision))
    ours = [v for v in b.variants if v.name.startswith("dw_t")]
    oh, ow = out_size(h, k[0], s[0], d[0], p), out_size(w, k[1], s[1], d[1], p)
    cands = dp.batch1_plans(1, oh, ow, ci, *k, True)
    assert {v.name for v in ours} == {f"dw_t{c.tile}_{c.ry}x{c.px}" for c in cands[1:]}
    assert len(cands) == (1 if k[0] * k[1] >= dp.B1_TILE_TAPS else 3)
    assert all(v.measured for v in ours)
    ref = run_litert(model, feeds)[0]
    for v in ours:
        one = dataclasses.replace(b, variants=[dataclasses.replace(u, measured=False) for u in b.variants
                                               if u.name == v.name])
        assert resolve(one, gpu.device).stats["variants_used"] == {v.name: 1}
        with gpuc.load(B.write_bundle(one), device=gpu.device) as mod:
            out = mod.run(feeds)[0]
        if precision == "fp16":
            assert_close16([out], [ref])
        else:
            np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5 * max(1.0, float(np.abs(ref).max())))


def test_batch1_plans(compile_options):
    """7x7 at batch 1: the TILE=1 1 x 1 plan alone; 3x3: TILE=0 first, then TILE=1 1 x 1 and 2 x 1; none for
    a batch over 1, scalar views, kernels over TILE_MAX_TAPS taps or a big layer; no variants for a forced
    plan."""
    assert dp.batch1_plans(1, 14, 14, 384, 7, 7, True) == [dp.DwPlan(1, 1, 1)]
    assert dp.plan_depthwise(1, 14, 14, 384, 7, 7, 1, 1, 1, 1) == dp.DwPlan(1, 1, 1)
    assert dp.plan_variants(dp.DwPlan(1, 1, 1), 1, 14, 14, 384, 7, 7, True) == []
    p3 = dp.plan_depthwise(1, 56, 56, 96, 3, 3, 1, 1, 1, 1)
    assert dp.batch1_plans(1, 56, 56, 96, 3, 3, True)[0] == p3 and p3.tile == 0
    assert [v.name for v in dp.plan_variants(p3, 1, 56, 56, 96, 3, 3, True)] == ["dw_t1_1x1", "dw_t1_2x1"]
    assert len(dp.batch1_plans(1, 1, 7, 96, 3, 3, True)) == 2           # (2x1 clamps to 1x1 on one row)
    for args in [(2, 14, 14, 384, 7, 7, True), (1, 14, 14, 384, 7, 7, False), (1, 14, 14, 384, 9, 9, True),
                 (1, 112, 112, 96, 3, 3, True)]:
        assert dp.batch1_plans(*args) == []
    compile_options(dw_plan=p3)
    assert dp.plan_variants(p3, 1, 56, 56, 96, 3, 3, True) == []
