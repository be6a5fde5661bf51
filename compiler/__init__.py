"""gpuc compiler: TFLite -> IR -> passes -> GLSL -> SPIR-V -> bundle.

`compile_model` consults the compile cache before importing the heavy parts, so a hit costs
little more than reading and hashing the model.
"""
from __future__ import annotations

import os

from gpuc.errors import GpucError

DEFAULT_OPTIONS = {"precision": "fp32", "disable_passes": []}


def normalize_options(options: dict) -> dict:
    opts = dict(DEFAULT_OPTIONS, **{k: v for k, v in options.items() if v is not None})
    unknown = set(opts) - set(DEFAULT_OPTIONS)
    if unknown:
        raise GpucError(f"unknown compile option(s): {sorted(unknown)}")
    opts["disable_passes"] = sorted(opts["disable_passes"])
    return opts


def read_model_bytes(model) -> tuple[bytes, str]:
    if isinstance(model, (bytes, bytearray, memoryview)):
        return bytes(model), "model"
    path = os.fspath(model)
    try:
        with open(path, "rb") as f:
            return f.read(), os.path.splitext(os.path.basename(path))[0]
    except OSError as e:
        raise GpucError(f"cannot read model {path!r}: {e.strerror}") from None


last_compile = {"cache": None}      # "hit" / "miss" / None (cache off): for the CLI and tests


def compile_model(model, output=None, cache: bool = True, **options) -> bytes:
    from gpuc.compiler import cache as cc
    opts = normalize_options(options)
    data, name = read_model_bytes(model)
    use_cache = cache and os.environ.get("GPUC_NO_CACHE", "") in ("", "0")
    key = cc.cache_key(data + name.encode(), opts) if use_cache else None
    out = cc.lookup(key) if key else None
    last_compile["cache"] = ("hit" if out is not None else "miss") if key else None
    if out is None:
        from gpuc.compiler.driver import compile_bytes
        out = compile_bytes(data, name, opts)
        if key:
            cc.store(key, out)
    if output is not None:
        from gpuc.runtime import cachedir
        try:
            if last_compile["cache"] == "hit":
                cachedir.link_or_copy(cc.entry_path(key), output, out)
            else:
                cachedir.atomic_write(output, out)
        except OSError as e:
            raise GpucError(f"cannot write bundle {os.fspath(output)!r}: {e.strerror}") from None
    return out
