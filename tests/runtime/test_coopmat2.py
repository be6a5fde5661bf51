"""The workgroup-scope cooperative-matrix gemm (compiler/ops/gemm_cm2.py, shaders/gemm_cm2.spvasm) and the
SPIR-V assembly templates it is written in (compiler/codegen/spvasm.py).

lavapipe has no VK_NV_cooperative_matrix2, so here: the template engine and assembler (every path of the
template assembles and validates), which gemms carry the variant (shape rule, epilogues that fit), that a
device without the extension runs the other kernels with the same results, forcing it is refused naming
the extension, and the requirement on fake devices.  benchmarks/archive/coopmat2_sweep.py runs the real one on the
H100 and checks every result against numpy."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

pytest.importorskip("vulkan")

import gpuc  # noqa: E402
from gpuc.compiler.codegen import spvasm  # noqa: E402
from gpuc.compiler.codegen.kernel import Kernel  # noqa: E402
from gpuc.compiler.ops import gemm_cm2  # noqa: E402
from gpuc.errors import DeviceError, ShaderCompileError  # noqa: E402
from gpuc.runtime import bundle as B  # noqa: E402
from gpuc.runtime.capabilities import missing  # noqa: E402
from helpers.builder import ModelBuilder  # noqa: E402
from helpers.litert import run_litert  # noqa: E402
from helpers.precision import assert_close16, compile_coopmat_emulated  # noqa: E402


def _kernel(template, defines, bindings=("out_", "x")):
    return Kernel(template, [(n, i) for i, n in enumerate(bindings)], 64, defines, "t", local_x=64)


def test_template_conditionals_and_values(monkeypatch, tmp_path):
    text = ("; header comment dropped\nA {N}\n;#if F\nB\n;#if G\nC\n;#else\nD {SLOT_x}\n;#endif\n;#else\nE {MISSING}\n"
            ";#endif\nF16 {F16_out_} {M}\n")
    monkeypatch.setattr(spvasm, "_template", lambda t: text)
    out = spvasm.render(_kernel("t", dict(N=3, F=1, G=0, M="Aligned 16")), {0: "float16", 1: "float32"})
    assert out.strip().split("\n")[1:] == ["A 3", "B", "D 1", "F16 1 Aligned 16"]     # dropped blocks go unchecked
    with pytest.raises(ShaderCompileError, match=r"\{MISSING\}: no such define"):
        spvasm.render(_kernel("t", dict(N=3, F=0, M=1)), {0: "float32", 1: "float32"})
    with pytest.raises(ShaderCompileError, match="`;#if G`: no such define"):
        spvasm.render(_kernel("t", dict(N=3, F=1, M=1)), {0: "float32", 1: "float32"})
    monkeypatch.setattr(spvasm, "_template", lambda t: ";#if F\nA\n")
    with pytest.raises(ShaderCompileError, match="without `;#endif`"):
        spvasm.render(_kernel("t", dict(F=1)), {0: "float32", 1: "float32"})
    with pytest.raises(ShaderCompileError, match="float bindings"):
        spvasm.render(_kernel("t", dict(F=1)), {0: "int32", 1: "float32"})


def test_assembler_reports_the_line():
    with pytest.raises(ShaderCompileError, match=r"line 3: %x = OpBogus"):
        spvasm.assemble("OpCapability Shader\nOpMemoryModel Logical GLSL450\n%x = OpBogus\n", "bad")
    with pytest.raises(ShaderCompileError, match="invalid"):     # assembles, fails validation (no entry point)
        spvasm.assemble("OpCapability Shader\nOpMemoryModel Logical GLSL450\n", "empty")


def test_every_template_path_assembles_and_validates():
    from gpuc.compiler.codegen import glsl
    from gpuc.compiler.codegen.glslang import spirv_val
    from gpuc.compiler.codegen.variants import all_variants, templates_on_disk
    assert "gemm_cm2" in templates_on_disk()
    n = 0
    for template, k, dtypes in all_variants():
        if template == "gemm_cm2":
            spirv_val(glsl.kernel_spirv(k, dtypes))
            n += 1
    assert n == 32                      # bias, residual and the two activations on or off, two storage types


def test_shape_rule_from_h100_measurements():
    for M, N, K in ((4096, 4096, 4096), (8192, 8192, 8192), (4096, 4096, 1024), (16384, 1024, 1024),
                    (3072, 3072, 3072)):
        assert gemm_cm2.plan_for(M, N, K) == gemm_cm2.BIG     # 1.6-2.2x the subgroup-scope kernel
    for M, N, K in ((2048, 2048, 2048), (4096, 1024, 4096), (1024, 1024, 8192), (6272, 384, 1536),
                    (25088, 192, 768), (1568, 768, 3072), (1568, 3072, 768)):
        assert gemm_cm2.worthwhile(M, N, K) and gemm_cm2.plan_for(M, N, K) == gemm_cm2.SMALL
    for M, N, K in ((6272, 1536, 384), (100352, 384, 96), (25088, 768, 192), (100352, 96, 384)):
        assert not gemm_cm2.worthwhile(M, N, K)   # shallow K: the subgroup-scope kernel won


def test_with_an_activation_only_measured_candidates(compile_options):
    """A gemm whose epilogue has a ReLU-family activation offers the workgroup-scope kernel only as measured
    candidates (the first-load tuner keeps one where it is faster), each requiring the per-element operations:
    every tile by default, none, the rule's plan or every tile with CompileOptions.cm2_act_candidates 0 / 1 / 2."""
    shape = (6304, 768, 3072)
    plain = gemm_cm2.cm2_variants(*shape)
    assert len(gemm_cm2.cm2_variants(*shape, acts=True)) == len(plain) and not plain[0].measured
    compile_options(cm2_act_candidates=0)
    assert gemm_cm2.cm2_variants(*shape, acts=True) == []
    for n, count in ((1, 1), (2, len(plain))):
        compile_options(cm2_act_candidates=n)
        acts = gemm_cm2.cm2_variants(*shape, acts=True)
        assert len(acts) == count
        assert all(v.measured and v.requires["cooperative_matrix2_per_element"] for v in acts)
    assert not any("cooperative_matrix2_per_element" in v.requires for v in plain)


