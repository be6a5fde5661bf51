"""The flatbuffer reader and writer of gpuc: bundles (runtime/bundle.py) and TFLite models
(compiler/frontend, through compiler/frontend/fbreader.py) are read by this one, bounds-checked code.

A schema is `{table: {field: (vtable_slot, kind, default)}}` where kind is a struct format char
for scalars ('b','B','h','H','i','I','q','Q','f','d','?'), 'str', 'table:T', 'union' (the position
of the union's table), '[x]' (vector of scalar x), '[str]', '[table:T]'.  `schema_from_fbs` makes
one from a .fbs file (the bundle's), tflite_schema.TABLES is a distilled one.

Nothing here trusts the bytes: every uoffset, soffset-to-vtable, vtable size, field offset, vector
length and string length is checked against the buffer before it is used, and any violation calls
the reader's `fail(path, what)` -- by default raising FlatbufferError -- with the field path
("subgraphs[0].tensors[5].shape: ...").  Tables are read lazily (a `Table` decodes a field when
asked), so a hostile file cannot make the reader walk parts the caller never looks at; vectors of
tables are lazy sequences (a vector claiming millions of elements costs nothing until indexed); and
a decoding budget (a few times the buffer size) bounds the work shared references can cause.

Table.get gives scalar vectors as numpy arrays (little-endian, copied); Table.span gives the
(position, length) of a byte vector; `read` decodes a whole buffer into dicts with zero-copy views
(byte vectors as memoryviews, other scalar vectors as read-only numpy views).  numpy is imported
only where a vector needs it.
"""
from __future__ import annotations

import re
import struct
from collections.abc import Sequence

SCALAR_DTYPES = {"b": "<i1", "B": "<u1", "h": "<i2", "H": "<u2", "i": "<i4", "I": "<u4",
                 "q": "<i8", "Q": "<u8", "f": "<f4", "d": "<f8", "?": "<u1"}
SCALAR_SIZES = {k: struct.calcsize("<" + k) for k in SCALAR_DTYPES}
_PREPEND = {"b": "Int8", "B": "Uint8", "h": "Int16", "H": "Uint16", "i": "Int32", "I": "Uint32",
            "q": "Int64", "Q": "Uint64", "f": "Float32", "d": "Float64", "?": "Bool"}
MAX_DEPTH = 32
_U32 = struct.Struct("<I")
_I32 = struct.Struct("<i")
_U16 = struct.Struct("<H")


class FlatbufferError(ValueError):
    """Raised with a path like 'tensors[3].shape: vector of 9 elements out of bounds (...)'."""


def raise_error(path: str, what: str):
    raise FlatbufferError(f"{path}: {what}" if path else what)


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


class Reader:
    """A flatbuffer held in memory; `root(table)` gives the root `Table`.  `buf`: bytes, or any
    buffer (a memoryview is read in place, not copied).  `fail(path, what)` must raise; `strings`:
    how invalid UTF-8 is decoded ("strict": an error, "replace")."""

    def __init__(self, buf, tables: dict, fail=raise_error, strings: str = "strict"):
        self.buf = buf if isinstance(buf, bytes) else memoryview(buf).cast("B")
        self.n = len(self.buf)
        self.tables = tables
        self.fail = fail
        self.strings = strings
        # Work budget: tables, vectors and strings decoded, in bytes.  A sound file decodes each of
        # its bytes about once; shared references (1M operators pointing at one table) cannot
        # make decoding cost more than a few times the file size.
        self.budget = 4 * self.n + (1 << 20)

    def charge(self, nbytes: int, path: str) -> None:
        self.budget -= nbytes
        if self.budget < 0:
            self.fail(path, "the file refers to the same data too many times (decoding budget exhausted)")

    def need(self, pos: int, size: int, path: str, what: str = "out of bounds") -> None:
        if pos < 0 or size < 0 or pos + size > self.n:
            self.fail(path, f"{what} (offset {pos}, {size} bytes, file is {self.n} bytes)")

    def u32(self, pos: int, path: str, what: str = "offset out of bounds") -> int:
        if pos < 0 or pos + 4 > self.n:
            self.need(pos, 4, path, what)
        return _U32.unpack_from(self.buf, pos)[0]

    def deref(self, pos: int, path: str) -> int:
        """Follow the uoffset stored at `pos`; the target must leave room for a 4-byte header."""
        if pos < 0 or pos + 4 > self.n:
            self.need(pos, 4, path, "offset out of bounds")
        target = pos + _U32.unpack_from(self.buf, pos)[0]
        if target + 4 > self.n:
            self.need(target, 4, path, "offset points outside the file")
        return target

    def root(self, table: str) -> "Table":
        if self.n < 8:
            self.fail("", f"file too short ({self.n} bytes)")
        return Table(self, self.deref(0, "root table"), table, "", 0)

    def string(self, spos: int, path: str) -> str:
        length = self.u32(spos, path)
        if spos + 4 + length > self.n:
            self.need(spos + 4, length, path, f"string of {length} bytes out of bounds")
        self.budget -= 4 + length
        if self.budget < 0:
            self.charge(0, path)
        raw = bytes(self.buf[spos + 4: spos + 4 + length])
        try:
            return raw.decode("utf-8", errors=self.strings)
        except UnicodeDecodeError:
            self.fail(path, "string is not UTF-8")


