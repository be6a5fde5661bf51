"""LiteRT-LM's `.litertlm` container: the reader gpuc uses to compile and run what LiteRT-LM runs.

The file, as LiteRT-LM writes it (schema/core/litertlm_header_schema.fbs in its repository):

    bytes  0..8    magic "LITERTLM"
    bytes  8..20   major, minor, patch version (uint32 little-endian; major 1 is read here)
    bytes 20..24   zero padding
    bytes 24..32   header_end_offset (uint64 LE): the header flatbuffer lies in [32, header_end_offset)
    the header     a LiteRTLMMetaData flatbuffer: system_metadata (key/value pairs) and
                   section_metadata.objects, one SectionObject per section:
                   items (key/value pairs, e.g. model_type), begin_offset, end_offset (absolute byte
                   range [begin, end) of the section's data) and data_type (AnySectionDataType)
    the sections   each starting on a 16 KiB boundary

Section kinds read here: TFLiteModel (3; the LLM is the one whose model_type item is
`tf_lite_prefill_decode`, or the only one), SP_Tokenizer (4: a SentencePiece model proto),
LlmMetadataProto (5: a litert.lm.proto.LlmMetadata: start token, stop tokens, prompt templates,
max_num_tokens; parsed by a small protobuf wire reader) and HF_Tokenizer_Zlib (6: a HuggingFace
tokenizer.json, zlib-compressed after a uint64 LE uncompressed size).  Every offset is checked
against the file; a bad file raises LitertlmError naming the field.
"""
from __future__ import annotations

import mmap
import struct
import zlib
from dataclasses import dataclass, field

from gpuc.errors import ModelFormatError
from gpuc.runtime import flatbuf

MAGIC = b"LITERTLM"
MAJOR_VERSION = 1
HEADER_BEGIN = 32                 # the header flatbuffer starts here
LLM_MODEL_TYPE = "tf_lite_prefill_decode"
KINDS = {0: "none", 1: "generic_binary_data", 2: "deprecated", 3: "tflite_model", 4: "sp_tokenizer",
         5: "llm_metadata", 6: "hf_tokenizer_zlib", 7: "tflite_weights", 8: "embedding_metadata",
         9: "executor_metadata", 10: "tts_metadata", 11: "asr_metadata"}
TFLITE, SP_TOKENIZER, LLM_METADATA, HF_TOKENIZER = "tflite_model", "sp_tokenizer", "llm_metadata", "hf_tokenizer_zlib"

# The header tables gpuc reads ({table: {field: (vtable slot, kind, default)}}, runtime/flatbuf.py).
# A union takes two slots: its type, then its value.
_SCHEMA = {
    "LiteRTLMMetaData": {"system_metadata": (0, "table:SystemMetadata", None),
                         "section_metadata": (1, "table:SectionMetadata", None)},
    "SystemMetadata": {"entries": (0, "[table:KeyValuePair]", None)},
    "SectionMetadata": {"objects": (0, "[table:SectionObject]", None)},
    "SectionObject": {"items": (0, "[table:KeyValuePair]", None), "begin_offset": (1, "Q", 0),
                      "end_offset": (2, "Q", 0), "data_type": (3, "B", 0)},
    "KeyValuePair": {"key": (0, "str", None), "value_type": (1, "B", 0), "value": (2, "union", None)},
    "StringValue": {"value": (0, "str", None)},
}
_STRING_VALUE = 9                 # VData's StringValue member; the scalar members are structs, not read


class LitertlmError(ModelFormatError):
    """A .litertlm file that is damaged, truncated, or holds nothing gpuc can run."""


@dataclass
class Section:
    index: int
    kind: str
    begin: int
    end: int
    items: dict = field(default_factory=dict)     # its string-valued key/value pairs


@dataclass
class LlmMetadata:
    """The fields of litert.lm.proto.LlmMetadata that generation needs.  A token is a list of ids
    or a string (a token of the tokenizer's vocabulary)."""
    start_token: list | str | None = None
    stop_tokens: list = field(default_factory=list)
    templates: dict = field(default_factory=dict)     # {"user"|"model"|"system": (prefix, suffix)}
    max_num_tokens: int = 0