def test_bk64_candidate_only_at_depth():
    """The measured BK-64 tile is offered where K >= DEEP_K (it lost at K = 768 on the H100, won at 3072); every
    candidate's tiles fill the GPU once."""
    def plans(M, N, K):
        return [tuple(v.requires["cooperative_matrix2"]) for v in gemm_cm2.cm2_variants(M, N, K) if v.measured]
    deep, shallow = plans(6304, 768, 3072), plans(6304, 3072, 768)
    assert (128, 128, 64, 256) in deep and (128, 128, 64, 256) not in shallow
    assert all(bk <= 32 for _, _, bk, _ in shallow) and shallow
    for M, N, K in ((6304, 768, 3072), (6304, 3072, 768)):
        assert all(gemm_cm2.Cm2Plan(*p).tiles(M, N) >= gemm_cm2.SMS for p in plans(M, N, K))


def fc_model(act="NONE", bias=True, residual=False, seed=0):
    """FC over 40 rows, 24 -> 20 (M, N, K no multiples of the test tile: clamped edges)."""
    rng = np.random.default_rng(seed)
    mb = ModelBuilder()
    x = mb.input("x", [40, 24])
    h, y = mb.tensor("h", [40, 24]), mb.tensor("y", [40, 20])
    mb.op("ADD", [x, x], [h])                          # an fp16 activation feeds the FC
    w = mb.const("w", rng.normal(0, 0.3, (20, 24)).astype(np.float32))
    b = mb.const("b", rng.normal(0, 0.1, 20).astype(np.float32)) if bias else -1
    mb.op("FULLY_CONNECTED", [h, w, b], [y], fused_activation_function="NONE" if act == "TANH" else act)
    out = y
    if act == "TANH":                                  # an activation op the FC's epilogue absorbs
        t = mb.tensor("t", [40, 20])
        mb.op("TANH", [y], [t])
        out = t
    if residual:
        r, z = mb.input("r", [40, 20]), mb.tensor("z", [40, 20])
        mb.op("ADD", [y, r], [z])
        out = z
    mb.output(out)
    xs = [rng.uniform(-1, 1, (40, 24)).astype(np.float32)] + (
        [rng.uniform(-1, 1, (40, 20)).astype(np.float32)] if residual else [])
    return mb.finish(), xs


@pytest.fixture
def forced(monkeypatch, compile_options):
    """Every fp16 gemm gets the variant (the emulated subgroup-scope one too, so the shape rules pass),
    tiled 32 x 32 x 16 for 128 invocations."""
    compile_options(cm2_plan=gemm_cm2.Cm2Plan(32, 32, 16, 128))
    return monkeypatch


