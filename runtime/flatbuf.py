"""Schema-driven flatbuffer reading and writing, with every offset bounds-checked.

A schema is `{table: {field: (vtable_slot, kind, default)}}` where kind is a struct format char
for scalars ('b','B','h','H','i','I','q','Q','f','d','?'), 'str', 'table:T', '[x]' (vector of
scalar x), '[str]', '[table:T]'.  The bundle format (runtime/bundle.py) uses this for both
directions; nothing here trusts the bytes it reads.
"""
from __future__ import annotations

import struct

SCALAR_NP = {"b": "<i1", "B": "<u1", "h": "<i2", "H": "<u2", "i": "<i4", "I": "<u4",
             "q": "<i8", "Q": "<u8", "f": "<f4", "d": "<f8", "?": "<u1"}
_PREPEND = {"b": "Int8", "B": "Uint8", "h": "Int16", "H": "Uint16", "i": "Int32", "I": "Uint32",
            "q": "Int64", "Q": "Uint64", "f": "Float32", "d": "Float64", "?": "Bool"}
MAX_DEPTH = 64


class FlatbufferError(ValueError):
    """Raised with a path like 'tensors[3].shape: vector out of bounds'."""


class UnionRef(int):
    """Position of a union's table; decode it with Reader.table(pos, <table named by the type field>)."""


class Reader:
    def __init__(self, buf, schema: dict):
        self.buf = memoryview(buf).cast("B") if not isinstance(buf, memoryview) else buf.cast("B")
        self.n = len(self.buf)
        self.schema = schema

    def _need(self, pos: int, size: int, path: str) -> None:
        if pos < 0 or size < 0 or pos + size > self.n:
            raise FlatbufferError(f"{path}: offset {pos}+{size} out of bounds (buffer is {self.n} bytes)")

    def _unpack(self, fmt: str, pos: int, path: str):
        self._need(pos, struct.calcsize(fmt), path)
        return struct.unpack_from(fmt, self.buf, pos)[0]

    def root(self, table: str) -> dict:
        return self.table(self._unpack("<I", 0, "root"), table, table, 0)

    def table(self, pos: int, table: str, path: str, depth: int) -> dict:
        if depth > MAX_DEPTH:
            raise FlatbufferError(f"{path}: nesting deeper than {MAX_DEPTH}")
        vt = pos - self._unpack("<i", pos, path)
        vt_size = self._unpack("<H", vt, path + " (vtable)")
        self._need(vt, vt_size, path + " (vtable)")
        out = {}
        for name, (slot, kind, default) in self.schema[table].items():
            fpath = f"{path}.{name}"
            entry = 4 + 2 * slot
            off = self._unpack("<H", vt + entry, fpath) if entry + 2 <= vt_size else 0
            if not off:
                out[name] = default
                continue
            fpos = pos + off
            out[name] = self._field(fpos, kind, fpath, depth)
        return out

    def _deref(self, pos: int, path: str) -> int:
        return pos + self._unpack("<I", pos, path)

    def _field(self, fpos: int, kind: str, path: str, depth: int):
        if kind in SCALAR_NP:
            v = self._unpack("<" + kind, fpos, path)
            return bool(v) if kind == "?" else v
        if kind == "str":
            return self._string(self._deref(fpos, path), path)
        if kind.startswith("table:"):
            return self.table(self._deref(fpos, path), kind[6:], path, depth + 1)
        if kind == "union":
            return UnionRef(self._deref(fpos, path))
        if kind.startswith("["):
            vpos = self._deref(fpos, path)
            count = self._unpack("<I", vpos, path)
            inner = kind[1:-1]
            if inner == "B":                       # bytes: a zero-copy view, no numpy needed
                self._need(vpos + 4, count, path + " (vector)")
                return self.buf[vpos + 4: vpos + 4 + count]
            if inner in SCALAR_NP:
                import numpy as np
                dt = np.dtype(SCALAR_NP[inner])
                self._need(vpos + 4, count * dt.itemsize, path + " (vector)")
                arr = np.frombuffer(self.buf, dt, count, vpos + 4)
                return arr.astype(bool) if inner == "?" else arr
            self._need(vpos + 4, count * 4, path + " (vector)")
            items = []
            for i in range(count):
                epos = vpos + 4 + 4 * i
                if inner == "str":
                    items.append(self._string(self._deref(epos, f"{path}[{i}]"), f"{path}[{i}]"))
                else:
                    items.append(self.table(self._deref(epos, f"{path}[{i}]"), inner[6:], f"{path}[{i}]", depth + 1))
            return items
        raise FlatbufferError(f"{path}: unsupported field kind {kind!r}")

    def _string(self, spos: int, path: str) -> str:
        length = self._unpack("<I", spos, path)
        self._need(spos + 4, length, path + " (string)")
        try:
            return bytes(self.buf[spos + 4: spos + 4 + length]).decode("utf-8")
        except UnicodeDecodeError as e:
            raise FlatbufferError(f"{path}: string is not UTF-8") from e


def read(buf, schema: dict, root_table: str) -> dict:
    """Decode a whole flatbuffer into nested dicts (scalar vectors as numpy views)."""
    try:
        return Reader(buf, schema).root(root_table)
    except (struct.error, OverflowError, IndexError, RecursionError) as e:
        raise FlatbufferError(f"{root_table}: malformed flatbuffer ({e})") from e


def write(builder, schema: dict, table: str, value: dict) -> int:
    """Serialize `value` (a dict of field -> python value) as `table`; returns its offset."""
    fields = schema[table]
    children = {}
    for name, v in value.items():
        if name not in fields:
            raise KeyError(f"{table} has no field {name!r}")
        if v is None:
            continue
        slot, kind, _ = fields[name]
        if kind == "str":
            children[name] = builder.CreateString(v)
        elif kind.startswith("table:"):
            children[name] = write(builder, schema, kind[6:], v)
        elif kind == "union":                      # value: (table name, dict)
            children[name] = write(builder, schema, v[0], v[1])
        elif kind.startswith("["):
            inner = kind[1:-1]
            if inner in SCALAR_NP:
                import numpy as np
                children[name] = builder.CreateNumpyVector(np.ascontiguousarray(v, dtype=SCALAR_NP[inner]))
            else:
                offs = [builder.CreateString(x) if inner == "str" else write(builder, schema, inner[6:], x) for x in v]
                builder.StartVector(4, len(offs), 4)
                for o in reversed(offs):
                    builder.PrependUOffsetTRelative(o)
                children[name] = builder.EndVector()
    builder.StartObject(max((s for s, _, _ in fields.values()), default=-1) + 1)
    for name, v in value.items():
        if v is None:
            continue
        slot, kind, default = fields[name]
        if name in children:
            builder.PrependUOffsetTRelativeSlot(slot, children[name], 0)
        else:
            getattr(builder, f"Prepend{_PREPEND[kind]}Slot")(slot, v, default)
    return builder.EndObject()
