"""What the runtime reads from and writes into shader modules: SignedZeroInfNanPreserve
(SPV_KHR_float_controls), the one home of these words, and which bindings a shader may write.

`declare_nan_preserve` (the compiler, compiler/codegen/glsl.py kernel_spirv) adds the execution mode
for every float width a shader uses, so that no driver optimizes on the assumption that floats are
never NaN or Inf.  (glslang's GL_EXT_spirv_intrinsics keeps one such mode per shader, not one per
width, so the words are added here.)  A device without VK_KHR_shader_float_controls, or without
shaderSignedZeroInfNanPreserveFloat16/32 for a width, must not be given the mode: `adapt` (the
runtime, at load) drops the OpExecutionMode for each such width, and the capability and extension
once no mode is left.  The words are checked as they are walked; a malformed module is returned
unchanged for the driver (and validation) to judge.
"""
from __future__ import annotations

import struct

MAGIC = 0x07230203
OP_EXTENSION, OP_ENTRY_POINT, OP_EXECUTION_MODE, OP_CAPABILITY, OP_EXECUTION_MODE_ID = 10, 15, 16, 17, 331
OP_TYPE_POINTER, OP_VARIABLE, OP_DECORATE, OP_MEMBER_DECORATE = 32, 59, 71, 72
DEC_NON_WRITABLE, DEC_BINDING = 24, 33
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


def _nan_modes(words, insts) -> list:
    """(instruction index, float width) of each SignedZeroInfNanPreserve execution mode."""
    return [(i, words[i + 3]) for i, n, op in insts
            if op == OP_EXECUTION_MODE and n == 4 and words[i + 2] == MODE_NAN_PRESERVE]


def nan_preserve_widths(code: bytes) -> set:
    """The float widths `code` declares SignedZeroInfNanPreserve for (none for a malformed module)."""
    parsed = _words(code)
    return {w for _, w in _nan_modes(*parsed)} if parsed else set()


def adapt(code: bytes, widths: set) -> bytes:
    """`code` keeping SignedZeroInfNanPreserve only for the float widths in `widths` (the device's)."""
    parsed = None if {16, 32} <= widths else _words(code)
    if parsed is None:
        return code
    words, insts = parsed
    modes = _nan_modes(words, insts)
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


def _words(code: bytes):
    """The module's words and instructions, or None when it is not a well-formed module."""
    if len(code) % 4 or len(code) < 20:
        return None
    words = struct.unpack(f"<{len(code) // 4}I", code)
    if words[0] != MAGIC:
        return None
    try:
        return words, list(_instructions(words))
    except ValueError:
        return None


def _inst(op: int, *operands: int) -> list:
    return [((1 + len(operands)) << 16) | op, *operands]


def declare_nan_preserve(code: bytes, widths: set) -> bytes:
    """`code` with SignedZeroInfNanPreserve declared for each float width in `widths` (its entry point's),
    plus the capability and the SPV_KHR_float_controls extension it needs."""
    parsed = _words(code)
    if parsed is None:
        raise ValueError("not a SPIR-V module")
    words, insts = parsed
    have = {w for _, w in _nan_modes(words, insts)}
    todo = sorted(w for w in widths if w not in have)
    if not todo:
        return code
    entry = next(words[i + 2] for i, n, op in insts if op == OP_ENTRY_POINT)
    text = FLOAT_CONTROLS + b"\0" * (4 - len(FLOAT_CONTROLS) % 4)
    add = {}                                   # instruction index -> words to put after it

    def after(ops, extra):
        at = max((k for k, (i, n, op) in enumerate(insts) if op in ops), default=None)
        if at is None:
            raise ValueError(f"SPIR-V module without {ops}")
        add.setdefault(at, []).extend(extra)

    if not any(op == OP_CAPABILITY and words[i + 1] == CAP_NAN_PRESERVE for i, n, op in insts):
        after({OP_CAPABILITY}, _inst(OP_CAPABILITY, CAP_NAN_PRESERVE))
    if not any(op == OP_EXTENSION and _is_float_controls(words, i, n) for i, n, op in insts):
        has_ext = any(op == OP_EXTENSION for _, _, op in insts)
        after({OP_EXTENSION} if has_ext else {OP_CAPABILITY},
              _inst(OP_EXTENSION, *struct.unpack(f"<{len(text) // 4}I", text)))
    has_mode = any(op in (OP_EXECUTION_MODE, OP_EXECUTION_MODE_ID) for _, _, op in insts)
    after({OP_EXECUTION_MODE, OP_EXECUTION_MODE_ID} if has_mode else {OP_ENTRY_POINT},
          [w for width in todo for w in _inst(OP_EXECUTION_MODE, entry, MODE_NAN_PRESERVE, width)])
    out = list(words[:5])
    for k, (i, n, _) in enumerate(insts):
        out.extend(words[i:i + n])
        out.extend(add.get(k, ()))
    return struct.pack(f"<{len(out)}I", *out)


def written_bindings(code: bytes, count: int) -> set:
    """The descriptor bindings (0..count-1) that shader `code` may write: every binding whose variable
    or whose block's every member is not decorated NonWritable (GLSL `readonly`).  A module that cannot
    be read: all of them (the safe answer)."""
    parsed = _words(code)
    if parsed is None:
        return set(range(count))
    words, insts = parsed
    binding, readonly_var, pointee, var_type, members, readonly_members = {}, set(), {}, {}, {}, {}
    for i, n, op in insts:
        if op == OP_DECORATE and n >= 3:
            if words[i + 2] == DEC_BINDING and n >= 4:
                binding[words[i + 1]] = words[i + 3]
            elif words[i + 2] == DEC_NON_WRITABLE:
                readonly_var.add(words[i + 1])
        elif op == OP_MEMBER_DECORATE and n >= 4:
            members.setdefault(words[i + 1], set()).add(words[i + 2])
            if words[i + 3] == DEC_NON_WRITABLE:
                readonly_members.setdefault(words[i + 1], set()).add(words[i + 2])
        elif op == OP_TYPE_POINTER and n >= 4:
            pointee[words[i + 1]] = words[i + 3]
        elif op == OP_VARIABLE and n >= 4:
            var_type[words[i + 2]] = words[i + 1]
    written = set(range(count))
    for var, b in binding.items():
        block = pointee.get(var_type.get(var))
        if var in readonly_var or (block in members and readonly_members.get(block) == members[block]):
            written.discard(b)
    return written