class Table:
    __slots__ = ("r", "pos", "name", "path", "depth", "fields", "_vt", "_vtsize")

    def __init__(self, r: Reader, pos: int, name: str, path: str, depth: int):
        if depth > MAX_DEPTH:
            r.fail(path, f"tables nested deeper than {MAX_DEPTH}")
        if name not in r.tables:
            r.fail(path, f"unknown table type {name!r}")
        self.r, self.pos, self.name, self.path, self.depth = r, pos, name, path, depth
        self.fields = r.tables[name]
        r.need(pos, 4, path or name, "table out of bounds")
        vt = pos - _I32.unpack_from(r.buf, pos)[0]
        r.need(vt, 4, path or name, "vtable out of bounds")
        vtsize, tsize = struct.unpack_from("<HH", r.buf, vt)
        if vtsize < 4 or vtsize & 1:
            r.fail(path or name, f"bad vtable size {vtsize}")
        r.need(vt, vtsize, path or name, "vtable out of bounds")
        if tsize < 4:
            r.fail(path or name, f"bad table size {tsize}")
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
            self.r.fail(path, f"field offset {off} overlaps the vtable offset")
        return self.pos + off, kind, default, path

    def has(self, field: str) -> bool:
        return self._field_pos(field)[0] is not None

    def __getitem__(self, field: str):
        return self.get(field)

    def get(self, field: str, view: bool = False):
        """The field's value (the schema default when absent).  Scalar vectors are numpy arrays:
        copied in native byte order, or (view=True) read-only views of the buffer, byte vectors then
        memoryviews."""
        fpos, kind, default, path = self._field_pos(field)
        return default if fpos is None else self._value(fpos, kind, path, view)

    def _value(self, fpos: int, kind: str, path: str, view: bool):
        r = self.r
        size = SCALAR_SIZES.get(kind)
        if size is not None:
            r.need(fpos, size, path)
            v = struct.unpack_from("<" + kind, r.buf, fpos)[0]
            return bool(v) if kind == "?" else v
        if kind == "str":
            return r.string(r.deref(fpos, path), path)
        if kind[0] == "[" and kind[-1] == "]":
            inner = kind[1:-1]
            vpos = r.deref(fpos, path)
            count = r.u32(vpos, path)
            size = SCALAR_SIZES.get(inner)
            if size is not None:
                nbytes = count * size
                r.need(vpos + 4, nbytes, path, f"vector of {count} elements out of bounds")
                r.charge(4 + nbytes, path)
                if view and inner == "B":                  # bytes: zero-copy, no numpy needed
                    return memoryview(r.buf)[vpos + 4: vpos + 4 + count]
                import numpy as np
                dt = np.dtype(SCALAR_DTYPES[inner])
                arr = np.frombuffer(r.buf, dt, count, vpos + 4)
                if not view:
                    arr = arr.astype(dt.newbyteorder("="))
                return arr.astype(bool) if inner == "?" else arr
            r.need(vpos + 4, count * 4, path, f"vector of {count} elements out of bounds")
            r.charge(4, path)
            if inner == "str":
                return [r.string(r.deref(vpos + 4 + 4 * i, f"{path}[{i}]"), f"{path}[{i}]") for i in range(count)]
            if inner.startswith("table:"):
                return TableVector(r, vpos + 4, count, inner[6:], path, self.depth + 1)
        elif kind.startswith("table:"):
            return Table(r, r.deref(fpos, path), kind[6:], path, self.depth + 1)
        elif kind == "union":
            return r.deref(fpos, path)
        elif kind.startswith("struct:"):
            r.fail(path, f"struct fields ({kind}) are not supported")
        r.fail(path, f"unsupported field kind {kind!r}")

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

    def to_dict(self) -> dict:
        """Every field as plain Python values (defaults filled, vectors as lists, tables as dicts;
        unions as the position of their table)."""
        out = {}
        for name in self.fields:
            v = self.get(name)
            if hasattr(v, "tolist"):
                v = v.tolist()
            elif isinstance(v, Table):
                v = v.to_dict()
            elif isinstance(v, TableVector):
                v = [t.to_dict() for t in v]
            out[name] = v
        return out

    def decode(self) -> dict:
        """Every field, tables and vectors of tables decoded too; scalar vectors as zero-copy views.
        (get() field by field, inlined: a bundle's load decodes thousands of fields.)"""
        buf, vt, vtsize, pos, prefix = self.r.buf, self._vt, self._vtsize, self.pos, self.path + "." if self.path else ""
        out = {}
        for name, (slot, kind, default) in self.fields.items():
            entry = 4 + 2 * slot
            off = _U16.unpack_from(buf, vt + entry)[0] if entry + 2 <= vtsize else 0
            if off == 0:
                out[name] = default
                continue
            if off < 4:
                self.r.fail(prefix + name, f"field offset {off} overlaps the vtable offset")
            v = self._value(pos + off, kind, prefix + name, True)
            if type(v) is Table:
                v = v.decode()
            elif type(v) is TableVector:
                v = [t.decode() for t in v]
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