def is_litertlm(data) -> bool:
    return len(data) >= 8 and bytes(data[:8]) == MAGIC


class LitertLm:
    """An opened .litertlm file (path or bytes); sections are read on demand."""

    def __init__(self, source, name: str = ""):
        if isinstance(source, (bytes, bytearray, memoryview)):
            self.data, self.name = memoryview(source), name or "<bytes>"
        else:
            self.name = name or str(source)
            try:
                with open(source, "rb") as f:
                    size = f.seek(0, 2)
                    self.data = memoryview(mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if size else b"")
            except OSError as e:
                raise LitertlmError(f"{self.name}: cannot read: {e.strerror or e}") from None
        self.version, self.sections, self.system = self._read_header()

    def _fail(self, what: str):
        raise LitertlmError(f"{self.name}: not a valid .litertlm file: {what}")

    def _read_header(self):
        d, n = self.data, len(self.data)
        if n < HEADER_BEGIN:
            self._fail(f"truncated: {n} bytes, shorter than the {HEADER_BEGIN}-byte file header")
        if bytes(d[:8]) != MAGIC:
            self._fail(f"magic is {bytes(d[:8])!r}, expected {MAGIC!r}")
        major, minor, patch = struct.unpack_from("<III", d, 8)
        if major != MAJOR_VERSION:
            self._fail(f"major_version {major} is not supported (this reader reads {MAJOR_VERSION})")
        end = struct.unpack_from("<Q", d, 24)[0]
        if not HEADER_BEGIN + 8 <= end <= n:
            self._fail(f"header_end_offset {end} out of range [{HEADER_BEGIN + 8}, {n}] (file of {n} bytes)")
        try:
            root = flatbuf.Reader(d[HEADER_BEGIN:end], _SCHEMA).root("LiteRTLMMetaData")
            system = self._pairs(root.get("system_metadata"), "entries")
            meta = root.get("section_metadata")
            objects = meta.get("objects") if meta is not None else None
            if objects is None:
                self._fail("header: section_metadata.objects is missing")
            sections = []
            for i, o in enumerate(objects):
                kind = KINDS.get(o.get("data_type"), f"unknown({o.get('data_type')})")
                begin, stop = o.get("begin_offset"), o.get("end_offset")
                if not end <= begin <= stop <= n:
                    self._fail(f"section {i} ({kind}): begin_offset {begin} / end_offset {stop} out of range "
                               f"(data lies in [{end}, {n}]: after the header, within the file)")
                sections.append(Section(i, kind, begin, stop, self._pairs(o, "items")))
        except flatbuf.FlatbufferError as e:
            self._fail(f"header: {e}")
        except (struct.error, IndexError, OverflowError) as e:
            self._fail(f"header: malformed flatbuffer ({e})")
        return (major, minor, patch), sections, system

    @staticmethod
    def _pairs(table, name) -> dict:
        out = {}
        for kv in (table.get(name) if table is not None else None) or []:
            if kv.get("value_type") == _STRING_VALUE:
                v = kv.union("value", "StringValue")
                out[kv.get("key") or ""] = (v.get("value") or "") if v is not None else ""
        return out

    def bytes_of(self, s: Section) -> memoryview:
        return self.data[s.begin:s.end]

    def of_kind(self, kind: str) -> list:
        return [s for s in self.sections if s.kind == kind]

    def llm_section(self) -> Section:
        """The prefill/decode TFLite model."""
        models = self.of_kind(TFLITE)
        typed = [s for s in models if s.items.get("model_type", "").removeprefix("tf_lite_") ==
                 LLM_MODEL_TYPE.removeprefix("tf_lite_")]
        if self.of_kind("tflite_weights"):
            raise LitertlmError(f"{self.name}: its weights are in separate tflite_weights sections "
                                "(externalized weights), which gpuc does not read")
        if typed:
            return typed[0]
        if len(models) == 1 and "model_type" not in models[0].items:
            return models[0]
        raise LitertlmError(f"{self.name}: no TFLite section with model_type {LLM_MODEL_TYPE!r} (the LLM) among "
                            f"{[s.items.get('model_type', '?') for s in models] or 'no TFLite sections'}")

    def tflite(self) -> bytes:
        s = self.llm_section()
        data = bytes(self.bytes_of(s))
        if len(data) < 8 or data[4:8] != b"TFL3":
            raise LitertlmError(f"{self.name}: section {s.index} (tflite_model) is not a TFLite model "
                                "(no 'TFL3' identifier)")
        return data

    def tokenizer(self) -> tuple[str, bytes] | None:
        """("hf", tokenizer.json bytes) or ("sentencepiece", model proto bytes); None if none."""
        for s in self.sections:
            if s.kind == HF_TOKENIZER:
                raw = self.bytes_of(s)
                if len(raw) < 8:
                    raise LitertlmError(f"{self.name}: section {s.index} (hf_tokenizer_zlib) is {len(raw)} bytes, "
                                        "shorter than its uint64 size prefix")
                size = struct.unpack_from("<Q", raw, 0)[0]
                try:
                    text = zlib.decompress(raw[8:])
                except zlib.error as e:
                    raise LitertlmError(f"{self.name}: section {s.index} (hf_tokenizer_zlib): bad zlib data ({e})") \
                        from None
                if len(text) != size:
                    raise LitertlmError(f"{self.name}: section {s.index} (hf_tokenizer_zlib): {len(text)} bytes "
                                        f"decompressed, its size prefix says {size}")
                return "hf", text
            if s.kind == SP_TOKENIZER:
                return "sentencepiece", bytes(self.bytes_of(s))
        return None

    def llm_metadata(self) -> LlmMetadata:
        found = self.of_kind(LLM_METADATA)
        if not found:
            return LlmMetadata()
        s = found[0]
        try:
            return parse_llm_metadata(bytes(self.bytes_of(s)))
        except ValueError as e:
            raise LitertlmError(f"{self.name}: section {s.index} (llm_metadata): {e}") from None

    def describe(self) -> list:
        return [f"section {s.index}: {s.kind}, {s.end - s.begin} bytes"
                + (f" ({', '.join(f'{k}={v}' for k, v in s.items.items())})" if s.items else "")
                for s in self.sections]


