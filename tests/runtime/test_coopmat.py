"""Kernel variants chosen at load (runtime/variants.py) and the cooperative-matrix gemm of
`--precision fp16` (compiler/ops/gemm_coopmat.py, shaders/gemm.comp COOPMAT).

lavapipe has no VK_KHR_cooperative_matrix, so here: the bundle carries the variant, the device
without it runs the plain kernels, forcing it is refused with a one-line error, the Variant table
round-trips and is verified, the selection rules on fake devices, and the variant's tiling, fp16
staging and epilogue through the emulated path (GPUC_TEST_COOPMAT_EMULATE: the same shader with the
cooperative-matrix operations done per invocation).  benchmarks/coopmat_check.py runs the real one."""
from __future__ import annotations

import dataclasses
import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pytest

pytest.importorskip("vulkan")

import gpuc  # noqa: E402
from gpuc.compiler import compile_model  # noqa: E402
from gpuc.compiler.ops.gemm_coopmat import BIG_SMEM, REQUIRES, plan_coopmat  # noqa: E402
from gpuc.errors import BundleError, DeviceError  # noqa: E402
from gpuc.runtime import bundle as B  # noqa: E402
from gpuc.runtime.capabilities import missing  # noqa: E402
from gpuc.runtime.variants import resolve  # noqa: E402
from helpers.builder import ModelBuilder  # noqa: E402
from helpers.litert import run_litert  # noqa: E402
from helpers.precision import compile_coopmat_emulated  # noqa: E402

TOL16 = 2e-2


def gemm_model(seed=0):
    """conv 3x3 (fp32 input: plain) -> conv 1x1 (+relu6) -> conv 3x3 stride 2 -> FC: M, N, K of the
    last three are no multiples of 16 (masked edges), 1x1 = plain A, 3x3 = IM2COL, FC = VEC_A."""
    rng = np.random.default_rng(seed)
    H, W, C0, C1, C2, C3, O = 13, 11, 5, 20, 37, 24, 19
    mb = ModelBuilder()
    x = mb.input("x", [1, H, W, C0])

    def conv(name, src, ci, co, k, stride, act, hw):
        w = mb.const(name + "w", rng.normal(0, 0.5, (co, k, k, ci)).astype(np.float32))
        b = mb.const(name + "b", rng.normal(0, 0.1, co).astype(np.float32))
        t = mb.tensor(name, [1, hw[0], hw[1], co])
        mb.op("CONV_2D", [src, w, b], [t], padding="SAME", stride_w=stride, stride_h=stride,
              fused_activation_function=act)
        return t
    c1 = conv("c1", x, C0, C1, 3, 1, "RELU", (H, W))
    c2 = conv("c2", c1, C1, C2, 1, 1, "RELU6", (H, W))
    c3 = conv("c3", c2, C2, C3, 3, 2, "NONE", (7, 6))
    fw = mb.const("fw", rng.normal(0, 0.3, (O, C3)).astype(np.float32))
    f = mb.tensor("f", [42, O])                                 # over the 42 pixels

    mb.op("FULLY_CONNECTED", [c3, fw, -1], [f])
    mb.output(f)
    return mb.finish(), [rng.uniform(-1, 1, (1, H, W, C0)).astype(np.float32)]


@pytest.fixture(scope="module")
def model():
    m, xs = gemm_model()
    return m, xs, run_litert(m, xs)


def _close(outs, refs):
    for o, r in zip(outs, refs):
        assert np.isfinite(o).all()
        assert float(np.abs(o - r).max()) <= TOL16 * float(np.abs(r).max())


@pytest.fixture
def small_gemms_qualify(monkeypatch):
    """The structural rule only (min 16 per dimension), without the H100-measured size / gather rules,
    so the tiny test model's gemms carry the variant."""
    from gpuc.compiler.ops import gemm_coopmat
    monkeypatch.setattr(gemm_coopmat, "MIN_DIM", 16)
    monkeypatch.setattr(gemm_coopmat, "MIN_MACS", 0)
    monkeypatch.setattr(gemm_coopmat, "MIN_TILES", 0)
    monkeypatch.setattr(gemm_coopmat, "SKIP_GATHER", False)


