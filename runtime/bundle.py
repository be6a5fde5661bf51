"""The bundle: the one contract between compiler and runtime (schema in bundle.fbs, read at import).

`write_bundle(Bundle) -> bytes` / `write_bundle_parts` / `write_bundle_to(Bundle, file)` (used by the
compiler) and `read_bundle(bytes or memory map) -> Bundle` (used by the runtime: checks identifier, magic,
version, checksum, the sections (format 4) and every index/offset).  Format 4 files are
flatbuffer + sections (weights, fp32 fallback) + trailer (bundle.fbs), so weights may exceed 2 GB.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field

import xxhash

from gpuc.errors import BundleError
from gpuc.runtime import flatbuf
from gpuc.runtime.bundle_format import (  # noqa: F401 - the format's constants, re-exported
    ARENA, BUNDLE_SCHEMA, CHECK_WORDS, FILE_ID, FORMAT_VERSION, GPU, HOST, JUMP, JUMP_IF_FALSE, MAGIC, MAX_BINDINGS,
    OFFSET_ALIGN, OLDEST_FORMAT, SECTION_ALIGN, STEP_KINDS, WEIGHTS, io_record)
from gpuc.runtime.bundle_validate import validate_bundle
from gpuc.runtime.trailer import (  # noqa: F401 - re-exported
    TRAILER_BYTES, TRAILER_MAGIC, digest_ok, trailer_of, with_trailer)


@dataclass
class TensorInfo:
    name: str
    shape: tuple
    dtype: str
    memory: int           # ARENA or WEIGHTS
    offset: int
    nbytes: int
    quant: dict | None = None   # {"scale": [...], "zero_point": [...], "axis": int}


@dataclass
class Shader:
    name: str
    spirv: bytes
    bindings: int
    push_bytes: int = 0
    entry: str = "main"


@dataclass
class Dispatch:
    shader: int
    bindings: list
    groups: tuple
    push_constants: bytes = b""
    label: str = ""
    flops: int = 0                # arithmetic work estimate, for `gpuc profile`
    item_inner: int = 0           # batch-native: the grid's item-major unit (0: whole grid for any b)


@dataclass
class Variant:
    """Dispatch `dispatch` may run `shader` (same bindings) with `groups` instead, on a device that
    meets `requires` (runtime/capabilities.py vocabulary): a hardware path of the same computation.
    The runtime resolves variants at load (runtime/variants.py): the first one met per dispatch wins."""
    dispatch: int
    shader: int
    groups: tuple
    requires: dict
    name: str = ""
    item_inner: int = 0           # as Dispatch.item_inner, for this variant's grid
    measured: bool = False        # a candidate only: taken where tuning measures it faster (runtime/tuning.py)


@dataclass
class Check:
    """A kernel's run-time check (compiler/status.py, runtime/status.py): status tensor `status` holds,
    from word `word` of each row, the count of bad values met, the first one's low and high 32 bits and
    its position k (valid: 0 <= value < bounds[k]; bound -1: a size known only at run time)."""
    status: int
    word: int
    op: str
    operator: int
    tensor: str
    bounds: list


@dataclass
class Step:
    """One step of a bundle's program (absent program: one GPU step running every dispatch).
    GPU: dispatches [first, first + count), recorded once; HOST: numpy CPU kernel `op` (runtime/cpu_ops.py)
    with JSON `attrs` on tensors `inputs` (-1: absent) -> `outputs`; JUMP_IF_FALSE: read the bool/number
    tensor inputs[0] back and go to step `target` when it is false/zero; JUMP: go to `target`."""
    kind: int
    first: int = 0
    count: int = 0
    op: str = ""
    attrs: str = ""
    inputs: list = field(default_factory=list)
    outputs: list = field(default_factory=list)
    target: int = 0
    label: str = ""


@dataclass
class OutputSize:
    """Output `output` (its position in Bundle.outputs) holds, along `axis`, as many entries as the run's
    value of tensor `length` (an int32 scalar model input) says: run() returns it trimmed to that.
    `rule` (runtime/output_sizes.py RULES) finds the length otherwise from `length`'s values."""
    output: int
    axis: int
    length: int
    rule: str = ""


