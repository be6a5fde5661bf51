"""What a compile is given: the model (a path or bytes: its bytes and the name the bundle gets) and the
bundle options (their defaults, `normalize_options`, the --max-batch check).  gpuc.compiler re-exports
them (the package's API); the modules below it (options.py, cache.py, prepare.py) import them from here,
not from the package.  Imports only `os` and gpuc.errors up front (the CLI's fast path reads it).
"""
from __future__ import annotations

import os

from gpuc.errors import GpucError, UnsupportedError

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
        from gpuc.compiler.shapes import normalize_input_shapes   # (lazy: start-up time)
        opts["input_shapes"] = normalize_input_shapes(opts["input_shapes"])
    else:
        opts["input_shapes"] = {}
    if opts["dynamic"]:
        from gpuc.compiler.shapes import normalize_dynamic       # (lazy: start-up time)
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
    from gpuc.runtime.batch import io_problem          # (lazy: start-up time)
    from gpuc.runtime.bundle import read_bundle
    problem = io_problem(read_bundle(bundle_bytes))
    if problem:
        raise UnsupportedError(f"--max-batch {n}: {problem}")


BYTES_MODEL_NAME = "model"                  # the name of a model given as bytes
MODEL_BYTES_TYPES = (bytes, bytearray, memoryview)     # a model given as bytes; anything else is a path


def model_name(path) -> str:
    return os.path.splitext(os.path.basename(os.fspath(path)))[0]


def read_error(model, e: OSError) -> GpucError:
    return GpucError(f"cannot read model {os.fspath(model)!r}: {e.strerror}")


MAX_MODEL_BYTES = 1 << 31       # a flatbuffer's limit (larger TFLite models keep weights outside it)


def read_model_bytes(model) -> tuple[bytes, str]:
    if isinstance(model, MODEL_BYTES_TYPES):
        return bytes(model), BYTES_MODEL_NAME
    try:
        with open(os.fspath(model), "rb") as f:
            data = f.read(MAX_MODEL_BYTES + 1)        # bounded: a device like /dev/zero never ends
    except OSError as e:
        raise read_error(model, e) from None
    if len(data) > MAX_MODEL_BYTES:
        raise GpucError(f"cannot read model {os.fspath(model)!r}: larger than 2 GiB (a flatbuffer's limit)")
    return data, model_name(model)
