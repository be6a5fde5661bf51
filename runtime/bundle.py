"""The bundle: the one contract between compiler and runtime (schema in bundle.fbs, read at import).

`write_bundle(Bundle) -> bytes` (used by the compiler) and `read_bundle(bytes) -> Bundle`
(used by the runtime: checks identifier, magic, version, checksum and every index/offset).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field

import xxhash

from gpuc.errors import BundleError
from gpuc.runtime import flatbuf
from gpuc.runtime.bundle_format import (  # noqa: F401 - the format's constants, re-exported
    ARENA, BUNDLE_SCHEMA, CHECK_WORDS, FILE_ID, FORMAT_VERSION, GPU, HOST, JUMP, JUMP_IF_FALSE, MAGIC, MAX_BINDINGS,
    OFFSET_ALIGN, STEP_KINDS, WEIGHTS, io_record)
from gpuc.runtime.bundle_validate import validate_bundle
from gpuc.runtime.trailer import TRAILER_BYTES, TRAILER_MAGIC, digest_ok, with_trailer  # noqa: F401 - re-exported


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
    fallback: bytes = b""      # fp16 bundles: the complete fp32 bundle, for devices without 16-bit storage
    steps: list = field(default_factory=list)        # program (Step); empty: every dispatch on the GPU, once
    variants: list = field(default_factory=list)     # Variant: per-dispatch hardware paths, chosen at load
    checks: list = field(default_factory=list)       # Check: run-time checks of the kernels (runtime/status.py)
    signature: str = ""        # multi-signature bundles: this program's signature key
    signatures: list = field(default_factory=list)   # Bundle: the other signatures (same weights and arena)
    output_sizes: list = field(default_factory=list)  # OutputSize: outputs trimmed per run (runtime/output_sizes.py)
    interfaces: list = field(default_factory=list, repr=False)   # set by validate: runtime/shader_check.Interface


def checksum(payload, compiler_version: str, fingerprint: str, format_version: int, stats: str) -> str:
    """Covers the payload and every other header field (magic and identifier are checked by value)."""
    h = xxhash.xxh3_128()
    h.update(payload)
    h.update(f"|{compiler_version}|{fingerprint}|{format_version}|{stats}".encode())
    return h.hexdigest()


def write_bundle(b: Bundle) -> bytes:
    import flatbuffers
    import numpy as np
    pb = flatbuffers.Builder(1024 + int(b.weights.nbytes))
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
        "arena_bytes": b.arena_bytes, "weights": b.weights,
        "state_init": [int(x) for pair in b.state_init for x in pair] or None,   # absent when stateless
        "fallback": np.frombuffer(b.fallback, np.uint8) if b.fallback else None,
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
        "signatures": [{"name": sub.signature, "bundle": np.frombuffer(write_bundle(_without_weights(sub)), np.uint8)}
                       for sub in b.signatures] or None,
        "output_sizes": [{"output": o.output, "axis": o.axis, "length": o.length, "rule": o.rule or None}
                         for o in b.output_sizes] or None,
    }
    pb.Finish(flatbuf.write(pb, BUNDLE_SCHEMA, "Payload", payload))
    payload_bytes = bytes(pb.Output())
    ob = flatbuffers.Builder(len(payload_bytes) + 1024)
    stats = json.dumps(b.stats, sort_keys=True)
    root = flatbuf.write(ob, BUNDLE_SCHEMA, "Bundle", {
        "magic": MAGIC, "format_version": b.format_version, "compiler_version": b.compiler_version,
        "fingerprint": b.fingerprint,
        "checksum": checksum(payload_bytes, b.compiler_version, b.fingerprint, b.format_version, stats),
        "payload": np.frombuffer(payload_bytes, np.uint8), "stats": stats})
    ob.Finish(root, file_identifier=FILE_ID)
    body = bytes(ob.Output())
    return with_trailer(body)


def _without_weights(sub: Bundle) -> Bundle:
    """A signature as its bundle stores it: its weight tensors lie in the top's blob."""
    import dataclasses
    import numpy as np
    return dataclasses.replace(sub, weights=np.zeros(0, np.uint8), signatures=[], fallback=b"")


def read_header(data) -> dict:
    """Check the whole-file digest, then parse and check the outer table (magic, version, checksum)."""
    if len(data) < 8 or bytes(data[4:8]) != FILE_ID:
        raise BundleError("not a gpuc bundle (missing 'GPUB' identifier); compile one with `gpuc compile`")
    if not digest_ok(data):
        raise BundleError("corrupt bundle: file digest mismatch (damaged or truncated); recompile it")
    data = memoryview(data)[:len(data) - TRAILER_BYTES]
    try:
        head = flatbuf.read(data, BUNDLE_SCHEMA, "Bundle")
    except flatbuf.FlatbufferError as e:
        raise BundleError(f"corrupt bundle: {e}") from None
    if head["magic"] != MAGIC:
        raise BundleError(f"corrupt bundle: bad magic {head['magic']!r}")
    ver = head["format_version"]
    if ver > FORMAT_VERSION:
        raise BundleError(f"bundle format version {ver} is newer than this runtime supports "
                          f"({FORMAT_VERSION}); rebuild it with this gpuc, or upgrade gpuc "
                          f"(made by gpuc {head['compiler_version']})")
    if ver < FORMAT_VERSION:
        raise BundleError(f"bundle format version {ver} is no longer supported (this gpuc writes version "
                          f"{FORMAT_VERSION}); rebuild it: recompile the model with `gpuc compile`")
    if head["payload"] is None:
        raise BundleError("corrupt bundle: no payload")
    if checksum(head["payload"], head["compiler_version"] or "", head["fingerprint"] or "", ver,
                head["stats"] or "") != head["checksum"]:
        raise BundleError("corrupt bundle: checksum mismatch (file damaged or truncated); recompile it")
    return head


def header_stats(data) -> dict:
    """Compiler statistics from a verified header, without parsing the payload."""
    return json.loads(read_header(data)["stats"] or "{}")


def read_bundle(data) -> Bundle:
    head = read_header(data)
    try:
        p = flatbuf.read(head["payload"], BUNDLE_SCHEMA, "Payload")
        options = json.loads(p["options"] or "{}")
        stats = json.loads(head["stats"] or "{}")
    except (flatbuf.FlatbufferError, ValueError) as e:
        raise BundleError(f"corrupt bundle payload: {e}") from None
    try:
        b = _from_payload(p, head, options, stats)
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
    if _arr(p["weights"]).size or p.get("signatures") or p.get("fallback") is not None and _arr(p["fallback"]).size:
        raise BundleError(f"corrupt bundle: signature {j} ({name!r}) has weights, a fallback or signatures of "
                          "its own")
    p["weights"] = top.weights                     # its weight tensors lie in the top's blob (validated so)
    try:
        sub = _from_payload(p, head, options, stats)
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


def _from_payload(p, head, options, stats) -> Bundle:
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
        arena_bytes=p["arena_bytes"], weights=_arr(p["weights"]), options=options, stats=stats,
        compiler_version=head["compiler_version"] or "", fingerprint=head["fingerprint"] or "",
        format_version=head["format_version"], checksum=head["checksum"] or "",
        state_init=_pairs(p["state_init"]), fallback=bytes(_arr(p["fallback"])),
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