@dataclass
class Bundle:
    model_name: str
    tensors: list
    inputs: list
    outputs: list
    shaders: list
    dispatches: list
    arena_bytes: int
    weights: object                          # numpy uint8 array
    options: dict = field(default_factory=dict)
    stats: dict = field(default_factory=dict)
    compiler_version: str = ""
    fingerprint: str = ""
    format_version: int = FORMAT_VERSION
    checksum: str = ""                       # set by read_bundle (identifies the exact bundle)
    state_init: list = field(default_factory=list)   # [(arena tensor, weights tensor with its initial value)]
    fallback: bytes = b""      # fp16 bundles: the complete fp32 bundle (bytes or a view of the file's section)
    steps: list = field(default_factory=list)        # program (Step); empty: every dispatch on the GPU, once
    variants: list = field(default_factory=list)     # Variant: per-dispatch hardware paths, chosen at load
    checks: list = field(default_factory=list)       # Check: run-time checks of the kernels (runtime/status.py)
    signature: str = ""        # multi-signature bundles: this program's signature key
    signatures: list = field(default_factory=list)   # Bundle: the other signatures (same weights and arena)
    output_sizes: list = field(default_factory=list)  # OutputSize: outputs trimmed per run (runtime/output_sizes.py)
    interfaces: list = field(default_factory=list, repr=False)   # set by validate: runtime/shader_check.Interface


def checksum(payload, compiler_version: str, fingerprint: str, format_version: int, stats: str,
             sections: tuple = ()) -> str:
    """Covers the payload and every other header field (magic and identifier are checked by value);
    format 4: the section fields too (flatbuffer_bytes, weights_offset, weights_size, fallback_offset, _size)."""
    h = xxhash.xxh3_128()
    h.update(payload)
    h.update(f"|{compiler_version}|{fingerprint}|{format_version}|{stats}".encode())
    if format_version >= 4:
        h.update(("|" + ",".join(str(int(x)) for x in sections)).encode())
    return h.hexdigest()


SECTION_FIELDS = ("flatbuffer_bytes", "weights_offset", "weights_size", "fallback_offset", "fallback_size")


