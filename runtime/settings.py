"""The runtime settings: every switch the runtime and the CLI take from the environment, in one
frozen record, read here and nowhere else (compile-time switches: gpuc.compiler.options).

`current()` is the Settings of the environment as it is now, with any `override(...)` on top.  It is
rebuilt only when one of the variables below changed since the last call (one lookup per variable),
so a test's monkeypatch.setenv still takes effect; a process that never changes its environment reads
it once.  In-process, without touching the environment (tests):

    with settings.override(all_barriers=True, upload_memory="cached"):
        ...

Writes to the environment (for child processes: `gpuc --timeout`, `gpuc bench`) also go through
here: `export(VAR=value)` and `child_env(**extra)`.

Imports only `os`: the compile cache's fast path (gpuc/launch.py) reads
the cache folder from here, and must not import `dataclasses` (~8 ms).  So `Record` is a small
hand-written frozen record (fields, defaults, `replace`, equality, hashing) rather than a dataclass.
"""
from __future__ import annotations

import os

OFF = ("", "0")                       # a boolean variable is on unless unset, empty or "0"


class Record:
    """A frozen record: FIELDS is a tuple of (name, default, env var or None, meaning).  Keyword
    construction (unknown names refused), `replace(**changes)`, equality and hashing by value."""
    FIELDS: tuple = ()
    __slots__ = ()

    def __init__(self, **values):
        names = self.field_names()
        unknown = set(values) - set(names)
        if unknown:
            raise TypeError(f"{type(self).__name__}: unknown field(s) {sorted(unknown)}")
        for name, default, *_ in self.FIELDS:
            object.__setattr__(self, name, values.get(name, default))

    @classmethod
    def field_names(cls) -> tuple:
        return tuple(f[0] for f in cls.FIELDS)

    def __setattr__(self, name, value):
        raise AttributeError(f"{type(self).__name__} is frozen: use .replace({name}=...)")

    def replace(self, **changes):
        return type(self)(**dict(self.items(), **changes))

    def items(self) -> list:
        return [(n, getattr(self, n)) for n in self.field_names()]

    def __eq__(self, other):
        return type(other) is type(self) and self.items() == other.items()

    def __hash__(self):
        return hash(repr(self.items()))

    def __repr__(self):
        return f"{type(self).__name__}({', '.join(f'{n}={v!r}' for n, v in self.items())})"


def flag(environ, var: str) -> bool:
    return environ.get(var, "") not in OFF


def _int(text, default: int) -> int:
    try:
        return int(text)
    except (TypeError, ValueError):
        return default


DEFAULT_CACHE_MAX_BYTES = 2 << 30
VISIBLE_ENVS = ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES")   # a scheduler's GPU choice (device_select)


# run()'s host copies are split over the copy threads from this size (GPUC_COPY_SPLIT_BYTES).  On the H100 host
# (2026-11-27, benchmarks/run_overhead.py, fp16, input staging in the BAR; "copy in" with 8 threads / 1 thread)
# the threads lost at every size up to 9.6 MB -- 1.07 MB 0.406 / 0.068 ms, 1.2 MB 0.522 / 0.080, 2.4 MB 0.834 /
# 0.203, 4.8 MB 0.844 / 0.362, 9.6 MB 0.889 / 0.699 (threads parked on idle cores wake late) -- and won at a batch
# of 32 224 x 224 images, 19.3 MB 0.80 / 1.03 (session 9).  The earlier 1 MiB put a batch-1 299 x 299 input on
# the threads: its run() took 1.88 ms against 1.19 on one thread.
COPY_SPLIT_BYTES = 16 << 20

# run() inputs from this size are read in place (GPUC_HOST_IMPORT_BYTES, runtime/host_import.py).  On the H100 host
# (2026-11-28, benchmarks/run_overhead.py, fp16): a batch of 32 224 x 224 images (19.3 MB) took a bottleneck CNN's
# run() from 5.43 to 4.56 ms; one image (0.6 MB, imported from 64 KiB) gained nothing -- a windowed-attention
# transformer 1.080 -> 1.066 ms, the CNN 0.752 -> 0.789, in-place runs differing by as much -- where an import costs
# 0.3 ms and its free 0.3.
HOST_IMPORT_BYTES = 4 << 20


