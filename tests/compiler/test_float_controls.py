"""SignedZeroInfNanPreserve: every shader declares it (compiler/codegen/glsl.py), and the runtime takes
it out for a device without it (runtime/spirv.py), leaving a valid module."""
import subprocess
import sys

import numpy as np
import pytest

from gpuc.compiler.codegen.glslang import compile_glsl, spirv_val
from gpuc.compiler.codegen.glsl import kernel_spirv
from gpuc.compiler.codegen.kernel import Kernel
from gpuc.runtime import spirv
from helpers.repo import ROOT

SRC = """#version 450
#extension GL_EXT_shader_16bit_storage : require
layout(local_size_x = 64) in;
layout(set = 0, binding = 0) buffer B0 { float16_t y[]; };
void main() { uint i = gl_GlobalInvocationID.x; float v = float(y[i]); y[i] = float16_t(v < 0.0 ? 0.0 : v); }
"""


def _has_extension(code: bytes) -> bool:
    return spirv.FLOAT_CONTROLS in code


def test_kernels_declare_the_mode():
    k = Kernel("unary_math", [("out_", 0), ("x", 1)], 8, dict(EW_EXPR="ew_relu(v0)"), "RELU")
    for dt, widths in (("float32", {32}), ("float16", {16, 32})):
        code = kernel_spirv(k, {0: dt, 1: dt})
        assert spirv.nan_preserve_widths(code) == widths
        spirv_val(code)
        assert spirv.declare_nan_preserve(code, widths) is code          # already there: unchanged


def _module():
    return spirv.declare_nan_preserve(compile_glsl(SRC), {16, 32})


@pytest.mark.parametrize("widths", [{16, 32}, {32}, {16}, set()])
def test_adapt_keeps_only_the_device_widths(widths):
    code = _module()
    assert spirv.nan_preserve_widths(code) == {16, 32}
    out = spirv.adapt(code, widths)
    assert spirv.nan_preserve_widths(out) == widths
    assert _has_extension(out) == bool(widths)
    if widths == {16, 32}:
        assert out is code
    spirv_val(out)                       # still a valid module (capability and extension consistent)


def test_adapt_leaves_foreign_words_alone():
    for junk in (b"", b"\x00" * 19, b"\x01\x02\x03\x04" * 8, _module()[:-2]):
        assert spirv.adapt(junk, set()) == junk


def test_device_without_float_controls_runs_nan_model():
    """GPUC_DISABLE_FLOAT_CONTROLS=1: the modes are taken out at load, NaN still reaches the output
    (the NaN-keeping code does not rely on the mode)."""
    pytest.importorskip("vulkan")
    script = (
        f"import numpy as np, gpuc, sys; sys.path.insert(0, {str(ROOT / 'tests')!r})\n"
        "from helpers.ops import one_op\n"
        "m, f = one_op('RELU', [np.float32([np.nan, -1, 2])], 'float32')\n"
        "d = gpuc.open_device(); assert d.nan_preserve_widths == set(), d.nan_preserve_widths\n"
        "with gpuc.load(gpuc.compile(m, cache=False), device=d) as g: print(g.run(f)[0].tolist())\n"
        "d.close()\n")
    import os
    env = dict(os.environ, GPUC_DISABLE_FLOAT_CONTROLS="1")
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    out = np.array(eval(r.stdout.strip().splitlines()[-1].replace("nan", "float('nan')")))
    assert np.isnan(out[0]) and out[1] == 0 and out[2] == 2
