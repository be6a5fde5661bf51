"""The shared memory a shader variant takes against what it may take (`make shaders`: scripts/check_shaders.py,
and tests/compiler/test_shared_memory.py): its workgroup variables sized as the runtime's load check sizes them
(runtime/shader_check.py: at least the sum of their natural sizes; a device allowing less refuses the bundle),
against the `shared_memory` the compiler requires of a device for it (compiler/codegen/variants.py
declared_variants), else the 32 KiB every Vulkan device allows."""
from __future__ import annotations

from gpuc.runtime import shader_check

PORTABLE_SMEM = 32 * 1024       # shared memory per workgroup every Vulkan device allows (maxComputeSharedMemorySize's
#                                 required minimum): the kernels' plans stay within it unless they require more


def shared_bytes(code: bytes) -> int:
    """Bytes of shared memory compiled module `code` (its entry point `main`, no manifest yet) takes at least."""
    return shader_check.interface(shader_check.add_manifest(code, {"ext": [], "uses": []}), "main").shared_bytes


def overrun(label: str, code: bytes, allowed: int) -> str | None:
    """One line naming shader `label` where module `code` takes more than `allowed` bytes of shared memory, else None."""
    took = shared_bytes(code)
    if took <= allowed:
        return None
    return f"shader {label} takes {took} bytes of shared memory, over the {allowed} it may take"
