"""gpuc compiler: TFLite -> IR -> passes -> GLSL -> SPIR-V -> bundle.

`compile` (-> CompileResult; `compile_model` -> its bytes) consults the compile cache before importing
the heavy parts, so a hit costs little more than hashing the model and the cached bundle.  This module
imports only `os`, gpuc.errors and the lean options / settings records: the CLI's fast path
(gpuc/launch.py) uses `normalize_options` from here.  So the imports inside its functions are deliberately lazy (start-up time), none breaks an import cycle.
"""
from __future__ import annotations

import os

from gpuc.compiler.options import CompileOptions, resolve, using
from gpuc.errors import GpucError, UnsupportedError
from gpuc.runtime.settings import Record

# max_binding_bytes: the largest tensor a kernel may bind (the target's maxStorageBufferRange; the
# runtime checks the bundle's against the device it loads on)
DEFAULT_OPTIONS = {"precision": "fp32", "disable_passes": [], "max_batch": 1, "input_shapes": {}, "dynamic": [],
                   "max_binding_bytes": (1 << 32) - 1}
MAX_BATCH_LIMIT = 4096


def normalize_options(options: dict) -> dict:
    opts = dict(DEFAULT_OPTIONS, **{k: v for k, v in options.items() if v is not None})
    unknown = set(opts) - set(DEFAULT_OPTIONS)
    if unknown:
        raise GpucError(f"unknown compile option(s): {sorted(unknown)}")
    opts["disable_passes"] = sorted(opts["disable_passes"])
    if opts["input_shapes"]:
        from gpuc.compiler.shapes import normalize_input_shapes   # (lazy: start-up time, see above)
        opts["input_shapes"] = normalize_input_shapes(opts["input_shapes"])
    else:
        opts["input_shapes"] = {}
    if opts["dynamic"]:
        from gpuc.compiler.shapes import normalize_dynamic       # (lazy: start-up time, see above)
        opts["dynamic"] = normalize_dynamic(opts["dynamic"])
    else:
        opts["dynamic"] = []
    mb = opts["max_batch"]
    if isinstance(mb, bool) or not isinstance(mb, int) or not 1 <= mb <= MAX_BATCH_LIMIT:
        raise GpucError(f"max_batch must be an integer in 1..{MAX_BATCH_LIMIT}, got {mb!r}")
    lim = opts["max_binding_bytes"]
    if isinstance(lim, bool) or not isinstance(lim, int) or lim < 1024:
        raise GpucError(f"max_binding_bytes must be an integer >= 1024, got {lim!r}")
    return opts


def check_max_batch(bundle_bytes: bytes, n: int) -> None:
    """--max-batch N > 1: the runtime stacks batch items along axis 0 of every input and output."""
    from gpuc.runtime.batch import io_problem          # (lazy: start-up time, see above)
    from gpuc.runtime.bundle import read_bundle
    problem = io_problem(read_bundle(bundle_bytes))
    if problem:
        raise UnsupportedError(f"--max-batch {n}: {problem}")


BYTES_MODEL_NAME = "model"                  # the name of a model given as bytes
MODEL_BYTES_TYPES = (bytes, bytearray, memoryview)     # a model given as bytes; anything else is a path


def model_name(path) -> str:
    return os.path.splitext(os.path.basename(os.fspath(path)))[0]


def _read_error(model, e: OSError) -> GpucError:
    return GpucError(f"cannot read model {os.fspath(model)!r}: {e.strerror}")


MAX_MODEL_BYTES = 1 << 31       # a flatbuffer's limit (larger TFLite models keep weights outside it)


def read_model_bytes(model) -> tuple[bytes, str]:
    if isinstance(model, MODEL_BYTES_TYPES):
        return bytes(model), BYTES_MODEL_NAME
    try:
        with open(os.fspath(model), "rb") as f:
            data = f.read(MAX_MODEL_BYTES + 1)        # bounded: a device like /dev/zero never ends
    except OSError as e:
        raise _read_error(model, e) from None
    if len(data) > MAX_MODEL_BYTES:
        raise GpucError(f"cannot read model {os.fspath(model)!r}: larger than 2 GiB (a flatbuffer's limit)")
    return data, model_name(model)


class CompileResult(Record):
    """What one compile gave: the bundle, where it was written, and whether the cache answered."""
    FIELDS = (
        ("bundle", b"", None, "the bundle's bytes"),
        ("path", None, None, "the file it was written to (the `output` given), else None"),
        ("cache", None, None, '"hit", "miss", or None (the compile cache was off)'),
        ("key", None, None, "its compile-cache key (None: cache off)"),
        ("stats", None, None, "the bundle header's stats (dispatches, arena_bytes, warnings...)"),
        ("options", None, None, "the CompileOptions it was compiled with"),
    )
    __slots__ = tuple(f[0] for f in FIELDS)

    @property
    def hit(self) -> bool:
        return self.cache == "hit"


def compile(model, output=None, cache: bool = True, options=None, **kwargs) -> CompileResult:  # noqa: A001
    """Compile a .tflite (path or bytes) through the compile cache.  options: a CompileOptions
    (gpuc.compiler.options); kwargs: any of its fields (precision="fp16", max_batch=8, ...), which
    win over `options`.  The compile-time environment variables are read here, once."""
    from gpuc.compiler import cache as cc               # (lazy: start-up time, see above)
    opts = resolve(options, **kwargs)
    name = None
    if not isinstance(model, MODEL_BYTES_TYPES) and not cc.regular_file(model):
        model, name = read_model_bytes(model)     # a pipe or FIFO can be read once: keep its bytes
    try:
        key = cc.model_key(model, opts, name) if cc.enabled(cache) else None
    except OSError as e:
        raise _read_error(model, e) from None
    found = cc.lookup(key) if key else None      # (bundle, stats), checked once
    if found is not None:
        out, stats = found
        cc.repeat_warnings(stats)
    else:
        out, stats, key = _compile(model, opts, key, name)
    if output is not None:
        from gpuc.runtime import cachedir
        try:
            if found is not None:
                cachedir.copy_out(cc.entry_file(key, create=False), output, out)
            else:
                cachedir.atomic_write(output, out, private=False)
        except OSError as e:
            raise GpucError(f"cannot write bundle {os.fspath(output)!r}: {e.strerror}") from None
    return CompileResult(bundle=out, path=output, cache=("hit" if found is not None else "miss") if key else None,
                         key=key, stats=stats, options=opts)


def compile_model(model, output=None, cache: bool = True, options=None, **kwargs) -> bytes:
    """compile(...).bundle: the bundle's bytes (the long-standing API)."""
    return compile(model, output, cache, options, **kwargs).bundle


def _compile(model, opts: CompileOptions, key: str | None, name: str | None = None) -> tuple[bytes, dict, str | None]:
    """Compile (a cache miss, or the cache off); stores the bundle when `key`.  Returns the bundle,
    its stats and the key it was stored under: that of exactly the bytes compiled."""
    from gpuc.compiler import cache as cc               # (lazy: start-up time, see above)
    from gpuc.compiler.entry import compile_bytes
    from gpuc.runtime.bundle import header_stats
    data, read_name = read_model_bytes(model)
    name = name or read_name
    with using(opts):
        out = compile_bytes(data, name, opts.bundle_options())
    if opts.max_batch > 1:
        check_max_batch(out, opts.max_batch)
    stats = header_stats(out)
    if key:
        key = cc.cache_key(data, name, opts)
        cc.store(key, out, stats)
    return out, stats, key
