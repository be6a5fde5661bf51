"""A read bundle's fields checked against each other (runtime/bundle.py `validate`, run by read_bundle):
tensor sizes, offsets and memories; inputs, outputs and the header's I/O record; state pairs; program
steps; run-time checks; per-run output sizes; the shaders and every dispatch against their manifests
(runtime/bundle_shaders.py).  One BundleError naming the field."""
from __future__ import annotations

import json

from gpuc.errors import BundleError
from gpuc.runtime.bundle_format import (ARENA, CHECK_WORDS, GPU, HOST, JUMP, JUMP_IF_FALSE, MAX_BINDINGS,
                                        OFFSET_ALIGN, STEP_KINDS, WEIGHTS, io_record)


def validate_bundle(b) -> None:
    """Every index and offset the runtime will hand to Vulkan must be in range."""
    import numpy as np
    nt = len(b.tensors)
    for i, t in enumerate(b.tensors):
        try:
            itemsize = np.dtype(t.dtype).itemsize
        except TypeError:
            raise BundleError(f"corrupt bundle: tensor {i} ({t.name!r}) has unknown dtype {t.dtype!r}") from None
        if any(d < 0 for d in t.shape) or t.nbytes != int(np.prod(t.shape, dtype=np.int64)) * itemsize:
            raise BundleError(f"corrupt bundle: tensor {i} ({t.name!r}) size does not match its shape")
        limit = b.arena_bytes if t.memory == ARENA else b.weights.nbytes if t.memory == WEIGHTS else -1
        if limit < 0:
            raise BundleError(f"corrupt bundle: tensor {i} ({t.name!r}) has unknown memory kind {t.memory}")
        if t.offset + t.nbytes > limit:
            raise BundleError(f"corrupt bundle: tensor {i} ({t.name!r}) lies outside its memory")
        if t.offset % OFFSET_ALIGN:
            raise BundleError(f"corrupt bundle: tensor {i} ({t.name!r}) offset {t.offset} is not a multiple "
                              f"of {OFFSET_ALIGN}")
    for kind, idx in (("input", b.inputs), ("output", b.outputs)):
        for i in idx:
            if not 0 <= i < nt or b.tensors[i].memory != ARENA:
                raise BundleError(f"corrupt bundle: {kind} refers to bad tensor {i}")
    try:
        io = io_record(b.tensors, b.inputs, b.outputs, b.options)
    except (TypeError, ValueError):
        io = None
    if b.stats.get("io") != io:
        raise BundleError("corrupt bundle: its inputs and outputs (tensor, shape, dtype, run-time sizes) differ from "
                          f"the header's record of them: {io} against {b.stats.get('io')}"[:300])
    for dst, src in b.state_init:
        if not (0 <= dst < nt and 0 <= src < nt) or b.tensors[dst].memory != ARENA \
                or b.tensors[src].memory != WEIGHTS or b.tensors[dst].nbytes != b.tensors[src].nbytes:
            raise BundleError(f"corrupt bundle: state_init refers to bad tensors ({dst}, {src})")
    _validate_steps(b)
    _validate_checks(b)
    _validate_output_sizes(b)
    for j, s in enumerate(b.shaders):
        if len(s.spirv) < 20 or len(s.spirv) % 4 or s.spirv[:4] != b"\x03\x02\x23\x07":
            raise BundleError(f"corrupt bundle: shader {j} ({s.name}) is not SPIR-V")
        if s.bindings > MAX_BINDINGS or s.push_bytes > 128 or s.push_bytes % 4:
            raise BundleError(f"corrupt bundle: shader {j} ({s.name}) has bad binding/push sizes")
    for j, d in enumerate(b.dispatches):
        if not 0 <= d.shader < len(b.shaders):
            raise BundleError(f"corrupt bundle: dispatch {j} uses missing shader {d.shader}")
        s = b.shaders[d.shader]
        if len(d.bindings) != s.bindings or any(not 0 <= t < nt for t in d.bindings):
            raise BundleError(f"corrupt bundle: dispatch {j} ({d.label}) has bad bindings")
        if len(d.push_constants) != s.push_bytes:
            raise BundleError(f"corrupt bundle: dispatch {j} ({d.label}) push constants do not match its shader")
        if len(d.groups) != 3 or any(not 1 <= g <= 65535 for g in d.groups):
            raise BundleError(f"corrupt bundle: dispatch {j} ({d.label}) has bad workgroup counts {d.groups}")
    for j, v in enumerate(b.variants):
        if not 0 <= v.dispatch < len(b.dispatches) or not 0 <= v.shader < len(b.shaders):
            raise BundleError(f"corrupt bundle: variant {j} ({v.name}) refers to a missing dispatch or shader")
        d, s = b.dispatches[v.dispatch], b.shaders[v.shader]
        if s.bindings != len(d.bindings) or s.push_bytes != len(d.push_constants):
            raise BundleError(f"corrupt bundle: variant {j} ({v.name}) shader does not fit dispatch {v.dispatch}")
        if len(v.groups) != 3 or any(not 1 <= g <= 65535 for g in v.groups) or not isinstance(v.requires, dict):
            raise BundleError(f"corrupt bundle: variant {j} ({v.name}) has bad workgroup counts or requirements")
    from gpuc.runtime import bundle_shaders
    b.interfaces = bundle_shaders.check(b)      # the modules, and every dispatch against its module's manifest


