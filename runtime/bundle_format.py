"""The bundle format's constants (schema in bundle.fbs, read at import) and the I/O record its header
carries: what the reader and writer (runtime/bundle.py), the field checks (bundle_validate.py,
bundle_shaders.py) and the run path (iospec.py, hazards.py) share.  Imports only runtime/flatbuf.py.
"""
from __future__ import annotations

import json
import os

from gpuc.runtime import flatbuf


def _schema() -> flatbuf.FbsSchema:
    """bundle.fbs (installed beside this module) is the one statement of the format's tables."""
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "bundle.fbs"), encoding="utf-8") as f:
        return flatbuf.parse_fbs(f.read())


_FBS = _schema()
BUNDLE_SCHEMA = _FBS.tables          # {table: {field: (slot, kind, default)}}, for flatbuf.read / write
MAGIC = "gpuc-bundle"
FILE_ID = _FBS.file_identifier.encode()
FORMAT_VERSION = 4          # 2: program steps (host CPU ops, control flow); 3: shader manifests, run-time checks;
#                             4: weights and fallback in sections after the flatbuffer (no 2 GB cap)
OLDEST_FORMAT = 3           # the oldest version read (weights and fallback inline in the payload)
# Every tensor offset (arena and weights) is a multiple of OFFSET_ALIGN, so a tensor can be bound as a
# storage buffer at its offset: a device needs minStorageBufferOffsetAlignment <= OFFSET_ALIGN (Vulkan
# caps that limit at 256; LoadedModel checks it at load).  The compiler's memory plan uses it too.
OFFSET_ALIGN = 256
SECTION_ALIGN = 256         # v4: every section's file offset is a multiple of it (tensor offsets stay aligned)
ARENA, WEIGHTS = _FBS.enums["Memory"]["Arena"], _FBS.enums["Memory"]["Weights"]      # TensorInfo.memory
MAX_BINDINGS = 32
CHECK_WORDS = 4             # words of one check in a row of the status tensor

GPU, HOST, JUMP_IF_FALSE, JUMP = (_FBS.enums["StepKind"][k] for k in ("Gpu", "Host", "JumpIfFalse", "Jump"))
STEP_KINDS = ("gpu", "host", "jump_if_false", "jump")


def io_record(tensors: list, inputs: list, outputs: list, options: dict) -> dict:
    """stats["io"]: the I/O tensors as the compiler made them ([index, shape, dtype] each), and the options
    that size them at run time (the batch bound; dynamic dims and the I/O shapes over them).  The runtime
    refuses a bundle whose payload disagrees with this header record (one of them lies)."""
    def rec(idx):
        return [[int(i), [int(x) for x in tensors[i].shape], tensors[i].dtype] if 0 <= i < len(tensors) else [int(i)]
                for i in idx]
    out = {"inputs": rec(inputs), "outputs": rec(outputs)}
    if options.get("batch_native") or options.get("max_batch", 1) != 1:
        out["batch"] = [options.get("batch_native"), options.get("max_batch")]
    dd = options.get("dynamic_dims")
    if dd is not None:
        out["dynamic"] = {"dims": dd.get("dims") if isinstance(dd, dict) else dd,
                          "shapes": dd.get("shapes") if isinstance(dd, dict) else None}
    return json.loads(json.dumps(out))          # as the header's JSON reads back
