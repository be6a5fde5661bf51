"""Generic, bounds-checked flatbuffer reader driven by a distilled schema (tflite_schema.TABLES).

Nothing here trusts the bytes: every uoffset, soffset-to-vtable, vtable size, field offset,
vector length and string length is checked against the buffer before it is used, and any
violation raises ModelFormatError naming the field path ("subgraphs[0].tensors[5].shape: ...").
Tables are read lazily (a `Table` decodes a field when asked), so a hostile file cannot make the
reader walk parts of the graph the importer never looks at, and vectors of tables are lazy
sequences (a vector claiming millions of elements costs nothing until indexed).

Scalar vectors come back as numpy arrays (little-endian dtype, copied); `Table.span()` gives the
(position, length) of a byte vector for zero-copy access.  Absent fields return the schema default.
"""
from __future__ import annotations

import struct
from collections.abc import Sequence

import numpy as np

from gpuc.errors import ModelFormatError

SCALAR_DTYPES = {"b": "<i1", "B": "<u1", "h": "<i2", "H": "<u2", "i": "<i4", "I": "<u4",
                 "q": "<i8", "Q": "<u8", "f": "<f4", "d": "<f8", "?": "<u1"}
SCALAR_SIZES = {k: np.dtype(v).itemsize for k, v in SCALAR_DTYPES.items()}
MAX_DEPTH = 32
_U32 = struct.Struct("<I")
_I32 = struct.Struct("<i")
_U16 = struct.Struct("<H")


def fail(path: str, what: str):
    raise ModelFormatError(f"invalid model: {path}: {what}" if path else f"invalid model: {what}")


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


class Reader:
    """A flatbuffer held in memory; `root(table)` gives the root `Table`."""

    def __init__(self, buf, tables: dict):
        self.buf = bytes(buf) if not isinstance(buf, bytes) else buf
        self.n = len(self.buf)
        self.tables = tables
        # Work budget: tables, vectors and strings decoded, in bytes.  A sound file decodes each of
        # its bytes about once; shared references (1M operators pointing at one table) cannot
        # make decoding cost more than a few times the file size.
        self.budget = 4 * self.n + (1 << 20)

    def charge(self, nbytes: int, path: str) -> None:
        self.budget -= nbytes
        if self.budget < 0:
            fail(path, "the file refers to the same data too many times (decoding budget exhausted)")

    def need(self, pos: int, size: int, path: str, what: str = "out of bounds") -> None:
        if pos < 0 or size < 0 or pos + size > self.n:
            fail(path, f"{what} (offset {pos}, {size} bytes, file is {self.n} bytes)")

    def u32(self, pos: int, path: str, what: str = "offset out of bounds") -> int:
        self.need(pos, 4, path, what)
        return _U32.unpack_from(self.buf, pos)[0]

    def deref(self, pos: int, path: str) -> int:
        """Follow the uoffset stored at `pos`; the target must leave room for a 4-byte header."""
        target = pos + self.u32(pos, path)
        self.need(target, 4, path, "offset points outside the file")
        return target

    def root(self, table: str) -> "Table":
        if self.n < 8:
            fail("", f"file too short ({self.n} bytes)")
        return Table(self, self.deref(0, "root table"), table, "", 0)