def test_size_threshold_from_h100_measurements():
    from gpuc.compiler.ops.gemm_coopmat import worthwhile
    for M, N, K in ((12544, 96, 16), (196, 576, 96), (49, 960, 160), (49, 1280, 320), (1, 1000, 1280)):
        assert not worthwhile(M, N, K)          # every MobileNetV2 gemm: slower with the variant there
    for M, N, K in ((1024, 1024, 1024), (2048, 2048, 2048), (4096, 4096, 4096), (100352, 64, 256), (1568, 2048, 512),
                    (100352, 384, 96)):
        assert worthwhile(M, N, K)              # batch-32 ResNet-50 / ConvNeXt-T layers: faster with the variant
    for M, N, K in ((3136, 64, 256), (49, 2048, 512), (3136, 384, 96), (49, 3072, 768)):
        assert not worthwhile(M, N, K)          # batch-1 ResNet-50 / ConvNeXt-T: the whole networks ran slower
    for M, N, K in ((196, 256, 1024), (49, 512, 2048)):
        assert not worthwhile(M, N, K)          # too few 64 x 64 tiles: the plain kernel splits K
    assert not worthwhile(12544, 64, 147, gather=True)


def test_big_gathered_convolutions_carry_the_variants_as_measured_candidates(monkeypatch):
    """An element-gathered convolution (CI % 4 != 0) keeps the plain kernel as the cost model's choice; where it
    is big enough for tensor cores otherwise (a batch-32 RGB stem) it carries the variants, all `measured`."""
    from gpuc.compiler.ops import gemm_candidates
    b32 = gemm_candidates.coopmat_variants(32 * 112 * 112, 64, 147, gather=True)
    assert b32 and all(v.measured for v in b32)
    assert gemm_candidates.coopmat_variants(112 * 112, 64, 147, gather=True) == []      # batch 1: too small
    assert not gemm_candidates.coopmat_variants(32 * 56 * 56, 64, 576)[0].measured      # read as vectors: chosen
    monkeypatch.setattr(gemm_candidates, "GATHER_MEASURED", False)
    assert gemm_candidates.coopmat_variants(32 * 112 * 112, 64, 147, gather=True) == []


def test_fp16_bundle_carries_coopmat_variants(model, small_gemms_qualify):
    m, _, _ = model
    b = B.read_bundle(compile_model(m, cache=False, precision="fp16"))
    vs = [v for v in b.variants if v.name == "coopmat"]
    # the three gemms fed by fp16 activations; the first conv reads the fp32 graph input: no variant
    # (a dispatch may carry two: tiled for 48 KiB of shared memory, requiring it, then for 32 KiB)
    assert [b.dispatches[i].label.split()[0] for i in sorted({v.dispatch for v in vs})] == \
        ["CONV_2D", "CONV_2D", "FULLY_CONNECTED"]
    big = dict(REQUIRES, shared_memory=BIG_SMEM)
    assert all(v.requires in (REQUIRES, big) and b.shaders[v.shader].name == "gemm+coopmat" for v in vs)
    for i in {v.dispatch for v in vs}:                  # the portable one last, always there
        assert [v.requires for v in vs if v.dispatch == i][-1] == REQUIRES
    assert all(b.shaders[b.dispatches[v.dispatch].shader].name == "gemm" for v in vs)
    fb = B.read_bundle(b.fallback)                       # the fp32 fallback: no fp16, no coopmat
    assert not fb.variants
    assert not B.read_bundle(compile_model(m, cache=False, precision="fp32")).variants


def test_device_without_coopmat_runs_plain_kernels(gpu, model, small_gemms_qualify):
    if gpu.device.coopmat:
        pytest.skip("this device has VK_KHR_cooperative_matrix (benchmarks/coopmat_check.py covers it)")
    m, xs, refs = model
    data = compile_model(m, cache=False, precision="fp16")
    assert "cooperative_matrix" in missing(REQUIRES, gpu.device)
    with gpuc.load(data, device=gpu.device) as lm:
        assert lm.bundle.stats["variants_used"] == {}
        assert not lm.bundle.variants and all("coopmat" not in s.name for s in lm.bundle.shaders)
        _close(lm.run(xs), refs)


