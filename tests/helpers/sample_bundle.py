"""A minimal hand-made bundle (one ADD dispatch over a weights tensor) for the bundle-format tests
(tests/runtime/test_bundle.py, test_bundle_sections.py)."""
import numpy as np

from gpuc.compiler.codegen.glslang import compile_glsl
from gpuc.runtime import bundle as B
from gpuc.runtime import shader_check

# y = x + w: binding 0 written, 1 and 2 read, 16 bytes each, one workgroup
SPIRV = shader_check.add_manifest(compile_glsl("""#version 450
layout(local_size_x = 4) in;
layout(set = 0, binding = 0) writeonly buffer B0 { float y[]; };
layout(set = 0, binding = 1) readonly buffer B1 { float x[]; };
layout(set = 0, binding = 2) readonly buffer B2 { float w[]; };
void main() { uint i = gl_GlobalInvocationID.x; y[i] = x[i] + w[i]; }
""", name="sample"), {"ext": [16, 16, 16], "uses": [{
    "d": 0, "t": [1, 0, 2], "off": [256, 0, 0], "mem": [0, 0, 1], "dt": ["float32"] * 3, "sh": [[1, 4], [1, 4], [4]],
    "g": [1, 1, 1], "item": 0}]})


def sample(**kw):
    t = [B.TensorInfo("x", (1, 4), "float32", B.ARENA, 0, 16), B.TensorInfo("y", (1, 4), "float32", B.ARENA, 256, 16),
         B.TensorInfo("w", (4,), "float32", B.WEIGHTS, 0, 16, {"scale": [0.5], "zero_point": [3], "axis": 0})]
    args = dict(model_name="m", tensors=t, inputs=[0], outputs=[1], shaders=[B.Shader("s", SPIRV, 3)],
                dispatches=[B.Dispatch(0, [1, 0, 2], (1, 1, 1), b"", "ADD")], arena_bytes=512,
                weights=np.arange(16, dtype=np.uint8), options={"precision": "fp32"},
                stats={"ops": 1, "io": B.io_record(t, [0], [1], {"precision": "fp32"})},
                compiler_version="9.9", fingerprint="abc")
    args.update(kw)
    return B.Bundle(**args)