def _align(n: int) -> int:
    return -(-n // SECTION_ALIGN) * SECTION_ALIGN


def write_bundle(b: Bundle) -> bytes:
    """The bundle file's bytes (write_bundle_parts joined)."""
    return b"".join(write_bundle_parts(b))


def write_bundle_to(b: Bundle, f) -> int:
    """Write the bundle file to binary file object `f` part by part (no joined copy); returns its size."""
    n = 0
    for part in write_bundle_parts(b):
        f.write(part)
        n += len(part)
    return n


def write_bundle_parts(b: Bundle) -> list:
    """The bundle file as buffers to concatenate: format 4 (b.format_version >= 4) the flatbuffer, the
    weights and fallback sections (views of b.weights and b.fallback, not copies) with their padding, and
    the trailer; format 3 (a bundle read from a v3 file) the flatbuffer with them inline, and the trailer."""
    import flatbuffers
    import numpy as np
    v3 = b.format_version < 4
    weights = memoryview(np.ascontiguousarray(b.weights).reshape(-1).view(np.uint8))
    fallback = memoryview(b.fallback).cast("B") if len(b.fallback) else None
    pb = flatbuffers.Builder(1024 + (len(weights) + len(b.fallback) if v3 else 0))
    payload = {
        "model_name": b.model_name, "options": json.dumps(b.options, sort_keys=True),
        "tensors": [{"name": t.name, "shape": list(t.shape), "dtype": t.dtype, "memory": t.memory,
                     "offset": t.offset, "nbytes": t.nbytes, "quant": t.quant} for t in b.tensors],
        "inputs": b.inputs, "outputs": b.outputs,
        "shaders": [{"name": s.name, "spirv": np.frombuffer(s.spirv, np.uint8), "entry": s.entry,
                     "bindings": s.bindings, "push_bytes": s.push_bytes} for s in b.shaders],
        "dispatches": [{"shader": d.shader, "bindings": d.bindings,
                        "push_constants": np.frombuffer(d.push_constants, np.uint8),
                        "groups": list(d.groups), "label": d.label, "flops": d.flops,
                        "item_inner": d.item_inner} for d in b.dispatches],
        "arena_bytes": b.arena_bytes, "weights": np.frombuffer(weights, np.uint8) if v3 else None,
        "state_init": [int(x) for pair in b.state_init for x in pair] or None,   # absent when stateless
        "fallback": np.frombuffer(fallback, np.uint8) if v3 and fallback is not None else None,
        "steps": [{"kind": s.kind, "first": s.first, "count": s.count, "op": s.op or None, "attrs": s.attrs or None,
                   "inputs": s.inputs, "outputs": s.outputs, "target": s.target, "label": s.label or None}
                  for s in b.steps] or None,
        "variants": [{"dispatch": v.dispatch, "shader": v.shader, "groups": list(v.groups),
                      "requires": json.dumps(v.requires, sort_keys=True), "name": v.name or None,
                      "item_inner": v.item_inner, "measured": v.measured or None}
                     for v in b.variants] or None,
        "checks": [{"status": c.status, "word": c.word, "op": c.op, "operator": c.operator, "tensor": c.tensor,
                    "bounds": np.asarray(c.bounds, np.int64)} for c in b.checks] or None,
        "signature": b.signature or None,
        "signatures": [{"name": sub.signature,
                        "bundle": np.frombuffer(write_bundle(_without_weights(sub, b.format_version)), np.uint8)}
                       for sub in b.signatures] or None,
        "output_sizes": [{"output": o.output, "axis": o.axis, "length": o.length, "rule": o.rule or None}
                         for o in b.output_sizes] or None,
    }
    pb.Finish(flatbuf.write(pb, BUNDLE_SCHEMA, "Payload", payload))
    payload_bytes = bytes(pb.Output())
    del pb
    stats = json.dumps(b.stats, sort_keys=True)

    def header(sections: tuple) -> bytes:
        ob = flatbuffers.Builder(len(payload_bytes) + len(stats) + 1024)
        fields = {"magic": MAGIC, "format_version": b.format_version, "compiler_version": b.compiler_version,
                  "fingerprint": b.fingerprint,
                  "checksum": checksum(payload_bytes, b.compiler_version, b.fingerprint, b.format_version, stats,
                                       sections),
                  "payload": np.frombuffer(payload_bytes, np.uint8), "stats": stats}
        if not v3:
            fields.update(zip(SECTION_FIELDS, sections))
        ob.Finish(flatbuf.write(ob, BUNDLE_SCHEMA, "Bundle", fields), file_identifier=FILE_ID)
        return bytes(ob.Output())

    if v3:
        body = header(())
        return [body, trailer_of([body])]
    nw, nf = len(weights), len(fallback) if fallback is not None else 0
    # Its length does not depend on the section fields' values, only on which are non-zero (a zero scalar
    # is left out): measure it with stand-ins, then place the sections after it.
    size = len(header((1, int(nw > 0), nw, int(nf > 0), nf)))
    woff = _align(size) if nw else 0
    foff = _align(woff + nw if nw else size) if nf else 0
    body = header((size, woff, nw, foff, nf))
    assert len(body) == size, "bundle header length changed with its section fields"
    parts, at = [body], size
    for off, sec in ((woff, weights), (foff, fallback)):
        if sec is not None and len(sec):
            parts += [bytes(off - at), sec]
            at = off + len(sec)
    return parts + [trailer_of(parts)]


def _without_weights(sub: Bundle, version: int = FORMAT_VERSION) -> Bundle:
    """A signature as its bundle stores it: its weight tensors lie in the top's blob."""
    import dataclasses
    import numpy as np
    return dataclasses.replace(sub, weights=np.zeros(0, np.uint8), signatures=[], fallback=b"", format_version=version)


def _field_error(field: str, value: int, what: str):
    raise BundleError(f"corrupt bundle: header field {field} = {value} {what}")


def read_header(data) -> dict:
    """Check the whole-file digest, then parse and check the outer table (magic, version, checksum; format 4:
    the flatbuffer's length and the sections).  The dict gets "sections": {"weights": (offset, size),
    "fallback": (offset, size)} (v4) and "body": the file without its trailer."""
    if len(data) < 8 or bytes(data[4:8]) != FILE_ID:
        raise BundleError("not a gpuc bundle (missing 'GPUB' identifier); compile one with `gpuc compile`")
    if not digest_ok(data):
        raise BundleError("corrupt bundle: file digest mismatch (damaged or truncated); recompile it")
    body = memoryview(data).cast("B")[:len(data) - TRAILER_BYTES]
    head = _parse_header(body)
    if head["magic"] != MAGIC:
        raise BundleError(f"corrupt bundle: bad magic {head['magic']!r}")
    ver = head["format_version"]
    if ver > FORMAT_VERSION:
        raise BundleError(f"bundle format version {ver} is newer than this runtime supports "
                          f"({FORMAT_VERSION}); rebuild it with this gpuc, or upgrade gpuc "
                          f"(made by gpuc {head['compiler_version']})")
    if ver < OLDEST_FORMAT:
        raise BundleError(f"bundle format version {ver} is no longer supported (this gpuc writes version "
                          f"{FORMAT_VERSION}); rebuild it: recompile the model with `gpuc compile`")
    sections = tuple(int(head.get(k) or 0) for k in SECTION_FIELDS)
    if ver >= 4:
        size = sections[0]
        if not 8 <= size <= len(body):
            _field_error("flatbuffer_bytes", size, f"is not a length within the file's {len(body)} bytes")
        try:                                        # no offset of the flatbuffer may point past its length
            head = _parse_header(body[:size])
        except BundleError as e:
            _field_error("flatbuffer_bytes", size, f"cuts the flatbuffer short ({e})")
        _check_sections(sections, body)
        head["sections"] = {"weights": sections[1:3], "fallback": sections[3:5]}
    elif any(sections):
        raise BundleError("corrupt bundle: a format 3 bundle with format 4 section fields")
    if head["payload"] is None:
        raise BundleError("corrupt bundle: no payload")
    if checksum(head["payload"], head["compiler_version"] or "", head["fingerprint"] or "", ver,
                head["stats"] or "", sections) != head["checksum"]:
        raise BundleError("corrupt bundle: checksum mismatch (file damaged or truncated); recompile it")
    head["body"] = body
    return head


def _parse_header(body) -> dict:
    try:
        return dict(flatbuf.read(body, BUNDLE_SCHEMA, "Bundle"))
    except flatbuf.FlatbufferError as e:
        raise BundleError(f"corrupt bundle: {e}") from None


def _check_sections(sections: tuple, body) -> None:
    """Each section: absent (offset and size 0), or aligned, past the flatbuffer, inside the file; disjoint;
    the fallback's is a bundle file (identifier and trailer: it is checked whole where it is loaded)."""
    fb, body_bytes = sections[0], len(body)
    spans = []
    for name, off, size in (("weights", *sections[1:3]), ("fallback", *sections[3:5])):
        if size == 0:
            if off:
                _field_error(f"{name}_offset", off, f"is set but {name}_size is 0")
            continue
        if off % SECTION_ALIGN:
            _field_error(f"{name}_offset", off, f"is not a multiple of {SECTION_ALIGN}")
        if off < fb:
            _field_error(f"{name}_offset", off, f"overlaps the flatbuffer ({fb} bytes)")
        if off + size > body_bytes:
            _field_error(f"{name}_size", size, f"runs past the end of the file's body ({name}_offset {off}, "
                                               f"{body_bytes} bytes before the trailer)")
        spans.append((off, off + size, name))
    if len(spans) == 2 and spans[0][0] < spans[1][1] and spans[1][0] < spans[0][1]:
        _field_error("fallback_offset", sections[3], "overlaps the weights section")
    off, size = sections[3:5]
    if size and (size < 8 + TRAILER_BYTES or bytes(body[off + 4:off + 8]) != FILE_ID
                 or bytes(body[off + size - TRAILER_BYTES:off + size - TRAILER_BYTES + 8]) != TRAILER_MAGIC):
        _field_error("fallback_size", size, f"(fallback_offset {off}) does not frame a bundle file")


def header_stats(data) -> dict:
    """Compiler statistics from a verified header, without parsing the payload."""
    return json.loads(read_header(data)["stats"] or "{}")


def read_bundle(data) -> Bundle:
    """The bundle of file bytes `data` (bytes, or any buffer: a memory map is read in place; the weights
    and the fallback are views of it, not copies)."""
    import numpy as np
    head = read_header(data)
    try:
        p = flatbuf.read(head["payload"], BUNDLE_SCHEMA, "Payload")
        options = json.loads(p["options"] or "{}")
        stats = json.loads(head["stats"] or "{}")
    except (flatbuf.FlatbufferError, ValueError) as e:
        raise BundleError(f"corrupt bundle payload: {e}") from None
    if "sections" in head:
        if p["weights"] is not None or p["fallback"] is not None:
            raise BundleError("corrupt bundle: a format 4 payload with inline weights or fallback (they lie in "
                              "the file's sections)")
        (woff, wn), (foff, fn) = head["sections"]["weights"], head["sections"]["fallback"]
        weights = np.frombuffer(head["body"], np.uint8, wn, woff) if wn else np.zeros(0, np.uint8)
        fallback = head["body"][foff:foff + fn] if fn else b""
    else:
        weights, fallback = _arr(p["weights"]), bytes(_arr(p["fallback"]))
    try:
        b = _from_payload(p, head, options, stats, weights, fallback)
    except ValueError as e:                        # e.g. a variant's requirements that are not JSON
        raise BundleError(f"corrupt bundle payload: {e}") from None
    b.signature = p.get("signature") or ""
    b.signatures = [_signature(j, s, b) for j, s in enumerate(p.get("signatures") or [])]
    _validate_signatures(b)
    return b


def _signature(j: int, entry, top: Bundle) -> Bundle:
    """Signature j of a multi-signature bundle: a complete bundle over the top's weights."""
    name = entry.get("name") or ""
    head = read_header(bytes(_arr(entry.get("bundle"))))
    try:
        p = dict(flatbuf.read(head["payload"], BUNDLE_SCHEMA, "Payload"))
        options = json.loads(p["options"] or "{}")
        stats = json.loads(head["stats"] or "{}")
    except (flatbuf.FlatbufferError, ValueError) as e:
        raise BundleError(f"corrupt bundle: signature {j} ({name!r}): {e}") from None
    if _arr(p["weights"]).size or p.get("signatures") or p.get("fallback") is not None and _arr(p["fallback"]).size \
            or any(n for _, n in head.get("sections", {}).values()):
        raise BundleError(f"corrupt bundle: signature {j} ({name!r}) has weights, a fallback or signatures of "
                          "its own")
    if head["format_version"] != top.format_version:
        raise BundleError(f"corrupt bundle: signature {j} ({name!r}) is format {head['format_version']}, "
                          f"the bundle {top.format_version}")
    try:                                           # its weight tensors lie in the top's blob (validated so)
        sub = _from_payload(p, head, options, stats, top.weights, b"")
    except ValueError as e:
        raise BundleError(f"corrupt bundle: signature {j} ({name!r}): {e}") from None
    sub.signature = p.get("signature") or ""
    if sub.signature != name:
        raise BundleError(f"corrupt bundle: signature {j} is named {name!r} but its program says {sub.signature!r}")
    return sub


def _validate_signatures(b: Bundle) -> None:
    """Names unique and non-empty; every signature over the top's arena (state shared by offset)."""
    if not b.signatures:
        return
    names = [b.signature] + [s.signature for s in b.signatures]
    if not all(names) or len(set(names)) != len(names):
        raise BundleError(f"corrupt bundle: signature names are empty or repeated: {names}")
    for j, s in enumerate(b.signatures):
        if s.arena_bytes != b.arena_bytes:
            raise BundleError(f"corrupt bundle: signature {j} ({s.signature!r}) has arena_bytes {s.arena_bytes}, "
                              f"the bundle {b.arena_bytes} (one arena serves every signature)")


def _from_payload(p, head, options, stats, weights, fallback) -> Bundle:
    tensors = [TensorInfo(t["name"] or "", tuple(int(x) for x in (t["shape"] if t["shape"] is not None else ())),
                          t["dtype"] or "", t["memory"], t["offset"], t["nbytes"],
                          None if t["quant"] is None else {
                              "scale": [float(x) for x in (t["quant"]["scale"] if t["quant"]["scale"] is not None else [])],
                              "zero_point": [int(x) for x in (t["quant"]["zero_point"] if t["quant"]["zero_point"] is not None else [])],
                              "axis": t["quant"]["axis"]})
               for t in p["tensors"] or []]
    b = Bundle(
        model_name=p["model_name"] or "", tensors=tensors,
        inputs=[int(i) for i in _arr(p["inputs"])], outputs=[int(i) for i in _arr(p["outputs"])],
        shaders=[Shader(s["name"] or "", bytes(_arr(s["spirv"])), s["bindings"], s["push_bytes"], s["entry"] or "main")
                 for s in p["shaders"] or []],
        dispatches=[Dispatch(d["shader"], [int(x) for x in _arr(d["bindings"])], tuple(int(x) for x in _arr(d["groups"])),
                             bytes(_arr(d["push_constants"])), d["label"] or "", d["flops"], d["item_inner"] or 0)
                    for d in p["dispatches"] or []],
        arena_bytes=p["arena_bytes"], weights=weights, options=options, stats=stats,
        compiler_version=head["compiler_version"] or "", fingerprint=head["fingerprint"] or "",
        format_version=head["format_version"], checksum=head["checksum"] or "",
        state_init=_pairs(p["state_init"]), fallback=fallback,
        steps=[Step(s["kind"], s["first"], s["count"], s["op"] or "", s["attrs"] or "",
                    [int(x) for x in _arr(s["inputs"])], [int(x) for x in _arr(s["outputs"])], s["target"],
                    s["label"] or "") for s in p["steps"] or []],
        variants=[Variant(v["dispatch"], v["shader"], tuple(int(x) for x in _arr(v["groups"])),
                          json.loads(v["requires"] or "{}"), v["name"] or "", v["item_inner"] or 0,
                          bool(v["measured"]))
                  for v in p["variants"] or []],
        checks=[Check(c["status"], c["word"], c["op"] or "", c["operator"], c["tensor"] or "",
                      [int(x) for x in _arr(c["bounds"])]) for c in p["checks"] or []])
    b.output_sizes = [OutputSize(o["output"], o["axis"], o["length"], o.get("rule") or "")
                      for o in p.get("output_sizes") or []]
    validate(b)
    return b


def _pairs(v) -> list:
    flat = [int(x) for x in _arr(v)]
    if len(flat) % 2:
        raise BundleError("corrupt bundle: state_init has an odd number of entries")
    return [(flat[i], flat[i + 1]) for i in range(0, len(flat), 2)]


def _arr(v):
    import numpy as np
    if v is None:
        return np.zeros(0, np.uint8)
    return np.frombuffer(v, np.uint8) if isinstance(v, memoryview) else v


def validate(b: Bundle) -> None:
    """Every index and offset the runtime will hand to Vulkan must be in range, and the fields must agree
    with each other and with the shaders' manifests (runtime/bundle_validate.py)."""
    validate_bundle(b)
