"""The coopmat_int8 variant of gemm_q8's tiled prefill kernel (compiler/ops/gemm_q8_coopmat.py,
shaders/gemm_q8_coopmat.glsl): the int8-weight FCs' int32 sums on s8 x s8 -> s32 cooperative matrices,
bit-identical to the int_dot / plain kernel's.  lavapipe has no cooperative matrices: there the emulated
form (CompileOptions.coopmat_emulate: the same staging, tiles and epilogue, plain int32 sums) is checked
bit-exact, the real form's SPIR-V is validated and its requirement reported missing; on a device with
int8 cooperative matrices (the H100) the real form runs and is checked bit-exact too."""
from __future__ import annotations

import numpy as np
import pytest

from helpers.builder import ModelBuilder

pytest.importorskip("vulkan")

import gpuc  # noqa: E402
from gpuc.compiler import compile_model  # noqa: E402
from gpuc.compiler.ops import gemm_q8_coopmat  # noqa: E402

RNG = np.random.default_rng(11)


def _q8(n, k):
    w = RNG.normal(0, k ** -0.5, (n, k)).astype(np.float32)
    s = (np.abs(w).max(1) / 127).astype(np.float32)
    return np.clip(np.round(w / s[:, None]), -127, 127).astype(np.int8), (s, 0, 0)


def fc_model(m, k, n, glu=False) -> bytes:
    """x [m, k] -> int8 FC (bias, RELU) + residual r; glu: gate / up FCs -> silu(gate) * up instead."""
    mb = ModelBuilder()
    x = mb.input("x", [m, k])
    if glu:
        gate, up, sg, g1, y = (mb.tensor(s, [m, n]) for s in ("gate", "up", "sg", "g1", "y"))
        for name, out in (("wg", gate), ("wu", up)):
            q, quant = _q8(n, k)
            mb.op("FULLY_CONNECTED", [x, mb.const(name, q, quant=quant), -1], [out])
        mb.op("LOGISTIC", [gate], [sg])
        mb.op("MUL", [gate, sg], [g1])
        mb.op("MUL", [g1, up], [y])
    else:
        q, quant = _q8(n, k)
        h, y = mb.tensor("h", [m, n]), mb.tensor("y", [m, n])
        b = mb.const("b", RNG.normal(0, 0.1, n).astype(np.float32))
        mb.op("FULLY_CONNECTED", [x, mb.const("w", q, quant=quant), b], [h], fused_activation_function="RELU")
        mb.op("ADD", [h, mb.input("r", [m, n])], [y])
    mb.output(y)
    return mb.finish()


def _inputs(data):
    with gpuc.load(data) as mod:
        return [RNG.normal(0, 1, i.shape).astype(np.float32) for i in mod.inputs]


def _run(gpu, data, xs, variants):
    import os
    old = os.environ.get("GPUC_VARIANTS")
    os.environ["GPUC_VARIANTS"] = variants
    try:
        with gpuc.load(data, device=gpu.device) as mod:
            return mod.run(xs)[0], mod.bundle.stats.get("variants_used", {})
    finally:
        if old is None:
            del os.environ["GPUC_VARIANTS"]
        else:
            os.environ["GPUC_VARIANTS"] = old


def _same(gpu, data, xs):
    """The variant's output equals the bundle's without it (int_dot or plain), bit for bit."""
    got, used = _run(gpu, data, xs, "coopmat_int8=force")
    assert used.get("coopmat_int8", 0) >= 1, used
    ref, used0 = _run(gpu, data, xs, "coopmat_int8=off")
    assert "coopmat_int8" not in used0, used0
    assert np.isfinite(ref).all() and np.abs(ref).max() > 0
    np.testing.assert_array_equal(got, ref)


@pytest.mark.parametrize("m,k,n,glu,sms", [(70, 100, 72, False, 4), (40, 48, 40, True, 1), (70, 300, 72, True, 10 ** 6),
                                           (130, 72, 140, False, 1), (33, 40, 136, True, 1)])
