"""The TFLite importer's view of gpuc's one flatbuffer reader (runtime/flatbuf.py): every defect
raises ModelFormatError naming the field ("invalid model: subgraphs[0].tensors[5].shape: ..."), and
strings that are not UTF-8 are decoded with replacement characters."""
from __future__ import annotations

from gpuc.errors import ModelFormatError
from gpuc.runtime import flatbuf
from gpuc.runtime.flatbuf import SCALAR_DTYPES, SCALAR_SIZES, Table, TableVector  # noqa: F401 - re-exported


def fail(path: str, what: str):
    raise ModelFormatError(f"invalid model: {path}: {what}" if path else f"invalid model: {what}")


class Reader(flatbuf.Reader):
    """A TFLite flatbuffer held in memory; `root(table)` gives the root `Table`."""

    def __init__(self, buf, tables: dict):
        super().__init__(bytes(buf), tables, fail=fail, strings="replace")
