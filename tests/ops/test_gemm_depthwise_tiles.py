"""The tiled `gemm` (FULLY_CONNECTED, 1x1 and implicit-GEMM convolutions) and `depthwise` kernels at
their edges: M / N / K not multiples of the tile, CO % 4 != 0 (zero-padded vec4 weights), K % 4 != 0
(scalar A loads), groups, batch 3, runtime (non-constant) weights, fused residual epilogue, and every
tile shape family (register blocks, split-K inside the workgroup, one-row GEMV tiles) forced through
the planner.  References: float64 numpy, itself checked against LiteRT on a few cases."""
import numpy as np
import pytest

pytest.importorskip("vulkan")

import gpuc  # noqa: E402
from gpuc.compiler.ops import gemm_dispatch, gemm_plan  # noqa: E402
from gpuc.compiler.ops import depthwise_plan as dw_plan  # noqa: E402
from gpuc.inspect import inspect_bundle  # noqa: E402
from helpers.builder import ModelBuilder  # noqa: E402
from helpers.data import rnd, seed_of  # noqa: E402
from helpers.litert import run_litert  # noqa: E402


ACT = {"NONE": lambda v: v, "RELU": lambda v: np.maximum(v, 0), "RELU6": lambda v: np.clip(v, 0, 6)}


