"""What load checks in a bundle's shader modules before any Vulkan object exists, and the manifest
the compiler writes into each one.

A bundle is untrusted input.  `interface(code, entry)` reads a module's preamble (everything before
its first function) and returns its `Interface`, or raises ValueError naming what is wrong:
  - the header: magic, version (SPIR-V 1.0 .. 1.6), and an id bound no larger than the module can
    use (a lying bound made drivers allocate without end);
  - one GLCompute entry point named `entry`, with a literal LocalSize;
  - every resource variable a storage buffer of set 0 (its binding number recorded, and whether the
    shader may write it), the push-constant block's size, and no physical pointers;
  - the gpuc manifest (an OpModuleProcessed "gpuc-manifest:{json}"): the facts about the module that
    the compiler knows and the runtime cannot read off the code -- for each binding the bytes the
    kernel may touch (`ext`); each dispatch that runs it, with its tensors, their offsets, memories,
    dtypes and shapes, its grid
    and its item-major unit in batch-native runs (`uses`); and, for kernels over dynamic dims, the
    bounds of those dims (`dmax`) -- compiler/codegen/manifest.py.  The bundle's dispatch table must agree with the manifest of the shader it names
    (runtime/load_checks.py), so one lying field there is refused instead of run.
`body_ok(code)` walks the whole instruction stream (the function bodies too); with SPIRV-Tools
installed, runtime/load_checks.py runs its validator instead.  `add_manifest` is the compiler's side.
"""
from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field

MAGIC = 0x07230203
MAX_VERSION = 0x00010600
MAX_ID_BOUND = 4194303                 # SPIR-V's universal limit on the id bound
MANIFEST_PREFIX = b"gpuc-manifest:"

(OP_SOURCE_CONTINUED, OP_SOURCE, OP_SOURCE_EXTENSION, OP_NAME, OP_MEMBER_NAME, OP_STRING) = (2, 3, 4, 5, 6, 7)
OP_ENTRY_POINT, OP_EXECUTION_MODE, OP_CAPABILITY = 15, 16, 17
OP_TYPE_INT, OP_TYPE_FLOAT, OP_TYPE_VECTOR, OP_TYPE_MATRIX = 21, 22, 23, 24
OP_TYPE_ARRAY, OP_TYPE_RUNTIME_ARRAY, OP_TYPE_STRUCT, OP_TYPE_POINTER = 28, 29, 30, 32
OP_CONSTANT, OP_FUNCTION, OP_FUNCTION_END, OP_VARIABLE = 43, 54, 56, 59
OP_DECORATE, OP_MEMBER_DECORATE, OP_MODULE_PROCESSED, OP_EXECUTION_MODE_ID = 71, 72, 330, 331
DEBUG_OPS = {OP_SOURCE_CONTINUED, OP_SOURCE, OP_SOURCE_EXTENSION, OP_NAME, OP_MEMBER_NAME, OP_STRING,
             OP_MODULE_PROCESSED}
GL_COMPUTE, MODE_LOCAL_SIZE, MODE_LOCAL_SIZE_ID = 5, 17, 38
DEC_BLOCK, DEC_BUFFER_BLOCK, DEC_ARRAY_STRIDE, DEC_NON_WRITABLE = 2, 3, 6, 24
DEC_BINDING, DEC_SET, DEC_OFFSET = 33, 34, 35
SC_UNIFORM_CONSTANT, SC_INPUT, SC_UNIFORM, SC_OUTPUT, SC_WORKGROUP = 0, 1, 2, 3, 4
SC_PRIVATE, SC_FUNCTION, SC_PUSH_CONSTANT, SC_STORAGE_BUFFER = 6, 7, 9, 12
# the module's sections before its annotations (layout rules 1-7): the manifest goes after them
HEAD_OPS = DEBUG_OPS | {OP_CAPABILITY, 10, 11, 14, OP_ENTRY_POINT, OP_EXECUTION_MODE, OP_EXECUTION_MODE_ID}
PLAIN_CLASSES = {SC_INPUT, SC_WORKGROUP, SC_PRIVATE, SC_FUNCTION}
CAP_ADDRESSES, CAP_PHYSICAL_POINTERS = 4, 5347
# result-id position of the instructions whose ids the preamble check reads
RESULT_AT = {OP_TYPE_INT: 1, OP_TYPE_FLOAT: 1, OP_TYPE_VECTOR: 1, OP_TYPE_MATRIX: 1, OP_TYPE_ARRAY: 1,
             OP_TYPE_RUNTIME_ARRAY: 1, OP_TYPE_STRUCT: 1, OP_TYPE_POINTER: 1, OP_CONSTANT: 2, OP_VARIABLE: 2}


