"""Shared memory of every shader variant the compiler's standard variant set holds (compiler/codegen/variants.py,
`make shaders`' set: every template's code paths, and each planner's sample at its largest plan): no more than it
may take, the `shared_memory` the compiler requires of a device for such a kernel, else the 32 KiB every Vulkan
device allows; sized as the runtime's load check sizes them (runtime/shader_check.py), so a bundle's own kernels
are never refused by a device that meets their requirements (a 32 KiB Mali, Adreno or lavapipe included)."""
import re

from gpuc.compiler.codegen import glsl
from gpuc.compiler.codegen.shared_memory import overrun, shared_bytes
from gpuc.compiler.codegen.variants import PORTABLE_SMEM, declared_variants

# a source declaring workgroup variables (GLSL `shared`, SPIR-V assembly's Workgroup storage class); the others
# take none, and are not compiled here (`make shaders` compiles them all)
DECLARES_SHARED = re.compile(r"^\s*shared\s|\bWorkgroup\b", re.M)


def test_every_variant_takes_no_more_shared_memory_than_it_may():
    over, sized = [], 0
    for _template, k, dtypes, allowed in declared_variants():
        source = glsl.render(k, dtypes)
        if not DECLARES_SHARED.search(source):
            continue
        line = overrun(k.label, glsl.source_spirv(source, k, dtypes), allowed)
        sized += 1
        if line:
            over.append(line)
    assert sized > 1000 and not over, "\n".join(over)


def test_the_size_is_every_workgroup_variable():
    """shared_bytes: every shared variable at its natural size (arrays of vectors, scalars, 2-D arrays, a struct)."""
    from gpuc.compiler.codegen.glslang import compile_glsl
    code = compile_glsl("#version 450\nlayout(local_size_x = 64) in;\nstruct S { vec3 a; int b; };\n"
                        "shared vec4 big[1024];\nshared float two[2][100];\nshared uint one;\nshared S s[3];\n"
                        "layout(set = 0, binding = 0) buffer B0 { float y[]; };\n"
                        "void main() { big[gl_LocalInvocationIndex] = vec4(1.0); two[1][3] = 2.0; one = 1u; s[1].b = 2;"
                        " barrier(); y[0] = big[3].x + two[1][3] + float(one + uint(s[1].b)); }\n")
    took = 1024 * 16 + 2 * 100 * 4 + 4 + 3 * 16
    assert shared_bytes(code) == took
    assert overrun("t", code, PORTABLE_SMEM) is None and overrun("t", code, took) is None
    assert overrun("t", code, took - 1) == f"shader t takes {took} bytes of shared memory, over the {took - 1} it may take"