@pytest.mark.parametrize("act,bias,residual,has", [("NONE", True, False, True), ("NONE", False, True, True),
                                                   ("RELU", True, False, True), ("RELU6", False, True, True),
                                                   ("RELU_N1_TO_1", True, True, True), ("TANH", True, False, False)])
def test_variant_where_the_epilogue_fits(gpu, forced, act, bias, residual, has):
    m, xs = fc_model(act, bias, residual)
    data = compile_coopmat_emulated(m)
    b = B.read_bundle(data)
    cm2 = [v for v in b.variants if v.name == "coopmat2"]
    assert bool(cm2) == has                         # other activations take the subgroup-scope path only
    if has:
        (v,) = cm2
        want = {"cooperative_matrix2": [32, 32, 16, 128], "fp16_storage": True}
        if act != "NONE":                           # the ReLU family runs per element
            want["cooperative_matrix2_per_element"] = True
        assert v.requires == want
        assert b.shaders[v.shader].name == "gemm_cm2+coopmat2" and v.groups[0] * v.groups[1] == 2 * 1
        first = [w for w in b.variants if w.dispatch == v.dispatch][0]
        assert first is v and not v.measured        # ahead of the subgroup-scope variants (the plan forced)
    if not gpu.device.coopmat2:                     # lavapipe: the other kernels, the same results
        with gpuc.load(data, device=gpu.device) as lm:
            assert lm.bundle.stats["variants_used"] == {"coopmat": 1}
            assert_close16(lm.run(xs), run_litert(m, xs))


@pytest.mark.parametrize("act", ["NONE", "RELU"])
def test_candidate_order_in_the_bundle(act, compile_options):
    """Without a forced plan: a plain epilogue's workgroup-scope variant comes first (the cost model's pick); with an
    activation its variants come after the subgroup-scope ones, all measured (tuning rounds time the others
    first, as without them)."""
    rng = np.random.default_rng(3)
    mb = ModelBuilder()
    x, h, y = mb.input("x", [64, 768]), mb.tensor("h", [64, 768]), mb.tensor("y", [64, 32])
    mb.op("ADD", [x, x], [h])
    mb.op("FULLY_CONNECTED", [h, mb.const("w", rng.normal(0, 0.05, (32, 768)).astype(np.float32)), -1], [y],
          fused_activation_function=act)
    mb.output(y)
    compile_options(cm2_act_candidates=2)
    b = B.read_bundle(compile_coopmat_emulated(mb.finish()))
    names = [v.name for v in b.variants]
    assert "coopmat2" in names and "coopmat" in names
    cm2 = [v for v in b.variants if v.name == "coopmat2"]
    if act == "NONE":
        assert names[0] == "coopmat2" and not cm2[0].measured
    else:
        assert names.index("coopmat2") > names.index("coopmat") and all(v.measured for v in cm2)


def test_forcing_coopmat2_is_refused_cleanly(gpu, forced):
    if gpu.device.coopmat2:
        pytest.skip("this device has VK_NV_cooperative_matrix2")
    m, xs = fc_model()
    data = compile_coopmat_emulated(m)
    forced.setenv("GPUC_VARIANTS", "coopmat2=force")
    with pytest.raises(DeviceError, match="forces the 'coopmat2' kernels.*no VK_NV_cooperative_matrix2"):
        gpuc.load(data, device=gpu.device)


def test_requirement_on_fake_devices():
    want = {"cooperative_matrix2": [128, 256, 32, 256]}
    h100 = SimpleNamespace(coopmat2=[(16, 16, 16, 32), (16, 16, 16, 64), (32, 16, 16, 128), (32, 32, 16, 256)],
                           coopmat2_max_dim=1024)
    assert missing(want, h100) is None
    assert missing({"cooperative_matrix2": [128, 128, 32, 128]}, h100) is None
    assert "for 512 invocations" in missing({"cooperative_matrix2": [128, 256, 32, 512]}, h100)
    assert "48x256x32" in missing({"cooperative_matrix2": [48, 256, 32, 256]}, h100)        # M granularity 32
    assert missing({"cooperative_matrix2": [2048, 256, 32, 256]}, h100) is not None        # > max dimension
    assert missing(want, SimpleNamespace(coopmat2=[], coopmat2_max_dim=0)) == "no VK_NV_cooperative_matrix2"
    assert missing(want, SimpleNamespace()) == "no VK_NV_cooperative_matrix2"
    acts = dict(want, cooperative_matrix2_per_element=True)
    assert missing(acts, h100) == "no VK_NV_cooperative_matrix2 per-element operations"
    h100.coopmat2_per_element = True
    assert missing(acts, h100) is None