def test_forcing_coopmat_is_refused_cleanly(gpu, model, monkeypatch, tmp_path, small_gemms_qualify):
    if gpu.device.coopmat:
        pytest.skip("this device has VK_KHR_cooperative_matrix")
    m, xs, _ = model
    data = compile_model(m, cache=False, precision="fp16")
    monkeypatch.setenv("GPUC_VARIANTS", "coopmat=force")
    with pytest.raises(DeviceError, match="forces the 'coopmat' kernels.*no VK_KHR_cooperative_matrix"):
        gpuc.load(data, device=gpu.device)
    monkeypatch.setenv("GPUC_VARIANTS", "coopmat=sometimes")
    with pytest.raises(DeviceError, match="GPUC_VARIANTS"):
        gpuc.load(data, device=gpu.device)
    # the CLI: one line, exit 2
    (tmp_path / "m.bundle").write_bytes(data)
    np.save(tmp_path / "x.npy", xs[0])
    r = subprocess.run([sys.executable, "-m", "gpuc.cli", "run", str(tmp_path / "m.bundle"), "--input",
                        str(tmp_path / "x.npy")], capture_output=True, text=True,
                       env=dict(__import__("os").environ, GPUC_VARIANTS="force"))
    assert r.returncode == 2 and "cooperative_matrix" in r.stderr and "Traceback" not in r.stderr


def test_variants_round_trip_and_are_verified(model, small_gemms_qualify):
    m, _, _ = model
    b = B.read_bundle(compile_model(m, cache=False, precision="fp16"))
    again = B.read_bundle(B.write_bundle(b))
    assert again.variants == b.variants and again.variants
    v0 = b.variants[0]
    nb = len(b.dispatches[v0.dispatch].bindings)
    other = next(i for i, sh in enumerate(b.shaders) if sh.bindings != nb)       # wrong binding count
    for bad in (dict(dispatch=len(b.dispatches)), dict(shader=len(b.shaders)), dict(groups=(1, 1)),
                dict(groups=(0, 1, 1)), dict(shader=other)):
        broken = dataclasses.replace(b, variants=[dataclasses.replace(v0, **bad)])
        with pytest.raises(BundleError, match="variant 0"):
            B.read_bundle(B.write_bundle(broken))


def _fake(coopmat=(), subgroup_size=32, ops=0xff):
    return SimpleNamespace(name="fake", coopmat=list(coopmat), subgroup_size=subgroup_size, subgroup_ops=ops,
                           fp16_storage=True)


def test_selection_rules_on_fake_devices(model, small_gemms_qualify):
    m, _, _ = model
    b = B.read_bundle(compile_model(m, cache=False, precision="fp16"))
    entry = tuple(REQUIRES["cooperative_matrix"])
    nvidia = _fake([(16, 8, 16, "float16", "float16", "float16", "float16"), entry])
    r = resolve(b, nvidia, spec="")
    assert r.stats["variants_used"] == {"coopmat": 3} and not r.variants
    for v in (v for v in b.variants if not v.measured):  # swapped shader and groups, same bindings
        #                                                   (measured candidates run only where tuning chose them)
        d = r.dispatches[v.dispatch]
        assert r.shaders[d.shader].name == "gemm+coopmat" and d.groups == v.groups
        assert d.bindings == b.dispatches[v.dispatch].bindings
    assert sorted({d.shader for d in r.dispatches}) == list(range(len(r.shaders)))     # unused shaders dropped
    B.validate(r)
    # no matching entry, another subgroup size, or switched off: the plain kernels
    for dev, spec in ((_fake([(16, 8, 16, "float16", "float16", "float32", "float32")]), ""),
                      (_fake([entry], subgroup_size=64), ""), (nvidia, "coopmat=off"), (nvidia, "off")):
        r = resolve(b, dev, spec=spec)
        assert r.stats["variants_used"] == {} and all("coopmat" not in s.name for s in r.shaders)
        assert sorted({d.shader for d in r.dispatches}) == list(range(len(r.shaders)))
    assert "subgroup size 64" in missing(REQUIRES, _fake([entry], subgroup_size=64))
    assert missing(REQUIRES, nvidia) is None
    assert "unknown capability" in missing({"warp_drive": 1}, nvidia)


