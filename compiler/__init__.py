"""gpuc compiler: TFLite -> IR -> passes -> GLSL -> SPIR-V -> bundle.

`compile` (-> CompileResult; `compile_model` -> its bytes) consults the compile cache before importing
the heavy parts, so a hit costs little more than hashing the model and the cached bundle.  This module
imports only `os`, gpuc.errors, the lean options / settings records and what a compile is given
(compile_inputs.py: the model's bytes and name, `normalize_options`, which the CLI's fast path uses).  So the imports inside its functions are deliberately lazy (start-up time), none breaks an import cycle.
"""
from __future__ import annotations

import os

from gpuc.compiler.compile_inputs import (  # noqa: F401 - the package's API
    BYTES_MODEL_NAME, DEFAULT_OPTIONS, MAX_BATCH_LIMIT, MAX_MODEL_BYTES, MODEL_BYTES_TYPES, check_max_batch, model_name,
    normalize_options, read_error, read_model_bytes)
from gpuc.compiler.options import CompileOptions, resolve, using
from gpuc.errors import GpucError
from gpuc.runtime.settings import Record


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
        raise read_error(model, e) from None
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
