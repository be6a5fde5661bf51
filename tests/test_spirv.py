"""In-process glslang: valid SPIR-V, caching, and errors that quote the generated GLSL line."""
import pytest

from gpuc.compiler.codegen.spirv import compile_glsl, compile_stats, spirv_val
from gpuc.errors import ShaderCompileError

SRC = """#version 450
layout(local_size_x = 64) in;
layout(set = 0, binding = 0) buffer B { float v[]; };
void main() { v[gl_GlobalInvocationID.x] *= %s; }
"""


def test_compiles_valid_spirv():
    spirv = compile_glsl(SRC % "2.0")
    assert spirv[:4] == b"\x03\x02\x23\x07" and len(spirv) % 4 == 0
    spirv_val(spirv)


def test_identical_source_compiles_once():
    compile_glsl(SRC % "3.0")
    before = compile_stats()
    compile_glsl(SRC % "3.0")
    after = compile_stats()
    assert after["cache_hits"] == before["cache_hits"] + 1 and after["compiled"] == before["compiled"]


def test_error_quotes_the_line():
    with pytest.raises(ShaderCompileError) as e:
        compile_glsl(SRC % "undefined_name", name="demo")
    msg = str(e.value)
    assert "demo" in msg and "line 4:" in msg and "undefined_name" in msg


def test_subgroup_and_cooperative_matrix_extensions():
    sub = """#version 450
#extension GL_KHR_shader_subgroup_arithmetic : enable
layout(local_size_x = 32) in;
layout(set = 0, binding = 0) buffer B { float v[]; };
void main() { v[gl_GlobalInvocationID.x] = subgroupAdd(v[gl_GlobalInvocationID.x]); }
"""
    spirv_val(compile_glsl(sub))
    coop = """#version 450
#extension GL_KHR_cooperative_matrix : enable
#extension GL_KHR_memory_scope_semantics : enable
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : enable
layout(local_size_x = 32) in;
layout(set = 0, binding = 0) buffer B { float16_t v[]; };
void main() {
    coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> a;
    coopMatLoad(a, v, 0, 16, gl_CooperativeMatrixLayoutRowMajor);
    coopMatStore(a, v, 256, 16, gl_CooperativeMatrixLayoutRowMajor);
}
"""
    assert compile_glsl(coop, target="vulkan1.3")[:4] == b"\x03\x02\x23\x07"


def test_many_distinct_shaders():
    for i in range(100):
        compile_glsl(SRC % f"{i}.5")
