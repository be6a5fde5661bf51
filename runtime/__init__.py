"""gpuc runtime: loads bundles and runs them with Vulkan.  Never imports the compiler."""
from __future__ import annotations

import os

from gpuc.errors import GpucError


def read_bundle_file(bundle):
    """bytes, bytearray, memoryview, or a path -> bytes."""
    if isinstance(bundle, (bytes, bytearray, memoryview)):
        return bytes(bundle)
    try:
        with open(os.fspath(bundle), "rb") as f:
            return f.read()
    except OSError as e:
        raise GpucError(f"cannot read bundle {os.fspath(bundle)!r}: {e.strerror}") from None


def load(bundle, device=None):
    """Load a bundle (path or bytes) and return a ready-to-run LoadedModel."""
    from gpuc.runtime.bundle import read_bundle
    from gpuc.runtime.executor import LoadedModel
    return LoadedModel(read_bundle(read_bundle_file(bundle)), device=device)