def read(buf, schema: dict, root_table: str) -> dict:
    """Decode a whole flatbuffer into nested dicts (Table.decode: scalar vectors as views);
    FlatbufferError names what is wrong."""
    try:
        return Reader(buf, schema).root(root_table).decode()
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
            if inner in SCALAR_DTYPES:
                import numpy as np
                children[name] = builder.CreateNumpyVector(np.ascontiguousarray(v, dtype=SCALAR_DTYPES[inner]))
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


# -- schemas from .fbs text -------------------------------------------------------------------------
_FBS_SCALARS = {"bool": "?", "byte": "b", "int8": "b", "ubyte": "B", "uint8": "B", "short": "h", "int16": "h",
                "ushort": "H", "uint16": "H", "int": "i", "int32": "i", "uint": "I", "uint32": "I",
                "long": "q", "int64": "q", "ulong": "Q", "uint64": "Q", "float": "f", "float32": "f",
                "double": "d", "float64": "d"}
_FBS_DECL = re.compile(r"(table|enum|struct|union)\s+(\w+)\s*(?::\s*(\w+))?\s*\{([^}]*)\}", re.S)
_FBS_FIELD = re.compile(r"^(\w+)\s*:\s*(\[?\s*\w+\s*\]?)\s*(?:=\s*([^;(\s]+))?\s*(\([^)]*\))?$")


class FbsSchema:
    """A parsed .fbs file: tables (in the reader's schema form), enums {name: {member: value}},
    file_identifier and root_type."""

    def __init__(self, tables: dict, enums: dict, file_identifier: str | None, root_type: str | None):
        self.tables, self.enums = tables, enums
        self.file_identifier, self.root_type = file_identifier, root_type


def parse_fbs(text: str) -> FbsSchema:
    """Parse the subset of the FlatBuffers schema language gpuc's bundle uses: tables whose fields
    take slots in declaration order, enums (a field of enum type is stored as the enum's base
    type), scalars with optional defaults, strings, vectors, file_identifier and root_type.
    Anything else (structs, unions, attributes) is refused with ValueError."""
    text = re.sub(r"//[^\n]*", "", text)
    enums, bases, decls = {}, {}, []
    for kind, name, base, body in _FBS_DECL.findall(text):
        if kind in ("struct", "union"):
            raise ValueError(f"{kind} {name}: not supported by flatbuf.parse_fbs")
        if kind == "enum":
            members, value = {}, -1
            for item in filter(None, (x.strip() for x in body.split(","))):
                member, _, v = (p.strip() for p in item.partition("="))
                value = int(v, 0) if v else value + 1
                members[member] = value
            enums[name], bases[name] = members, _FBS_SCALARS[base]
        else:
            decls.append((name, body))
    table_names = {n for n, _ in decls}
    tables = {}
    for name, body in decls:
        fields = {}
        for slot, decl in enumerate(filter(None, (x.strip() for x in body.split(";")))):
            m = _FBS_FIELD.match(decl)
            if not m or m.group(4):
                raise ValueError(f"table {name}: cannot parse field {decl!r}")
            field, typ, default = m.group(1), m.group(2).replace(" ", ""), m.group(3)
            inner = typ[1:-1] if typ.startswith("[") else typ
            if inner == "string":
                code = "str"
            elif inner in table_names:
                code = "table:" + inner
            elif inner in _FBS_SCALARS or inner in bases:
                code = _FBS_SCALARS.get(inner) or bases[inner]
            else:
                raise ValueError(f"table {name}: field {field} has unknown type {inner!r}")
            if typ.startswith("["):
                fields[field] = (slot, f"[{code}]", None)
                continue
            value = None
            if code not in ("str",) and not code.startswith("table:"):
                if default is None:
                    value = False if code == "?" else 0
                elif inner in enums and default in enums[inner]:
                    value = enums[inner][default]
                elif code == "?":
                    value = default == "true"
                else:
                    value = float(default) if code in "fd" else int(default, 0)
            fields[field] = (slot, code, value)
        tables[name] = fields
    ident = re.search(r'file_identifier\s+"([^"]*)"\s*;', text)
    root = re.search(r"root_type\s+(\w+)\s*;", text)
    return FbsSchema(tables, enums, ident.group(1) if ident else None, root.group(1) if root else None)