@dataclass
class Interface:
    local_size: tuple
    bindings: dict                   # binding number -> True where the shader may write it
    push_bytes: int                  # bytes of the push-constant block (0: none)
    manifest: dict = field(default_factory=dict)
    shared_bytes: int = 0            # workgroup (shared) memory its variables take at least

    @property
    def invocations(self) -> int:
        return self.local_size[0] * self.local_size[1] * self.local_size[2]


def words_of(code: bytes):
    if len(code) < 20 or len(code) % 4:
        raise ValueError(f"{len(code)} bytes is not a whole SPIR-V module")
    return struct.unpack(f"<{len(code) // 4}I", code)


def _string(words, i, end) -> bytes:
    raw = struct.pack(f"<{end - i}I", *words[i:end])
    if b"\0" not in raw:
        raise ValueError("a string operand is not terminated")
    return raw.split(b"\0", 1)[0]


def _header(words) -> None:
    if words[0] != MAGIC:
        raise ValueError("bad SPIR-V magic number")
    if words[1] & 0xFF0000FF or not 0x00010000 <= words[1] <= MAX_VERSION:
        raise ValueError(f"unsupported SPIR-V version word {words[1]:#x}")
    bound = words[3]
    if not 1 <= bound <= min(MAX_ID_BOUND, 4 * len(words) + 64):
        raise ValueError(f"id bound {bound} is out of range for a module of {len(words)} words")
    if words[4]:
        raise ValueError("reserved header word is not 0")


def _preamble(words):
    """The instructions before the first OpFunction: (opcode, operand words)."""
    out, i, n = [], 5, len(words)
    while i < n:
        size, op = words[i] >> 16, words[i] & 0xFFFF
        if size == 0 or i + size > n:
            raise ValueError(f"instruction at word {i} overruns the module")
        if op == OP_FUNCTION:
            return out, i
        out.append((op, words[i + 1:i + size]))
        i += size
    raise ValueError("the module has no function")


def body_ok(code: bytes) -> str | None:
    """None when every instruction of the module is whole and it ends in OpFunctionEnd; else why not."""
    try:
        words = words_of(code)
    except ValueError as e:
        return str(e)
    i, n, last = 5, len(words), -1
    while i < n:
        size = words[i] >> 16
        if size == 0 or i + size > n:
            return f"instruction at word {i} overruns the module"
        last = words[i] & 0xFFFF
        i += size
    return None if last == OP_FUNCTION_END else "the module does not end with OpFunctionEnd"


class _Types:
    """Byte sizes of the types a push-constant block is made of (explicit layout)."""

    def __init__(self):
        self.defs, self.consts, self.stride, self.offsets = {}, {}, {}, {}

    def size(self, t, depth=0) -> int:
        if depth > 16 or t not in self.defs:
            raise ValueError(f"push-constant type %{t} cannot be sized")
        op, ops = self.defs[t]
        if op in (OP_TYPE_INT, OP_TYPE_FLOAT):
            return ops[1] // 8
        if op in (OP_TYPE_VECTOR, OP_TYPE_MATRIX):
            return ops[2] * self.size(ops[1], depth + 1)
        if op == OP_TYPE_ARRAY:
            n = self.consts.get(ops[2])
            if n is None or t not in self.stride:
                raise ValueError(f"push-constant array %{t} has no literal length or stride")
            return n * self.stride[t]
        if op == OP_TYPE_STRUCT:
            members = ops[1:]
            offs = self.offsets.get(t, {})
            if set(offs) != set(range(len(members))):        # (an Offset on a member the struct lacks)
                raise ValueError(f"push-constant struct %{t} lacks member offsets")
            return max((offs[k] + self.size(m, depth + 1) for k, m in enumerate(members)), default=0)
        raise ValueError(f"push-constant type %{t} (opcode {op}) is not plain data")

    def least_size(self, t, depth=0) -> int:
        """Bytes type %t takes at least without an explicit layout (shared memory): scalars by width,
        vectors, matrices and arrays by count, structs as the sum of their members; 0 for a type not sized
        here (the driver's size is never smaller)."""
        if depth > 16 or t not in self.defs:
            return 0
        op, ops = self.defs[t]
        if op in (OP_TYPE_INT, OP_TYPE_FLOAT) and len(ops) >= 2:
            return ops[1] // 8
        if op in (OP_TYPE_VECTOR, OP_TYPE_MATRIX) and len(ops) >= 3:
            return ops[2] * self.least_size(ops[1], depth + 1)
        if op == OP_TYPE_ARRAY and len(ops) >= 3:
            return self.consts.get(ops[2], 0) * self.least_size(ops[1], depth + 1)
        if op == OP_TYPE_STRUCT:
            return sum(self.least_size(m, depth + 1) for m in ops[1:])
        return 0