def test_matrix_vector_products_keep_the_plain_kernel():
    rng = np.random.default_rng(2)
    mb = ModelBuilder()
    x = mb.input("x", [1, 64])
    h, y = mb.tensor("h", [1, 64]), mb.tensor("y", [1, 40])
    mb.op("ADD", [x, x], [h])
    mb.op("FULLY_CONNECTED", [h, mb.const("w", rng.normal(0, 1, (40, 64)).astype(np.float32)), -1], [y])
    mb.output(y)
    assert not B.read_bundle(compile_model(mb.finish(), cache=False, precision="fp16")).variants


def test_coopmat_plans_fit_any_shape():
    for M, N, K, G in ((1, 1, 1, 1), (12544, 32, 27, 1), (49, 1280, 320, 1), (1, 1001, 1280, 1), (4096, 4096, 4096, 1),
                       (100, 6, 9, 4)):
        p = plan_coopmat(M, N, K, G)
        assert p is not None and p.smem_bytes() <= 32 * 1024 and p.threads <= 256


def test_emulated_coopmat_variant_matches(gpu, model, monkeypatch):
    """The variant's own code (global loads, fp16 staging layouts, tile ownership, masked edges,
    epilogue) on lavapipe: only the cooperative-matrix operations are emulated."""
    m, xs, refs = model
    data = compile_coopmat_emulated(m)
    monkeypatch.setenv("GPUC_VARIANTS", "off")
    with gpuc.load(data, device=gpu.device) as lm:
        plain = lm.run(xs)
    monkeypatch.setenv("GPUC_VARIANTS", "coopmat=force")
    with gpuc.load(data, device=gpu.device) as lm:
        assert lm.bundle.stats["variants_used"] == {"coopmat": 3}
        outs = lm.run(xs)
    _close(outs, refs)
    # fp16 inputs with fp32 sums in another order than the plain kernel: within fp32 rounding of it
    assert float(np.abs(outs[0] - plain[0]).max()) <= 1e-4 * float(np.abs(plain[0]).max())


def test_emulated_coopmat_grouped_conv_and_runtime_weights(gpu, monkeypatch):
    """Groups (G > 1) and B_T=1 (FULLY_CONNECTED weights computed at run time, read as [N, K])."""
    rng = np.random.default_rng(4)
    mb = ModelBuilder()
    x = mb.input("x", [1, 8, 6, 8])
    wi = mb.input("wi", [18, 12])
    x2, w2 = mb.tensor("x2", [1, 8, 6, 8]), mb.tensor("w2", [18, 12])
    mb.op("ADD", [x, x], [x2])
    mb.op("ADD", [wi, wi], [w2])
    gw = mb.const("gw", rng.normal(0, 0.3, (12, 3, 3, 4)).astype(np.float32))     # 2 groups of 4 -> 6
    c = mb.tensor("c", [1, 8, 6, 12])
    gb = mb.const("gb", rng.normal(0, 0.1, 12).astype(np.float32))
    mb.op("CONV_2D", [x2, gw, gb], [c], padding="SAME", stride_w=1, stride_h=1, fused_activation_function="RELU")
    f = mb.tensor("f", [48, 18])
    mb.op("FULLY_CONNECTED", [c, w2, -1], [f])
    mb.output(f)
    model = mb.finish()
    xs = [rng.uniform(-1, 1, (1, 8, 6, 8)).astype(np.float32), rng.normal(0, 0.2, (18, 12)).astype(np.float32)]
    refs = run_litert(model, xs)
    data = compile_coopmat_emulated(model)
    monkeypatch.setenv("GPUC_VARIANTS", "coopmat=force")
    with gpuc.load(data, device=gpu.device) as lm:
        assert lm.bundle.stats["variants_used"] == {"coopmat": 2}
        _close(lm.run(xs), refs)
