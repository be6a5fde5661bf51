"""A model's inputs and outputs: IOSpec, their staging layout, and input normalisation (the one
place a run's inputs are ordered and checked, for every run path; dtypes as strictly as LiteRT's
set_tensor, and cast=True's checked conversion: runtime/casting.py)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpuc.errors import GpucError
from gpuc.runtime import casting
from gpuc.runtime.bundle_format import OFFSET_ALIGN
from gpuc.runtime.device_tensor import DeviceTensor


@dataclass
class IOSpec:
    """A model input or output.  `quant`: gpuc's quantization dict ({"scale": [...], "zero_point":
    [...], "axis": int}) or None; `quantization` and `quantization_parameters` give the same under
    LiteRT's names and types, as LiteRT's tensor details do."""
    name: str
    shape: tuple
    dtype: np.dtype
    quant: dict | None
    tensor: int          # bundle tensor index
    staging: int         # offset in the staging buffer

    @property
    def quantization(self) -> tuple:
        """LiteRT's `quantization`: (scale, zero_point) of a per-tensor quantized tensor, else (0.0, 0)."""
        return litert_quantization(self.quant)[0]

    @property
    def quantization_parameters(self) -> dict:
        """LiteRT's `quantization_parameters`: `scales` (float32 array), `zero_points` (int32 array),
        `quantized_dimension`, `block_size`."""
        return litert_quantization(self.quant)[1]


def litert_quantization(quant: dict | None) -> tuple:
    """gpuc's quantization dict (or None) as LiteRT's details show it: ((scale, zero_point),
    {"scales", "zero_points", "quantized_dimension", "block_size"})."""
    q = quant or {}
    scale, zp = q.get("scale"), q.get("zero_point")
    scales = np.asarray([] if scale is None else scale, np.float32).reshape(-1)
    zps = np.asarray([] if zp is None else zp, np.int64).reshape(-1).astype(np.int32)
    per_tensor = (float(scales[0]), int(zps[0])) if scales.size == 1 and zps.size == 1 else (0.0, 0)
    return per_tensor, {"scales": scales, "zero_points": zps,
                        "quantized_dimension": int(q.get("axis", 0) or 0), "block_size": 0}


def batch_native(bundle) -> bool:
    """A --max-batch bundle whose dispatches each compute every item (compiler/passes/batching.py): its
    I/O tensors hold max_batch items along axis 0 of one arena.  Else (max_batch > 1) the runtime
    replicates the batch-1 program, one arena per item (runtime/batch.py)."""
    return bool(bundle.options.get("batch_native")) and bundle.options.get("max_batch", 1) > 1


def item_bytes(bundle, t) -> int:
    """Bytes of one batch item of I/O tensor `t` (a TensorInfo)."""
    return t.nbytes // bundle.options["max_batch"] if batch_native(bundle) else t.nbytes


def item_shape_of(bundle, t) -> tuple:
    """The shape of one batch item of I/O tensor `t` (a batch-native bundle stores all the items)."""
    return (1,) + tuple(t.shape[1:]) if batch_native(bundle) else tuple(t.shape)


def layout(bundle, indices, items=1):
    """(specs, staging bytes): each tensor's `items` batch items stacked (item i at staging + i * item bytes)."""
    specs, off = [], 0
    for i in indices:
        t = bundle.tensors[i]
        specs.append(IOSpec(t.name, item_shape_of(bundle, t), np.dtype(t.dtype), t.quant, i, off))
        off += (item_bytes(bundle, t) * items + OFFSET_ALIGN - 1) // OFFSET_ALIGN * OFFSET_ALIGN
    return specs, off


def views(mapped, specs, items=1):
    """numpy views of mapped staging memory: one item of each tensor, or (items > 1) all of them
    stacked along axis 0."""
    if items == 1:
        return [np.frombuffer(mapped, s.dtype, int(np.prod(s.shape, dtype=np.int64)), s.staging).reshape(s.shape)
                for s in specs]
    return [np.frombuffer(mapped, s.dtype, items * int(np.prod(s.shape, dtype=np.int64)), s.staging)
            .reshape((items,) + s.shape[1:]) for s in specs]


def item_shape(spec, b, batched):
    return (b,) + spec.shape[1:] if batched else spec.shape


def has_device_tensors(inputs) -> bool:
    if isinstance(inputs, dict):
        inputs = inputs.values()
    elif not isinstance(inputs, (list, tuple)):
        inputs = [inputs]
    return any(isinstance(x, DeviceTensor) for x in inputs)


def ordered(specs, inputs) -> list:
    """Inputs as a list in model order (from a list, a dict name -> value, or one value)."""
    if isinstance(inputs, (np.ndarray, DeviceTensor)) or np.isscalar(inputs):
        inputs = [inputs]
    if isinstance(inputs, dict):
        names = [s.name for s in specs]
        unknown = [k for k in inputs if k not in names]
        if unknown:
            raise GpucError(f"unknown input name(s) {unknown}; the model's inputs are {names}")
        missing = [n for n in names if n not in inputs]
        if missing:
            raise GpucError(f"missing input(s) {missing}; the model's inputs are {names}")
        inputs = [inputs[n] for n in names]
    inputs = list(inputs)
    if len(inputs) != len(specs):
        raise GpucError(f"model takes {len(specs)} input(s) ({[s.name for s in specs]}), got {len(inputs)}")
    return inputs


def cast_all(specs, inputs) -> list:
    """Inputs in model order, each host value converted to its input's dtype where its values fit
    (runtime/casting.py; a run's cast=True); DeviceTensors as they are (never converted)."""
    return [v if isinstance(v, DeviceTensor) else casting.convert(i, s.name, v, s.dtype, cast=True)
            for i, (s, v) in enumerate(zip(specs, ordered(specs, inputs)))]


def _batch_size(specs, shapes, n) -> int:
    b = None
    for s, shape in zip(specs, shapes):
        if len(shape) == len(s.shape) and shape[1:] == s.shape[1:]:
            if not 1 <= shape[0] <= n:
                raise GpucError(f"input {s.name!r}: batch {shape[0]} is outside 1..{n} "
                                f"(the bundle was compiled with --max-batch {n})")
            if b is not None and shape[0] != b:
                raise GpucError(f"inputs disagree on the batch size ({b} and {shape[0]} at {s.name!r})")
            b = shape[0]
    return b or 1


def normalize(specs, inputs, max_batch: int = 1, device=None):
    """(values in model order: arrays of the input's dtype, or DeviceTensors of `device`; the batch
    size b).  With max_batch > 1 an input holds 1..max_batch items along axis 0.  A typed value of
    another dtype is refused; python lists and scalars convert where their values fit (runtime/casting.py)."""
    vals = ordered(specs, inputs)
    batched = max_batch > 1
    b = _batch_size(specs, [tuple(v.shape) if isinstance(v, DeviceTensor) else np.shape(v) for v in vals],
                    max_batch) if batched else 1
    out = []
    for i, (s, v) in enumerate(zip(specs, vals)):
        dt = isinstance(v, DeviceTensor)
        if not dt:
            v = casting.convert(i, s.name, v, s.dtype)
        want = item_shape(s, b, batched)
        if tuple(v.shape) != want:
            more = f" (batch 1..{max_batch} along axis 0)" if batched else ""
            raise GpucError(f"input {s.name!r}: expected shape {list(want)}{more}, got {list(v.shape)}")
        if dt:
            v.check_usable(device, s)
        out.append(v)
    return out, b