class Settings(Record):
    # (name, default, environment variable, meaning); the README's configuration table lists them
    FIELDS = (
        ("device", None, "GPUC_DEVICE", "Vulkan device: index, UUID, PCI bus id, name substring or auto"),
        ("gpu_timeout_s", None, "GPUC_GPU_TIMEOUT_S", "seconds one run may take on the GPU (text, checked "
                                                      "at load; 0: no limit; default 60 s on a GPU)"),
        ("validation", False, "GPUC_VALIDATION", "enable the Khronos validation layer and record its messages"),
        ("disable_fp16", False, "GPUC_DISABLE_FP16", "act as a device without 16-bit storage / arithmetic"),
        ("disable_coopmat", False, "GPUC_DISABLE_COOPMAT", "act as a device without cooperative matrices"),
        ("disable_coopmat2", False, "GPUC_DISABLE_COOPMAT2", "act as a device without NV cooperative matrix 2"),
        ("disable_subgroup_ops", False, "GPUC_DISABLE_SUBGROUP_OPS", "act as a device without subgroup operations"),
        ("disable_float_controls", False, "GPUC_DISABLE_FLOAT_CONTROLS",
         "act as a device without VK_KHR_shader_float_controls"),
        ("variants", None, "GPUC_VARIANTS", "kernel variant choice: off, force, or NAME=auto|off|force,..."),
        ("tune", "auto", "GPUC_TUNE", "kernel choice by measurement at first load: auto (GPUs, where the "
                                      "bundle offers candidates), on, off (runtime/tuning.py)"),
        ("upload_memory", "device", "GPUC_UPLOAD_MEMORY", "input staging memory: device (BAR), cached or uncached"),
        ("weights_in_bar", False, "GPUC_WEIGHTS_IN_BAR", "weights in host-mapped device-local memory"),
        ("all_barriers", False, "GPUC_ALL_BARRIERS", "a barrier between every two dispatches (A/B, debugging)"),
        ("load_threads", True, "GPUC_LOAD_THREADS", "overlap load work on threads (0 / off / false: none)"),
        ("pipeline_threads", 0, "GPUC_PIPELINE_THREADS", "threads creating pipelines (0: the CPU count, at most 8)"),
        ("copy_threads", 0, "GPUC_COPY_THREADS", "threads copying a run's inputs / outputs to and from staging "
                                                 "(0: the CPU count, at most 8; 1: the caller's thread only)"),
        ("copy_split_bytes", COPY_SPLIT_BYTES, "GPUC_COPY_SPLIT_BYTES", "host copies from this size are split over the copy threads"),
        ("copy_chunks", 4, "GPUC_COPY_CHUNKS", "parts per copy thread, handed out as the threads come (1: one fixed "
                                              "part each)"),
        ("upload_chunk_bytes", 4 << 20, "GPUC_UPLOAD_CHUNK_BYTES", "a batch's inputs through host-memory staging "
                                                                   "upload in chunks of this size, overlapped (0: off)"),
        ("upload_pipeline", "auto", "GPUC_UPLOAD_PIPELINE", "chunked, overlapped upload of a batch's inputs: auto "
                                                            "(where input staging is host memory), on, off"),
        ("host_import", "auto", "GPUC_HOST_IMPORT", "run() reads large inputs from the caller's memory (VK_EXT_external_"
                                                    "memory_host): auto (an array's second run), on, off"),
        ("host_import_bytes", HOST_IMPORT_BYTES, "GPUC_HOST_IMPORT_BYTES", "inputs from this size are read in place by run()"),
        ("pipeline_cache", True, "GPUC_PIPELINE_CACHE", "keep Vulkan pipeline caches on disk (0 / off / false: no)"),
        ("cache_dir", None, "GPUC_CACHE_DIR", "cache folder (default $XDG_CACHE_HOME/gpuc, else ~/.cache/gpuc)"),
        ("xdg_cache_home", None, "XDG_CACHE_HOME", "the user's cache folder, when GPUC_CACHE_DIR is not set"),
        ("cache_max_bytes", DEFAULT_CACHE_MAX_BYTES, "GPUC_CACHE_MAX_BYTES", "cache size cap (LRU eviction)"),
        ("no_compile_cache", False, "GPUC_NO_CACHE", "never read or write the compile cache"),
        ("no_validation_cache", False, "GPUC_NO_VALIDATION_CACHE", "re-validate shaders on every load"),
        ("glslang_lib_dir", None, "GPUC_GLSLANG_LIB_DIR", "folder searched first for glslang / SPIRV-Tools"),
        ("no_spirv_tools", False, "GPUC_NO_SPIRV_TOOLS", "act as an install without SPIRV-Tools"),
        ("debug", False, "GPUC_DEBUG", "the CLI shows tracebacks of internal errors"),
        ("visible_devices", (), None, "(variable, value) of CUDA_VISIBLE_DEVICES / NVIDIA_VISIBLE_DEVICES set"),
        ("ray_address", None, "RAY_ADDRESS", "the Ray cluster `gpuc serve` joins"),
        ("ray_direct_ingress", False, "RAY_SERVE_ENABLE_DIRECT_INGRESS",
         "Ray Serve's direct ingress (`gpuc serve --direct-ingress` sets it for the cluster it starts)"),
        ("completing", False, "_GPUC_COMPLETE", "click is completing a command line (the fast path stays out)"),
    )
    __slots__ = tuple(f[0] for f in FIELDS)

    def device_key(self) -> tuple:
        """What a shared Device depends on: everything but the timeout (a setting of the models, read
        when they load) and the folders and CLI switches."""
        skip = ("gpu_timeout_s", "copy_threads", "copy_split_bytes", "copy_chunks", "upload_chunk_bytes", "upload_pipeline",
                "host_import", "host_import_bytes", "cache_dir", "xdg_cache_home", "cache_max_bytes", "no_compile_cache", "debug",
                "ray_address", "ray_direct_ingress", "completing")
        return tuple(kv for kv in self.items() if kv[0] not in skip)