def interface(code: bytes, entry: str) -> Interface:
    """The module's interface, from its preamble; ValueError naming the first problem."""
    words = words_of(code)
    _header(words)
    insts, _ = _preamble(words)
    bound = words[3]
    types, entries, local, manifest = _Types(), [], None, None
    sets, binds, readonly, block, ptrs, variables = {}, {}, set(), {}, {}, []
    member_ro = {}
    for op, ops in insts:
        at = RESULT_AT.get(op)
        if at is not None and (len(ops) < at or ops[at - 1] >= bound):
            raise ValueError(f"opcode {op} defines an id past the bound {bound}")
        if op == OP_CAPABILITY and ops and ops[0] in (CAP_ADDRESSES, CAP_PHYSICAL_POINTERS):
            raise ValueError("the module uses physical pointers (memory outside its bindings)")
        elif op == OP_ENTRY_POINT:
            if len(ops) < 3:
                raise ValueError("truncated OpEntryPoint")
            entries.append((ops[0], ops[1], _string(ops, 2, len(ops))))
        elif op in (OP_EXECUTION_MODE, OP_EXECUTION_MODE_ID) and len(ops) >= 2 and \
                ops[1] in (MODE_LOCAL_SIZE, MODE_LOCAL_SIZE_ID):
            if len(ops) != 5 or local is not None:
                raise ValueError("bad or repeated local size")
            local = (ops[1], ops[0], tuple(ops[2:5]))
        elif op == OP_MODULE_PROCESSED and ops:
            text = _string(ops, 0, len(ops))
            if text.startswith(MANIFEST_PREFIX):
                if manifest is not None:
                    raise ValueError("more than one gpuc manifest")
                manifest = _manifest(text[len(MANIFEST_PREFIX):])
        elif op in (OP_TYPE_INT, OP_TYPE_FLOAT, OP_TYPE_VECTOR, OP_TYPE_MATRIX, OP_TYPE_ARRAY, OP_TYPE_STRUCT):
            types.defs[ops[0]] = (op, ops)
        elif op == OP_CONSTANT and len(ops) >= 3:
            types.consts[ops[1]] = ops[2]
        elif op == OP_TYPE_POINTER and len(ops) >= 3:
            ptrs[ops[0]] = (ops[1], ops[2])
        elif op == OP_VARIABLE and len(ops) >= 3:
            variables.append((ops[1], ops[0], ops[2]))
        elif op == OP_DECORATE and len(ops) >= 2:
            target, dec = ops[0], ops[1]
            if dec in (DEC_SET, DEC_BINDING, DEC_ARRAY_STRIDE) and len(ops) < 3:
                raise ValueError("truncated decoration")
            if dec == DEC_SET:
                sets[target] = ops[2]
            elif dec == DEC_BINDING:
                binds[target] = ops[2]
            elif dec == DEC_ARRAY_STRIDE:
                types.stride[target] = ops[2]
            elif dec == DEC_NON_WRITABLE:
                readonly.add(target)
            elif dec in (DEC_BLOCK, DEC_BUFFER_BLOCK):
                block[target] = dec
        elif op == OP_MEMBER_DECORATE and len(ops) >= 3:
            if ops[2] == DEC_OFFSET and len(ops) >= 4:
                types.offsets.setdefault(ops[0], {})[ops[1]] = ops[3]
            elif ops[2] == DEC_NON_WRITABLE:
                member_ro.setdefault(ops[0], set()).add(ops[1])
    if len(entries) != 1 or entries[0][0] != GL_COMPUTE:
        raise ValueError(f"expected one GLCompute entry point, found {len(entries)}")
    if entries[0][2].decode("utf-8", "replace") != entry:
        raise ValueError(f"the entry point is {entries[0][2]!r}, the bundle names {entry!r}")
    if local is None or local[1] != entries[0][1]:
        raise ValueError("no local size for the entry point")
    size = local[2] if local[0] == MODE_LOCAL_SIZE else tuple(types.consts.get(i, 0) for i in local[2])
    if not all(1 <= s <= 1 << 16 for s in size):
        raise ValueError(f"bad local size {size}")
    if manifest is None:
        raise ValueError("no gpuc manifest (written by an older or a foreign compiler)")
    bindings, push, shared = {}, 0, 0
    for var, ptype, sclass in variables:
        if sclass == SC_WORKGROUP:
            shared += types.least_size(ptrs.get(ptype, (None, None))[1])
        if sclass in PLAIN_CLASSES:
            continue
        pointee = ptrs.get(ptype, (None, None))[1]
        if sclass == SC_PUSH_CONSTANT:
            push = max(push, types.size(pointee))
            continue
        is_ssbo = (sclass == SC_STORAGE_BUFFER and block.get(pointee) == DEC_BLOCK) or \
            (sclass == SC_UNIFORM and block.get(pointee) == DEC_BUFFER_BLOCK)
        if not is_ssbo:
            raise ValueError(f"variable %{var} (storage class {sclass}) is not a storage buffer")
        if sets.get(var) != 0 or var not in binds:
            raise ValueError(f"storage buffer %{var} is not at a binding of set 0")
        members = len(types.defs.get(pointee, (0, (0,)))[1]) - 1
        ro = var in readonly or (members > 0 and len(member_ro.get(pointee, ())) >= members)
        bindings[binds[var]] = bindings.get(binds[var], False) or not ro
    return Interface(tuple(size), bindings, push, manifest, shared)