class Table:
    __slots__ = ("r", "pos", "name", "path", "depth", "fields", "_vt", "_vtsize")

    def __init__(self, r: Reader, pos: int, name: str, path: str, depth: int):
        if depth > MAX_DEPTH:
            fail(path, f"tables nested deeper than {MAX_DEPTH}")
        if name not in r.tables:
            fail(path, f"unknown table type {name!r}")
        self.r, self.pos, self.name, self.path, self.depth = r, pos, name, path, depth
        self.fields = r.tables[name]
        r.need(pos, 4, path or name, "table out of bounds")
        vt = pos - _I32.unpack_from(r.buf, pos)[0]
        r.need(vt, 4, path or name, "vtable out of bounds")
        vtsize, tsize = struct.unpack_from("<HH", r.buf, vt)
        if vtsize < 4 or vtsize & 1:
            fail(path or name, f"bad vtable size {vtsize}")
        r.need(vt, vtsize, path or name, "vtable out of bounds")
        if tsize < 4:
            fail(path or name, f"bad table size {tsize}")
        r.need(pos, tsize, path or name, "table out of bounds")
        r.charge(tsize, path or name)
        self._vt, self._vtsize = vt, vtsize

    def __repr__(self):
        return f"<Table {self.name} at {self.pos} ({self.path or 'root'})>"

    def _field_pos(self, field: str):
        """(absolute position, kind, default, path) of a field; position None when absent."""
        try:
            slot, kind, default = self.fields[field]
        except KeyError:
            raise KeyError(f"table {self.name} has no field {field!r}") from None
        entry = 4 + 2 * slot
        off = _U16.unpack_from(self.r.buf, self._vt + entry)[0] if entry + 2 <= self._vtsize else 0
        path = _join(self.path, field)
        if off == 0:
            return None, kind, default, path
        if off < 4:
            fail(path, f"field offset {off} overlaps the vtable offset")
        return self.pos + off, kind, default, path

    def has(self, field: str) -> bool:
        return self._field_pos(field)[0] is not None

    def __getitem__(self, field: str):
        return self.get(field)

    def get(self, field: str):
        fpos, kind, default, path = self._field_pos(field)
        if fpos is None:
            return default
        r = self.r
        if kind in SCALAR_DTYPES:
            r.need(fpos, SCALAR_SIZES[kind], path)
            v = struct.unpack_from("<" + kind, r.buf, fpos)[0]
            return bool(v) if kind == "?" else v
        if kind == "str":
            return self._string(r.deref(fpos, path), path)
        if kind.startswith("table:"):
            return Table(r, r.deref(fpos, path), kind[6:], path, self.depth + 1)
        if kind == "union":
            return r.deref(fpos, path)
        if kind.startswith("struct:"):
            fail(path, f"struct fields ({kind}) are not supported")
        if kind.startswith("[") and kind.endswith("]"):
            inner = kind[1:-1]
            vpos = r.deref(fpos, path)
            count = r.u32(vpos, path)
            if inner in SCALAR_DTYPES:
                dt = np.dtype(SCALAR_DTYPES[inner])
                r.need(vpos + 4, count * dt.itemsize, path, f"vector of {count} elements out of bounds")
                r.charge(4 + count * dt.itemsize, path)
                arr = np.frombuffer(r.buf, dt, count, vpos + 4).astype(dt.newbyteorder("="))
                return arr.astype(bool) if inner == "?" else arr
            r.need(vpos + 4, count * 4, path, f"vector of {count} elements out of bounds")
            r.charge(4, path)
            if inner == "str":
                return [self._string(r.deref(vpos + 4 + 4 * i, f"{path}[{i}]"), f"{path}[{i}]")
                        for i in range(count)]
            if inner.startswith("table:"):
                return TableVector(r, vpos + 4, count, inner[6:], path, self.depth + 1)
        fail(path, f"unsupported field kind {kind!r}")

    def span(self, field: str):
        """(start, length) of a byte vector field ('[B]' or '[b]'), or None when absent."""
        fpos, kind, _, path = self._field_pos(field)
        if kind not in ("[B]", "[b]"):
            raise TypeError(f"{self.name}.{field} is {kind}, not a byte vector")
        if fpos is None:
            return None
        vpos = self.r.deref(fpos, path)
        count = self.r.u32(vpos, path)
        self.r.need(vpos + 4, count, path, f"vector of {count} bytes out of bounds")
        return vpos + 4, count

    def union(self, field: str, table: str):
        """The table held by union `field`, read as `table` (named by the union's type field)."""
        pos = self.get(field)
        return None if pos is None else Table(self.r, pos, table, _join(self.path, field), self.depth + 1)

    def _string(self, spos: int, path: str) -> str:
        length = self.r.u32(spos, path)
        self.r.need(spos + 4, length, path, f"string of {length} bytes out of bounds")
        self.r.charge(4 + length, path)
        return self.r.buf[spos + 4: spos + 4 + length].decode("utf-8", errors="replace")

    def to_dict(self) -> dict:
        """Every field as plain Python values (defaults filled, vectors as lists, tables as dicts;
        unions as the position of their table)."""
        out = {}
        for name, (_, kind, _) in self.fields.items():
            v = self.get(name)
            if isinstance(v, np.ndarray):
                v = v.tolist()
            elif isinstance(v, Table):
                v = v.to_dict()
            elif isinstance(v, TableVector):
                v = [t.to_dict() for t in v]
            out[name] = v
        return out


class TableVector(Sequence):
    """Lazy vector of tables: element i is decoded (and bounds-checked) when indexed."""

    def __init__(self, r: Reader, start: int, count: int, table: str, path: str, depth: int):
        self.r, self.start, self.count, self.table, self.path, self.depth = r, start, count, table, path, depth

    def __len__(self):
        return self.count

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(self.count))]
        if i < 0:
            i += self.count
        if not 0 <= i < self.count:
            raise IndexError(i)
        path = f"{self.path}[{i}]"
        return Table(self.r, self.r.deref(self.start + 4 * i, path), self.table, path, self.depth)