def _parse(environ) -> Settings:
    g = environ.get
    return Settings(
        device=g("GPUC_DEVICE"), gpu_timeout_s=g("GPUC_GPU_TIMEOUT_S"),
        validation=flag(environ, "GPUC_VALIDATION"), disable_fp16=flag(environ, "GPUC_DISABLE_FP16"),
        disable_coopmat=flag(environ, "GPUC_DISABLE_COOPMAT"), disable_coopmat2=flag(environ, "GPUC_DISABLE_COOPMAT2"),
        disable_subgroup_ops=flag(environ, "GPUC_DISABLE_SUBGROUP_OPS"),
        disable_float_controls=flag(environ, "GPUC_DISABLE_FLOAT_CONTROLS"),
        variants=g("GPUC_VARIANTS"), tune=(g("GPUC_TUNE") or "auto").strip().lower(), upload_memory=g("GPUC_UPLOAD_MEMORY", "device"),
        weights_in_bar=flag(environ, "GPUC_WEIGHTS_IN_BAR"), all_barriers=flag(environ, "GPUC_ALL_BARRIERS"),
        load_threads=g("GPUC_LOAD_THREADS", "1") not in ("0", "off", "false"),
        pipeline_threads=_int(g("GPUC_PIPELINE_THREADS"), 0),
        copy_threads=max(0, _int(g("GPUC_COPY_THREADS"), 0)),
        copy_split_bytes=max(1, _int(g("GPUC_COPY_SPLIT_BYTES"), COPY_SPLIT_BYTES)),
        copy_chunks=max(1, _int(g("GPUC_COPY_CHUNKS"), 4)),
        upload_chunk_bytes=max(0, _int(g("GPUC_UPLOAD_CHUNK_BYTES"), 4 << 20)),
        upload_pipeline=(g("GPUC_UPLOAD_PIPELINE") or "auto").strip().lower(),
        host_import=(g("GPUC_HOST_IMPORT") or "auto").strip().lower(),
        host_import_bytes=max(1, _int(g("GPUC_HOST_IMPORT_BYTES"), HOST_IMPORT_BYTES)),
        pipeline_cache=g("GPUC_PIPELINE_CACHE", "1") not in ("0", "off", "false", ""),
        cache_dir=g("GPUC_CACHE_DIR") or None, xdg_cache_home=g("XDG_CACHE_HOME") or None,
        cache_max_bytes=_int(g("GPUC_CACHE_MAX_BYTES", DEFAULT_CACHE_MAX_BYTES), DEFAULT_CACHE_MAX_BYTES),
        no_compile_cache=flag(environ, "GPUC_NO_CACHE"), no_validation_cache=flag(environ, "GPUC_NO_VALIDATION_CACHE"),
        glslang_lib_dir=g("GPUC_GLSLANG_LIB_DIR") or None, no_spirv_tools=flag(environ, "GPUC_NO_SPIRV_TOOLS"),
        debug=bool(g("GPUC_DEBUG")),
        visible_devices=tuple((v, environ[v]) for v in VISIBLE_ENVS if v in environ),
        ray_address=g("RAY_ADDRESS"), ray_direct_ingress=flag(environ, "RAY_SERVE_ENABLE_DIRECT_INGRESS"),
        completing="_GPUC_COMPLETE" in environ)


ENV_NAMES = tuple(f[2] for f in Settings.FIELDS if f[2]) + VISIBLE_ENVS

_memo: list = [None, None]            # [environment snapshot, Settings parsed from it]
_overrides: list = []                 # override(...) stack, innermost last


def from_environ(environ=None) -> Settings:
    """The Settings of `environ` (default: this process's environment), without overrides."""
    if environ is not None:
        return _parse(environ)
    snap = tuple(os.environ.get(k) for k in ENV_NAMES)
    if _memo[0] != snap:
        _memo[:] = [snap, _parse(os.environ)]
    return _memo[1]


def current() -> Settings:
    """The settings in force: the environment's, then each active override(...)."""
    s = from_environ()
    for changes in _overrides:
        s = s.replace(**changes)
    return s


class override:
    """`with settings.override(field=value, ...):` -- the settings in force inside, in this process
    (all threads), without changing the environment.  Unknown fields are refused."""

    def __init__(self, **changes):
        Settings().replace(**changes)          # refuses unknown names now
        self.changes = changes

    def __enter__(self):
        _overrides.append(self.changes)
        return current()

    def __exit__(self, *exc):
        _overrides.remove(self.changes)
        return False


def export(var: str, value: str) -> None:
    """Set environment variable `var` (one of ENV_NAMES) for this process and the ones it starts
    (`gpuc --timeout` sets GPUC_GPU_TIMEOUT_S)."""
    if var not in ENV_NAMES:
        raise ValueError(f"{var} is not a gpuc setting")
    os.environ[var] = value


def child_env(**extra) -> dict:
    """The environment for a child process: this one's, with the variables `extra` set (settings or
    a driver's own, e.g. gpuc bench turning the driver's shader caches off)."""
    return dict(os.environ, **extra)