# -- protobuf wire format: the few LlmMetadata fields generation needs --------------------------------

def _varint(buf: bytes, pos: int, path: str) -> tuple[int, int]:
    out = shift = 0
    while True:
        if pos >= len(buf):
            raise ValueError(f"{path}: truncated varint")
        b = buf[pos]
        pos += 1
        out |= (b & 0x7F) << shift
        if not b & 0x80:
            return out, pos
        shift += 7
        if shift > 63:
            raise ValueError(f"{path}: varint longer than 10 bytes")


def _fields(buf: bytes, path: str):
    """(field number, wire type, value): an int for varints, bytes for length-delimited fields."""
    pos = 0
    while pos < len(buf):
        key, pos = _varint(buf, pos, path)
        num, wire = key >> 3, key & 7
        if wire == 0:
            v, pos = _varint(buf, pos, f"{path}.{num}")
        elif wire == 2:
            n, pos = _varint(buf, pos, f"{path}.{num}")
            if pos + n > len(buf):
                raise ValueError(f"{path}.{num}: field of {n} bytes passes the end of the message")
            v, pos = buf[pos:pos + n], pos + n
        elif wire in (1, 5):
            n = 8 if wire == 1 else 4
            if pos + n > len(buf):
                raise ValueError(f"{path}.{num}: truncated fixed-width field")
            v, pos = buf[pos:pos + n], pos + n
        else:
            raise ValueError(f"{path}: field {num} has wire type {wire}, which this reader does not take")
        yield num, wire, v


def _int32(v: int) -> int:
    v &= (1 << 64) - 1
    return v - (1 << 64) if v >= 1 << 63 else v


def _token(buf: bytes, path: str):
    """A TokenUnion: token_ids (1: TokenIds, its ids packed or not) or token_str (2)."""
    tok = None
    for num, wire, v in _fields(buf, path):
        if num == 1 and wire == 2:
            ids = []
            for n2, w2, x in _fields(v, f"{path}.token_ids"):
                if n2 == 1 and w2 == 0:
                    ids.append(_int32(x))
                elif n2 == 1 and w2 == 2:
                    p = 0
                    while p < len(x):
                        i, p = _varint(x, p, f"{path}.token_ids.ids")
                        ids.append(_int32(i))
            tok = ids
        elif num == 2 and wire == 2:
            tok = v.decode("utf-8", "replace")
    return tok