def out_size(n, k, s, d, padding):
    return -(-n // s) if padding == "SAME" else (n - (k - 1) * d - 1) // s + 1


def ref_conv(x, w, b, stride, dil, padding, depthwise=False):
    """float64 NHWC conv; w: [CO,KH,KW,CIG] (grouped when CIG < CI) or depthwise [1,KH,KW,CO]."""
    x, w = x.astype(np.float64), w.astype(np.float64)
    n, h, wd, ci = x.shape
    _, kh, kw, _ = w.shape
    co = w.shape[3] if depthwise else w.shape[0]
    (sh, sw), (dh, dw) = stride, dil
    oh, ow = out_size(h, kh, sh, dh, padding), out_size(wd, kw, sw, dw, padding)
    pt = max((oh - 1) * sh + (kh - 1) * dh + 1 - h, 0) // 2 if padding == "SAME" else 0
    pl = max((ow - 1) * sw + (kw - 1) * dw + 1 - wd, 0) // 2 if padding == "SAME" else 0
    xp = np.zeros((n, pt + (oh - 1) * sh + (kh - 1) * dh + 1 + h, pl + (ow - 1) * sw + (kw - 1) * dw + 1 + wd, ci))
    xp[:, pt:pt + h, pl:pl + wd] = x
    out = np.zeros((n, oh, ow, co))
    for ky in range(kh):
        for kx in range(kw):
            patch = xp[:, ky * dh:ky * dh + (oh - 1) * sh + 1:sh, kx * dw:kx * dw + (ow - 1) * sw + 1:sw]
            if depthwise:
                out += patch[..., np.arange(co) // (co // ci)] * w[0, ky, kx]
            else:
                cig = w.shape[3]
                g, cog = ci // cig, co // (ci // cig)
                for gi in range(g):
                    out[..., gi * cog:(gi + 1) * cog] += \
                        patch[..., gi * cig:(gi + 1) * cig] @ w[gi * cog:(gi + 1) * cog, ky, kx].T
    return out + (0 if b is None else b)


def add_residual(mb, y, oshape, residual):
    """y, or (residual: its fused activation) ADD(y, r) with a new input r of y's shape."""
    if residual is None:
        return y
    r = mb.input("r", oshape)
    z = mb.tensor("z", oshape)
    mb.op("ADD", [y, r], [z], fused_activation_function=residual)
    return z


def residual_ref(ref, inputs, oshape, residual, seed):
    """The reference after add_residual: r (seeded) appended to `inputs` and added."""
    if residual is None:
        return ref
    r = rnd(oshape, seed, -3, 3)
    inputs.append(r)
    return ACT[residual](ref + r)


def conv_model(op, x_shape, w, b, stride, dil, padding, act="NONE", residual=None, const_w=True, mult=1):
    """op(x, w, b) [-> ADD(., r) with activation `residual`]; inputs: x [, w] [, r]."""
    mb = ModelBuilder()
    x = mb.input("x", x_shape)
    wi = mb.const("w", w) if const_w else mb.input("w", w.shape)
    bi = mb.const("b", b) if b is not None else -1
    dw = op == "DEPTHWISE_CONV_2D"
    co = w.shape[3] if dw else w.shape[0]
    oshape = [x_shape[0], out_size(x_shape[1], w.shape[1], stride[0], dil[0], padding),
              out_size(x_shape[2], w.shape[2], stride[1], dil[1], padding), co]
    y = mb.tensor("y", oshape)
    opts = dict(padding=padding, stride_h=stride[0], stride_w=stride[1], dilation_hfactor=dil[0],
                dilation_wfactor=dil[1], fused_activation_function=act)
    if dw:
        opts["depth_multiplier"] = mult
    mb.op(op, [x, wi, bi], [y], **opts)
    mb.output(add_residual(mb, y, oshape, residual))
    return mb.finish(), oshape


def run_conv(gpu, op, n, h, w_, ci, co, k, stride=(1, 1), dil=(1, 1), padding="SAME", groups=1, mult=1,
             act="NONE", bias=True, residual=None, const_w=True, name="", expect_dispatches=1):
    s = seed_of(name)
    dw = op == "DEPTHWISE_CONV_2D"
    w = rnd((1, *k, ci * mult) if dw else (co, *k, ci // groups), s + 1)
    b = rnd((w.shape[3] if dw else co,), s + 2) if bias else None
    model, oshape = conv_model(op, [n, h, w_, ci], w, b, stride, dil, padding, act, residual, const_w, mult)
    x = rnd((n, h, w_, ci), s + 3)
    inputs = [x] + ([] if const_w else [w])
    ref = ACT[act](ref_conv(x, w, b, stride, dil, padding, dw))
    ref = residual_ref(ref, inputs, oshape, residual, s + 4)
    bundle = gpuc.compile(model, cache=False)
    assert inspect_bundle(bundle)[0]["dispatches"] == expect_dispatches
    m = gpuc.load(bundle, device=gpu.device)
    try:
        out = m.run(inputs)[0]
    finally:
        m.close()
    assert out.shape == tuple(oshape)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5 * max(1.0, float(np.abs(ref).max())))
    return model, inputs, out


# (name, op, n, h, w, ci, co, kernel, stride, dilation, padding, groups, mult, act, bias, residual, const_w)
CONV_CASES = [
    ("pw-batch3-K12-N20", "CONV_2D", 3, 5, 7, 12, 20, (1, 1), (1, 1), (1, 1), "VALID", 1, 1, "RELU6", True, None, True),
    ("pw-K7-N13", "CONV_2D", 1, 9, 9, 7, 13, (1, 1), (1, 1), (1, 1), "SAME", 1, 1, "NONE", True, None, True),
    ("pw-K64-N70-M30", "CONV_2D", 2, 3, 5, 64, 70, (1, 1), (1, 1), (1, 1), "SAME", 1, 1, "RELU", False, None, True),
    ("pw-K200-N3", "CONV_2D", 1, 4, 4, 200, 3, (1, 1), (1, 1), (1, 1), "SAME", 1, 1, "NONE", True, None, True),
    ("pw-M1-K33-N130", "CONV_2D", 1, 1, 1, 33, 130, (1, 1), (1, 1), (1, 1), "SAME", 1, 1, "NONE", True, None, True),
    ("pw-residual-relu", "CONV_2D", 3, 6, 5, 16, 24, (1, 1), (1, 1), (1, 1), "SAME", 1, 1, "NONE", True, "RELU", True),
    ("pw-residual-relu6-act", "CONV_2D", 1, 7, 7, 5, 6, (1, 1), (1, 1), (1, 1), "SAME", 1, 1, "RELU", True, "RELU6",
     True),
    ("pw-stride2", "CONV_2D", 1, 7, 9, 8, 6, (1, 1), (2, 2), (1, 1), "SAME", 1, 1, "NONE", True, None, True),
    ("pw-groups4", "CONV_2D", 2, 5, 6, 16, 12, (1, 1), (1, 1), (1, 1), "SAME", 4, 1, "NONE", True, None, True),
    ("k3-ci3-s2-first-layer", "CONV_2D", 1, 17, 15, 3, 32, (3, 3), (2, 2), (1, 1), "SAME", 1, 1, "RELU6", True, None,
     True),
    ("k3-ci8-batch3-valid", "CONV_2D", 3, 7, 8, 8, 10, (3, 3), (1, 1), (1, 1), "VALID", 1, 1, "NONE", True, None, True),
    ("k3-dil2-s1", "CONV_2D", 1, 9, 10, 4, 7, (3, 3), (1, 1), (2, 2), "SAME", 1, 1, "NONE", True, None, True),
    ("k5x3-s2x1", "CONV_2D", 2, 9, 7, 5, 9, (5, 3), (2, 1), (1, 1), "SAME", 1, 1, "RELU", True, None, True),
    ("k3-groups2-cig4", "CONV_2D", 1, 6, 7, 8, 6, (3, 3), (1, 1), (1, 1), "SAME", 2, 1, "NONE", True, None, True),
    ("k3-groups3-cig3-s2", "CONV_2D", 3, 7, 6, 9, 6, (3, 3), (2, 2), (1, 1), "VALID", 3, 1, "NONE", True, None, True),
    ("k3-residual", "CONV_2D", 2, 6, 6, 8, 8, (3, 3), (1, 1), (1, 1), "SAME", 1, 1, "RELU6", True, "NONE", True),
    ("k3-runtime-weights", "CONV_2D", 2, 6, 7, 5, 6, (3, 3), (1, 1), (1, 1), "SAME", 1, 1, "NONE", True, None, False),
    ("pw-runtime-weights-groups2", "CONV_2D", 1, 5, 5, 8, 6, (1, 1), (1, 1), (1, 1), "SAME", 2, 1, "NONE", False, None,
     False),
    ("dw-c32-vec4", "DEPTHWISE_CONV_2D", 1, 9, 11, 32, 32, (3, 3), (1, 1), (1, 1), "SAME", 1, 1, "RELU6", True, None,
     True),
    ("dw-c6-s2-batch3", "DEPTHWISE_CONV_2D", 3, 8, 7, 6, 6, (3, 3), (2, 2), (1, 1), "SAME", 1, 1, "NONE", True, None,
     True),
    ("dw-mult3-c5", "DEPTHWISE_CONV_2D", 1, 7, 8, 5, 15, (3, 3), (1, 1), (1, 1), "VALID", 1, 3, "RELU", True, None,
     True),
    ("dw-mult2-c4-dil2", "DEPTHWISE_CONV_2D", 2, 9, 9, 4, 8, (3, 3), (1, 1), (2, 2), "SAME", 1, 2, "NONE", False, None,
     True),
    ("dw-k5x3-s1x2", "DEPTHWISE_CONV_2D", 1, 10, 9, 8, 8, (5, 3), (1, 2), (1, 1), "SAME", 1, 1, "NONE", True, None,
     True),
    ("dw-residual-vec4", "DEPTHWISE_CONV_2D", 2, 6, 6, 12, 12, (3, 3), (1, 1), (1, 1), "SAME", 1, 1, "RELU6", True,
     "RELU", True),
    ("dw-residual-scalar", "DEPTHWISE_CONV_2D", 1, 6, 6, 3, 6, (3, 3), (1, 1), (1, 1), "SAME", 1, 2, "NONE", True,
     "RELU6", True),
    ("dw-runtime-weights", "DEPTHWISE_CONV_2D", 1, 6, 5, 8, 8, (3, 3), (2, 2), (1, 1), "VALID", 1, 1, "NONE", True, None,
     False),
]


def _run_case(gpu, c):
    name, op, n, h, w, ci, co, k, s, d, p, g, m, act, bias, res, const_w = c
    return run_conv(gpu, op, n, h, w, ci, co, k, s, d, p, g, m, act, bias, res, const_w, name=name)


@pytest.mark.parametrize("case", CONV_CASES, ids=[c[0] for c in CONV_CASES])
def test_conv(gpu, case):
    _run_case(gpu, case)


# every tile family the planner can pick: (BM, BN, BK, TM, TN, KS)
PLANS = [(8, 8, 8, 2, 2, 1), (16, 8, 8, 4, 2, 2), (4, 4, 8, 1, 1, 4), (64, 64, 16, 8, 4, 1), (1, 16, 16, 1, 2, 8),
         (32, 16, 8, 4, 4, 4), (8, 32, 16, 2, 8, 2), (2, 8, 8, 2, 1, 32), (128, 4, 16, 8, 1, 1)]


@pytest.mark.parametrize("plan", PLANS, ids=["x".join(map(str, p)) for p in PLANS])
@pytest.mark.parametrize("case", [c for c in CONV_CASES if c[1] == "CONV_2D"][::2], ids=lambda c: c[0])
def test_conv_forced_plan(gpu, monkeypatch, plan, case):
    monkeypatch.setattr(gemm_dispatch, "plan_gemm", lambda *a, **k: gemm_plan.GemmPlan(*plan))
    _run_case(gpu, case)


@pytest.mark.parametrize("px", [2, 3, 5])
@pytest.mark.parametrize("case", [c for c in CONV_CASES if c[1] == "DEPTHWISE_CONV_2D"], ids=lambda c: c[0])
def test_depthwise_pixels_per_invocation(gpu, compile_options, px, case):
    compile_options(dw_plan=dw_plan.DwPlan(0, 1, px))      # the TILE=0 path at PX pixels
    _run_case(gpu, case)


@pytest.mark.parametrize("case", [c for c in CONV_CASES if c[14] and c[16]][::3], ids=lambda c: c[0])
def test_numpy_reference_matches_litert(case):
    """The float64 reference above agrees with LiteRT (so the edge cases are checked against it too)."""
    name, op, n, h, w, ci, co, k, s, d, p, g, m, act, bias, res, const_w = case
    sd = seed_of(name)
    dw = op == "DEPTHWISE_CONV_2D"
    wt = rnd((1, *k, ci * m) if dw else (co, *k, ci // g), sd + 1)
    b = rnd((wt.shape[3] if dw else co,), sd + 2)
    model, oshape = conv_model(op, [n, h, w, ci], wt, b, s, d, p, act, None, True, m)
    x = rnd((n, h, w, ci), sd + 3)
    ref = run_litert(model, [x])[0]
    np.testing.assert_allclose(ACT[act](ref_conv(x, wt, b, s, d, p, dw)), ref, rtol=1e-4, atol=1e-4)


def fc_model(rows_shape, w, b, act="NONE", const_w=True, residual=None, keep_num_dims=False):
    mb = ModelBuilder()
    x = mb.input("x", rows_shape)
    wi = mb.const("w", w) if const_w else mb.input("w", w.shape)
    bi = mb.const("b", b) if b is not None else -1
    oshape = list(rows_shape[:-1]) + [w.shape[0]] if keep_num_dims else \
        [int(np.prod(rows_shape)) // w.shape[1], w.shape[0]]
    y = mb.tensor("y", oshape)
    mb.op("FULLY_CONNECTED", [x, wi, bi], [y], fused_activation_function=act, keep_num_dims=keep_num_dims)
    mb.output(add_residual(mb, y, oshape, residual))
    return mb.finish(), oshape


# (rows shape, out features, bias, act, const weights, residual)
FC_CASES = [
    ([1, 1280], 1000, True, "NONE", True, None),
    ([37, 13], 5, True, "RELU", True, None),
    ([3, 4, 64], 70, False, "RELU6", True, None),
    ([130, 32], 9, True, "NONE", True, "RELU"),
    ([2, 200], 3, True, "NONE", False, None),
    ([70, 24], 33, True, "RELU", False, "NONE"),
]


@pytest.mark.parametrize("plan", [None, (8, 8, 8, 2, 2, 1), (1, 16, 16, 1, 2, 8), (32, 16, 8, 4, 4, 4)],
                         ids=["auto", "8x8", "gemv", "split4"])
@pytest.mark.parametrize("case", FC_CASES, ids=lambda c: f"{'x'.join(map(str, c[0]))}-to-{c[1]}"
                         f"{'-runtimeW' if not c[4] else ''}{'-res' if c[5] else ''}")
def test_fully_connected(gpu, monkeypatch, compile_options, plan, case):
    rows_shape, o, bias, act, const_w, residual = case
    if plan is not None:            # (the forced plan itself: no split across workgroups, ops/gemm_split.py)
        monkeypatch.setattr(gemm_dispatch, "plan_gemm", lambda *a, **k: gemm_plan.GemmPlan(*plan))
        compile_options(split_k=1)
    s = seed_of(str(case))
    k = rows_shape[-1]
    w = rnd((o, k), s + 1)
    b = rnd((o,), s + 2) if bias else None
    model, oshape = fc_model(rows_shape, w, b, act, const_w, residual, keep_num_dims=len(rows_shape) > 2)
    x = rnd(rows_shape, s + 3)
    inputs = [x] + ([] if const_w else [w])
    ref = ACT[act](x.reshape(-1, k).astype(np.float64) @ w.T.astype(np.float64) + (0 if b is None else b))
    ref = ref.reshape(oshape)
    ref = residual_ref(ref, inputs, oshape, residual, s + 4)
    bundle = gpuc.compile(model, cache=False)
    assert inspect_bundle(bundle)[0]["dispatches"] == 1
    if const_w and residual is None and plan is None:
        lit = run_litert(model, inputs)[0]
        np.testing.assert_allclose(lit, ref, rtol=1e-4, atol=1e-4)
    m = gpuc.load(bundle, device=gpu.device)
    try:
        out = m.run(inputs)[0]
    finally:
        m.close()
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5 * max(1.0, float(np.abs(ref).max())))


def test_planner_any_shape():
    """The planner returns a valid plan (fits 32 KiB shared memory and 256 invocations) for odd shapes."""
    for M, N, K, G in [(1, 1, 1, 1), (1, 1000, 1280, 1), (12544, 96, 16, 1), (49, 160, 960, 1), (7, 3, 5, 7),
                       (100000, 2, 2, 1), (3, 4096, 4096, 1), (2, 1, 50000, 1)]:
        for va in (False, True):
            p = gemm_plan.plan_gemm(M, N, K, G, va, True, False)
            assert p is not None and 1 <= p.threads <= 256 and 4 * p.smem_floats() <= 32 * 1024
            assert p.BM % p.TM == 0 and p.BN % p.TN == 0 and p.BN % 4 == 0


def test_shared_weights_relaid_out_once():
    """Two convs sharing one constant filter share one re-laid-out copy in the bundle."""
    mb = ModelBuilder()
    x = mb.input("x", [1, 4, 4, 8])
    w = mb.const("w", rnd((8, 1, 1, 8), 7))
    y1, y2 = mb.tensor("y1", [1, 4, 4, 8]), mb.tensor("y2", [1, 4, 4, 8])
    mb.op("CONV_2D", [x, w, -1], [y1], padding="SAME", stride_h=1, stride_w=1)
    mb.op("CONV_2D", [y1, w, -1], [y2], padding="SAME", stride_h=1, stride_w=1)
    mb.output(y2)
    rep = inspect_bundle(gpuc.compile(mb.finish(), cache=False))[0]
    assert rep["weights_bytes"] < 2 * 8 * 8 * 4