def test_emulated_variant_is_bit_exact(gpu, monkeypatch, m, k, n, glu, sms):
    """Row / channel / K tails (K not a multiple of the step), GLU, the three tile forms (GPU_SMS = 1: 128 x
    128 where M, N > 64, 4: 64 x 64, many: 32 x 64)."""
    monkeypatch.setattr(gemm_q8_coopmat, "GPU_SMS", sms)
    data = compile_model(fc_model(m, k, n, glu), cache=False, coopmat_emulate=True)
    _same(gpu, data, _inputs(data))


def test_plan_fits_shared_memory():
    g = gemm_q8_coopmat
    for gm, gn, glu in [(512, 896, False), (512, 4864, True), (512, 4864, False), (4096, 4096, True), (16, 8, False)]:
        for smem in (g.SMEM, g.BIG_SMEM):
            p = g.plan(gm, gn, glu, smem)
            assert g.smem_bytes(p, glu) <= smem
            assert (p["BM"] * p["BKW"] // 4) % (32 * p["WM"] * p["WN"]) == 0
    assert g.plan(512, 896, False)["BM"] == 32          # (112 64 x 64 tiles would leave SMs idle)
    assert g.plan(512, 1152, False)["BM"] == 64
    assert g.plan(1024, 4864, True)["BM"] == 128
    assert g.plan(512, 896, True, g.BIG_SMEM)["BKW"] > g.plan(512, 896, True)["BKW"]


def test_big_shared_memory_variant_only_where_its_plan_differs(gpu, monkeypatch):
    """The 48 KiB variant (first, requiring `shared_memory`) exists only where its plan is not the 32 KiB
    one (GLU at 32 x 64: 64-word K steps, not 32); emulated, it runs bit-exact where the device allows
    48 KiB (lavapipe: 32 KiB, so there the 32 KiB variant after it)."""
    from gpuc.runtime.bundle import read_bundle
    monkeypatch.setattr(gemm_q8_coopmat, "GPU_SMS", 10 ** 6)          # (32 x 64 tiles)
    plain = compile_model(fc_model(40, 300, 72), cache=False, coopmat_emulate=True)
    assert [v.name for v in read_bundle(plain).variants].count("coopmat_int8") == 1
    data = compile_model(fc_model(40, 300, 72, glu=True), cache=False, coopmat_emulate=True)
    assert [v.name for v in read_bundle(data).variants].count("coopmat_int8") == 2
    _same(gpu, data, _inputs(data))


def test_variant_is_valid_spirv_and_gated(gpu):
    """The real form is valid SPIR-V, requires what int8_conv's coopmat_int8 does; where the device has
    it (the H100) it runs prefill-shaped FCs bit-exact, elsewhere the requirement is named as missing."""
    from gpuc.compiler.codegen import glsl
    from gpuc.compiler.codegen.glslang import spirv_val
    from gpuc.compiler.codegen.variants import all_variants
    from gpuc.compiler.ops import int8_conv
    from gpuc.runtime.capabilities import missing
    real = [(k, dt) for t, k, dt in all_variants() if t == "gemm_q8" and k.defines.get("COOPMAT")
            and not k.defines.get("CM_EMULATE")]
    assert {k.defines["BM"] for k, _ in real} == {32, 64, 128}
    for k, dt in real:
        spirv_val(glsl.kernel_spirv(k, dt))
    assert gemm_q8_coopmat.REQUIRES == int8_conv.COOPMAT_VARIANT.requires
    why = missing(gemm_q8_coopmat.REQUIRES, gpu.device)
    if why is not None:
        assert "cooperative" in why or "subgroup" in why, why
        return
    for m, k, n, glu in [(512, 896, 896, False), (512, 4864, 896, False), (512, 896, 4864, True), (77, 100, 72, True)]:
        data = gpuc.compile(fc_model(m, k, n, glu))
        _same(gpu, data, _inputs(data))
