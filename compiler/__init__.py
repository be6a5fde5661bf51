"""gpuc compiler: TFLite -> IR -> passes -> GLSL -> SPIR-V -> bundle.

`compile_model` consults the compile cache before importing the heavy parts, so a hit costs
little more than reading and hashing the model.
"""
from __future__ import annotations

import os

from gpuc.errors import GpucError

DEFAULT_OPTIONS = {"precision": "fp32", "disable_passes": [], "max_batch": 1}
MAX_BATCH_LIMIT = 4096


def normalize_options(options: dict) -> dict:
    opts = dict(DEFAULT_OPTIONS, **{k: v for k, v in options.items() if v is not None})
    unknown = set(opts) - set(DEFAULT_OPTIONS)
    if unknown:
        raise GpucError(f"unknown compile option(s): {sorted(unknown)}")
    opts["disable_passes"] = sorted(opts["disable_passes"])
    mb = opts["max_batch"]
    if isinstance(mb, bool) or not isinstance(mb, int) or not 1 <= mb <= MAX_BATCH_LIMIT:
        raise GpucError(f"max_batch must be an integer in 1..{MAX_BATCH_LIMIT}, got {mb!r}")
    return opts


def check_max_batch(bundle_bytes: bytes, n: int) -> None:
    """--max-batch N > 1: the runtime stacks batch items along axis 0 of every input and output."""
    from gpuc.errors import UnsupportedError
    from gpuc.runtime.batch import io_problem
    from gpuc.runtime.bundle import read_bundle
    problem = io_problem(read_bundle(bundle_bytes))
    if problem:
        raise UnsupportedError(f"--max-batch {n}: {problem}")


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
    if out is not None:                      # a cache hit repeats the compiler's warnings
        import sys
        from gpuc.runtime.bundle import header_stats
        for w in header_stats(out).get("warnings", []):
            print(f"gpuc: warning: {w}", file=sys.stderr)
    if out is None:
        from gpuc.compiler.driver import compile_bytes
        out = compile_bytes(data, name, opts)
        if opts["max_batch"] > 1:
            check_max_batch(out, opts["max_batch"])
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