def _validate_steps(b) -> None:
    """Program steps: dispatch ranges, CPU ops the runtime has, tensor indices, jump targets."""
    from gpuc.runtime.cpu_ops import CPU_OPS
    nt, nd, ns = len(b.tensors), len(b.dispatches), len(b.steps)
    for j, s in enumerate(b.steps):
        bad = None
        if s.kind == GPU:
            bad = None if 0 <= s.first and s.first + s.count <= nd else f"dispatch range {s.first}+{s.count} (of {nd})"
        elif s.kind == HOST:
            if s.op not in CPU_OPS:
                bad = f"CPU op {s.op!r} unknown to this runtime"
            elif any(not -1 <= t < nt for t in s.inputs) or any(not 0 <= t < nt for t in s.outputs) or not s.outputs:
                bad = "tensor index out of range"
            elif any(b.tensors[t].memory != ARENA for t in s.outputs):
                bad = "an output is not in the arena"
            else:
                try:
                    if not isinstance(json.loads(s.attrs or "{}"), dict):
                        bad = "attrs are not a JSON object"
                except ValueError:
                    bad = "attrs are not JSON"
        elif s.kind in (JUMP_IF_FALSE, JUMP):
            if not 0 <= s.target <= ns:
                bad = f"jump target {s.target} (of {ns} steps)"
            elif s.kind == JUMP_IF_FALSE and (len(s.inputs) != 1 or not 0 <= s.inputs[0] < nt
                                             or b.tensors[s.inputs[0]].memory != ARENA):
                bad = "condition tensor out of range"
        else:
            bad = f"unknown kind {s.kind}"
        if bad:
            raise BundleError(f"corrupt bundle: program step {j} ({s.label or STEP_KINDS[s.kind] if s.kind < 4 else s.kind}): {bad}")


def _validate_checks(b) -> None:
    """Run-time checks: one status tensor, uint32 [rows, words] in the arena (rows: max_batch for a
    batch-native bundle, else 1), every check's words inside a row."""
    import numpy as np
    if not b.checks:
        return
    sid = b.checks[0].status
    native = bool(b.options.get("batch_native")) and b.options.get("max_batch", 1) > 1
    rows = b.options.get("max_batch", 1) if native else 1
    t = b.tensors[sid] if 0 <= sid < len(b.tensors) else None
    if t is None or t.memory != ARENA or t.dtype != "uint32" or len(t.shape) != 2 or t.shape[0] != rows:
        raise BundleError(f"corrupt bundle: check status tensor {sid} is not a uint32 [{rows}, words] arena tensor")
    for j, c in enumerate(b.checks):
        if c.status != sid or not 0 <= c.word <= t.shape[1] - CHECK_WORDS or not c.bounds \
                or any(not -1 <= int(x) < 1 << 62 for x in np.asarray(c.bounds).reshape(-1)):
            raise BundleError(f"corrupt bundle: check {j} ({c.op} of {c.tensor!r}) has a bad status word or bounds")


def _validate_output_sizes(b) -> None:
    """Each trimmed output: a real output and axis, at most one entry per output, its length an int32
    scalar model input."""
    seen = set()
    for j, o in enumerate(b.output_sizes):
        t = b.tensors[b.outputs[o.output]] if 0 <= o.output < len(b.outputs) else None
        n = b.tensors[o.length] if 0 <= o.length < len(b.tensors) else None
        if o.rule:              # (runtime/output_sizes.py RULES)
            from gpuc.runtime.output_sizes import rule_reason
            bad = rule_reason(b, o, t, n) if t is not None and n is not None else "no such tensor"
            if bad or o.output in seen or not 0 <= o.axis < len(t.shape):
                raise BundleError(f"corrupt bundle: output size {j} (output {o.output}, axis {o.axis}, rule {o.rule!r}, "
                                  f"length tensor {o.length}): {bad or 'a bad output axis'}")
        elif t is None or o.output in seen or not 0 <= o.axis < len(t.shape) or n is None \
                or o.length not in b.inputs or n.dtype != "int32" or n.nbytes != 4:
            raise BundleError(f"corrupt bundle: output size {j} (output {o.output}, axis {o.axis}, length tensor "
                              f"{o.length}) does not name an output axis and an int32 scalar input")
        seen.add(o.output)