def parse_llm_metadata(buf: bytes) -> LlmMetadata:
    """LlmMetadata: start_token (1), stop_tokens (2), prompt_templates (3), max_num_tokens (5);
    other fields (sampler parameters, newer additions) are skipped."""
    m = LlmMetadata()
    for num, wire, v in _fields(buf, "LlmMetadata"):
        if num == 1 and wire == 2:
            m.start_token = _token(v, "start_token")
        elif num == 2 and wire == 2:
            t = _token(v, f"stop_tokens[{len(m.stop_tokens)}]")
            if t is not None:
                m.stop_tokens.append(t)
        elif num == 3 and wire == 2:
            for role_num, w, aff in _fields(v, "prompt_templates"):
                role = {1: "user", 2: "model", 3: "system"}.get(role_num)
                if role and w == 2:
                    parts = {n: x.decode("utf-8", "replace") for n, w2, x in _fields(aff, f"prompt_templates.{role}")
                             if w2 == 2 and n in (1, 2)}
                    m.templates[role] = (parts.get(1, ""), parts.get(2, ""))
        elif num == 5 and wire == 0:
            m.max_num_tokens = _int32(v)
    return m


# -- what `gpuc generate --prompt` needs beside the compiled model --------------------------------------

def sidecars(bundle_path: str) -> dict:
    """The files `gpuc compile model.litertlm -o B` writes beside bundle B: B.tokenizer.json (HF) or
    B.tokenizer.model (SentencePiece), and B.llm.json (start / stop tokens, prompt templates)."""
    return {"hf": f"{bundle_path}.tokenizer.json", "sentencepiece": f"{bundle_path}.tokenizer.model",
            "meta": f"{bundle_path}.llm.json"}


def write_sidecars(lm: LitertLm, bundle_path: str) -> list:
    import json
    paths, files = sidecars(bundle_path), []
    tok = lm.tokenizer()
    if tok is not None:
        with open(paths[tok[0]], "wb") as f:
            f.write(tok[1])
        files.append(paths[tok[0]])
    m = lm.llm_metadata()
    with open(paths["meta"], "w") as f:
        json.dump({"start_token": m.start_token, "stop_tokens": m.stop_tokens,
                   "templates": {k: list(v) for k, v in m.templates.items()},
                   "max_num_tokens": m.max_num_tokens}, f, indent=1)
    files.append(paths["meta"])
    return files


def read_sidecar_metadata(bundle_path: str) -> LlmMetadata:
    import json
    import os
    path = sidecars(bundle_path)["meta"]
    if not os.path.exists(path):
        return LlmMetadata()
    try:
        with open(path) as f:
            d = json.load(f)
        return LlmMetadata(d.get("start_token"), list(d.get("stop_tokens") or []),
                           {k: (str(v[0]), str(v[1])) for k, v in (d.get("templates") or {}).items()},
                           int(d.get("max_num_tokens") or 0))
    except (OSError, ValueError, TypeError, IndexError, AttributeError) as e:
        raise LitertlmError(f"{path}: not a valid LLM metadata file ({e})") from None


def prompt_ids(tokenizer, meta: LlmMetadata, text: str, template: bool = True) -> list:
    """LiteRT-LM's prompt: the start token, then the text in the user turn's affixes followed by the
    model turn's prefix (where the metadata has templates and `template` is on)."""
    if template and meta.templates:
        user, model = meta.templates.get("user", ("", "")), meta.templates.get("model", ("", ""))
        text = user[0] + text + user[1] + model[0]
    start = tokenizer.token_ids(meta.start_token, "start_token") if meta.start_token not in (None, "", []) else []
    return list(start) + tokenizer.encode(text)


def stop_sequences(tokenizer, meta: LlmMetadata) -> list:
    """Each stop token as a tuple of ids (most are one id)."""
    return [tuple(tokenizer.token_ids(t, f"stop_tokens[{i}]")) for i, t in enumerate(meta.stop_tokens)
            if t not in ("", [])]
