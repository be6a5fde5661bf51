"""Render a Kernel into GLSL source: header, defines, binding declarations, common code, template."""
from __future__ import annotations

import numpy as np

from gpuc.compiler import symbolic
from gpuc.compiler.sym_scope import active, hints
from gpuc.compiler.codegen import spvasm
from gpuc.compiler.codegen.glslang import compile_glsl
from gpuc.compiler.codegen.kernel import Kernel
from gpuc.compiler.ew_table import act_glsl
from gpuc.compiler.glsl_literal import literal
from gpuc.compiler.shader_text import supports_storage16, template_source
from gpuc.runtime import spirv
from gpuc.errors import UnsupportedError

GLSL_TYPE = {"float32": "float", "float16": "float16_t", "int32": "int", "uint32": "uint", "bool": "uint"}
VEC4_TYPE = {"float": "vec4", "float16_t": "f16vec4", "int": "ivec4", "uint": "uvec4"}
ARITH_TYPE = {"float16_t": "float", "f16vec4": "vec4"}     # what a load widens to (stores narrow back)
# float16 vec4 bindings a kernel only reads, declared as uvec2 (the same 8 bytes) and widened by


# GLSL helpers for a kernel whose sizes come from push constants (--dynamic: compiler/symbolic.py)
def glsl_header(n: int) -> str:
    """The push-constant block of the run's n sizes, the variables over it, and the division helpers."""
    return "\n".join([f"layout(push_constant) uniform GpucSizes {{ int d[{max(1, n)}]; }} gpuc_pc;"]
                     + [f"#define gpuc_d{k} gpuc_pc.d[{k}]" for k in range(n)] + [GLSL_HELPERS])


GLSL_HELPERS = """int gpuc_fdiv(int a, int b) { int q = a / b; return (q * b != a && ((a < 0) != (b < 0))) ? q - 1 : q; }
int gpuc_fmod(int a, int b) { return a - b * gpuc_fdiv(a, b); }"""


# the cases of common.glsl's gpuc_apply, from the activation codes of compiler/ew_table.py
ACT_CASES = [f"#define GPUC_ACT_CASES {act_glsl('float32')}", f"#define GPUC_IACT_CASES {act_glsl('int32')}"]


def _array(name: str, values) -> str:
    vals = list(values) or [0]
    is_float = any(isinstance(v, (float, np.floating, symbolic.FExpr)) for v in vals)
    ty = "float" if is_float else "int"
    if any(symbolic.is_sym(v) for v in vals):        # sizes of the run: a global initialized at start
        return f"{ty} {name}[{len(vals)}] = {ty}[]({', '.join(_value(v, is_float) for v in vals)});"
    return f"const {ty} {name}[{len(vals)}] = {ty}[]({', '.join(literal(v) for v in vals)});"


def _value(v, is_float: bool) -> str:
    if symbolic.is_sym(v):
        text = symbolic.glsl(v)
        return f"float({text})" if is_float and not isinstance(v, symbolic.FExpr) else text
    return literal(float(v) if is_float else v)


def is_dynamic(k: Kernel) -> bool:
    """Whether kernel k reads sizes known only at run time (--dynamic)."""
    if not active():
        return False
    if symbolic.is_sym(k.invocations):
        return True
    for v in k.defines.values():
        if isinstance(v, (list, tuple, np.ndarray)):
            if isinstance(v, np.ndarray) and v.dtype != object:
                continue
            if any(symbolic.is_sym(x) for x in v):
                return True
        elif symbolic.is_sym(v):
            return True
    return False


def render(k: Kernel, dtypes: dict) -> str:
    """`dtypes`: tensor_id -> numpy dtype name for the bound tensors.  A SPIR-V assembly template
    (codegen/spvasm.py) renders to its assembly."""
    if spvasm.is_asm(k.template):
        return spvasm.render(k, dtypes)
    lines = ["#version 450"]
    if any(dtypes[tid] == "float16" for _, tid in k.bindings):
        if not supports_storage16(k.template):
            raise ValueError(f"{k.label}: template {k.template!r} has no float16 storage support")
        lines.append("#extension GL_EXT_shader_16bit_storage : require")
    lines.append(f"layout(local_size_x = {k.local_x}) in;")
    if is_dynamic(k):            # --dynamic: the run's sizes (compiler/symbolic.py) in a push-constant block
        lines.append(glsl_header(len(hints())))
    consts = []
    for name, v in sorted(k.defines.items()):
        if isinstance(v, (list, tuple, np.ndarray)):
            consts.append(_array(name, v))
        elif symbolic.is_sym(v):
            lines.append(f"#define {name} {symbolic.glsl(v)}")
        else:
            lines.append(f"#define {name} {literal(v)}")
    body = template_source(k.template + ".comp")
    if "TOTAL" in body:   # (elsewhere the count would only split identical modules)
        lines.append(f"#define TOTAL {symbolic.glsl(k.invocations) if symbolic.is_sym(k.invocations) else k.invocations}")
    for slot, (name, tid) in enumerate(k.bindings):
        ty = GLSL_TYPE.get(dtypes[tid])
        if ty is None:          # (a malformed model: e.g. a float convolution's int8 weights without a scale)
            raise UnsupportedError(f"{k.label}: its {k.template} kernel cannot read {name!r} (tensor {tid}) as "
                                   f"{dtypes[tid]} (it binds {', '.join(sorted(GLSL_TYPE))})")
        if name in k.vec4:
            ty = VEC4_TYPE[ty]
        qual = "" if name in k.rw else "writeonly " if slot == 0 else "readonly "
        qual = ("coherent " if name in k.coherent else "") + qual
        lines.append(f"layout(set = 0, binding = {slot}) {qual}buffer B{slot} {{ {ty} {name}[]; }};")
        lines.append(f"#define {name}_S {ty}")                    # storage type (ST narrows to it)
        lines.append(f"#define {name}_A {ARITH_TYPE.get(ty, ty)}")  # arithmetic type (LD widens to it)
        if "_F16" in body:                                    # (a template that copies stored bits: gather_copy)
            lines.append(f"#define {name}_F16 {int(dtypes[tid] == 'float16')}")   # float16 storage
    lines += consts
    lines += ACT_CASES
    lines.append(template_source("common.glsl"))
    lines.append(body)
    return "\n".join(lines) + "\n"


def float_widths(k: Kernel, dtypes: dict) -> set:
    """The float widths kernel `k` computes or stores in: 32, and 16 for float16 storage or arithmetic."""
    half = any(dtypes[tid] == "float16" for _, tid in k.bindings) or bool(k.defines.get("COOPMAT"))
    return {16, 32} if half else {32}


def kernel_spirv(k: Kernel, dtypes: dict, name: str | None = None) -> bytes:
    """SPIR-V of kernel `k`, declaring SignedZeroInfNanPreserve for its float widths, so that no driver
    may assume its floats are never NaN or Inf (the runtime takes the mode out again for a device that
    lacks it: runtime/spirv.py)."""
    return source_spirv(render(k, dtypes), k, dtypes, name)


def source_spirv(source: str, k: Kernel, dtypes: dict, name: str | None = None) -> bytes:
    """kernel_spirv of kernel `k` whose GLSL or assembly (render(k, dtypes)) is `source`."""
    if source.startswith(spvasm.ASM_MARK):
        code = spvasm.assemble(source, name=name or k.label)
    else:
        code = compile_glsl(source, name=name or k.label)
    return spirv.declare_nan_preserve(code, float_widths(k, dtypes))
