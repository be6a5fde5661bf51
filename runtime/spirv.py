"""SPIR-V edits the runtime makes for a device: taking out float-controls execution modes it lacks.

The compiler declares SignedZeroInfNanPreserve (SPV_KHR_float_controls) for every float width a
shader uses, so that no driver optimizes on the assumption that floats are never NaN or Inf
(compiler/codegen/glsl.py).  A device without VK_KHR_shader_float_controls, or without
shaderSignedZeroInfNanPreserveFloat16/32 for a width, must not be given the mode: `adapt` drops the
OpExecutionMode for each such width, and the capability and extension once no mode is left.
The words are checked as they are walked; a malformed module is returned unchanged for the driver
(and validation) to judge.
"""
from __future__ import annotations

import struct

MAGIC = 0x07230203
OP_EXTENSION, OP_EXECUTION_MODE, OP_CAPABILITY = 10, 16, 17
MODE_NAN_PRESERVE, CAP_NAN_PRESERVE = 4461, 4466
FLOAT_CONTROLS = b"SPV_KHR_float_controls"


def _instructions(words):
    i = 5
    while i < len(words):
        n = words[i] >> 16
        if n == 0 or i + n > len(words):
            raise ValueError("truncated SPIR-V")
        yield i, n, words[i] & 0xFFFF
        i += n


def _is_float_controls(words, i, n) -> bool:
    text = struct.pack(f"<{n - 1}I", *words[i + 1:i + n])
    return text.split(b"\0", 1)[0] == FLOAT_CONTROLS


def nan_preserve_widths(code: bytes) -> set:
    """The float widths `code` declares SignedZeroInfNanPreserve for."""
    words = struct.unpack(f"<{len(code) // 4}I", code)
    return {words[i + 3] for i, n, op in _instructions(words)
            if op == OP_EXECUTION_MODE and n == 4 and words[i + 2] == MODE_NAN_PRESERVE}


def adapt(code: bytes, widths: set) -> bytes:
    """`code` keeping SignedZeroInfNanPreserve only for the float widths in `widths` (the device's)."""
    if {16, 32} <= widths or len(code) % 4 or len(code) < 20:
        return code
    words = struct.unpack(f"<{len(code) // 4}I", code)
    if words[0] != MAGIC:
        return code
    try:
        insts = list(_instructions(words))
    except ValueError:
        return code
    modes = [(i, words[i + 3]) for i, n, op in insts if op == OP_EXECUTION_MODE and n == 4
             and words[i + 2] == MODE_NAN_PRESERVE]
    drop = {i for i, w in modes if w not in widths}
    if not drop:
        return code
    if len(drop) == len(modes):       # no mode left: the capability and extension go too
        drop |= {i for i, n, op in insts if op == OP_CAPABILITY and words[i + 1] == CAP_NAN_PRESERVE}
        drop |= {i for i, n, op in insts if op == OP_EXTENSION and _is_float_controls(words, i, n)}
    keep = list(words[:5])
    for i, n, _ in insts:
        if i not in drop:
            keep.extend(words[i:i + n])
    return struct.pack(f"<{len(keep)}I", *keep)