def _manifest(text: bytes) -> dict:
    try:
        m = json.loads(text.decode("utf-8"))
    except ValueError:
        raise ValueError("the gpuc manifest is not JSON") from None
    ok = isinstance(m, dict) and isinstance(m.get("ext"), list) and isinstance(m.get("uses"), list) \
        and all(_ints(e, 0) for e in [m["ext"], m.get("dmax", [])]) and all(_use(u) for u in m["uses"])
    if not ok:
        raise ValueError("the gpuc manifest is malformed")
    return m


def _ints(v, low: int) -> bool:
    return isinstance(v, list) and all(isinstance(x, int) and not isinstance(x, bool) and x >= low for x in v)


USE_KEYS = {"d", "t", "off", "mem", "dt", "sh", "g", "item"}


def _use(u) -> bool:
    """{"d": dispatch, "t": tensors, "off", "mem", "dt", "sh": their offsets, memories, dtypes, shapes,
    "g": workgroup counts, "item": item-major unit} (compiler/codegen/manifest.py use)"""
    return isinstance(u, dict) and set(u) - {"gt"} == USE_KEYS and _ints([u["d"], u["item"]], 0) \
        and all(_ints(u[k], 0) for k in ("t", "off", "mem")) and isinstance(u["dt"], list) \
        and all(isinstance(x, str) for x in u["dt"]) and isinstance(u["sh"], list) and all(_ints(x, 0) for x in u["sh"]) \
        and len(u["t"]) == len(u["off"]) == len(u["mem"]) == len(u["dt"]) == len(u["sh"]) \
        and _ints(u["g"], 1) and len(u["g"]) == 3


def add_manifest(code: bytes, manifest: dict) -> bytes:
    """`code` with the gpuc manifest as an OpModuleProcessed string (after the module's other debug
    instructions, where the layout rules put it)."""
    words = words_of(code)
    insts, _ = _preamble(words)
    text = MANIFEST_PREFIX + json.dumps(manifest, separators=(",", ":"), sort_keys=True).encode()
    text += b"\0" * (4 - len(text) % 4)
    inst = [((1 + len(text) // 4) << 16) | OP_MODULE_PROCESSED, *struct.unpack(f"<{len(text) // 4}I", text)]
    at = 5                         # after capabilities .. execution modes and the debug section
    for op, ops in insts:
        if op not in HEAD_OPS:
            break
        at += 1 + len(ops)
    return struct.pack(f"<{len(words) + len(inst)}I", *words[:at], *inst, *words[at:])
