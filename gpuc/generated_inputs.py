"""Generated `--input` tensors (no file needed), IREE's style and by name:

  1x224x224x3xf32=0      a tensor of that shape and dtype, every element 0 (any number; in model order)
  2x4xi32=random         ... random values (=zeros, =ones too)
  NAME=zeros             input NAME at the model's shape and dtype: zeros, ones or random
  NAME=1x8xf32=ones      input NAME from a spec
  zeros / ones / random  the next input in model order, at its shape and dtype

dtypes: f16 f32 f64 i8 i16 i32 i64 u8 u16 u32 u64 i1 (bool); random: floats standard normal, integers
uniform in [-128, 127] within the dtype's range, bools fair coins; seeded (0), so runs repeat.  A file
of the same name wins (an existing path is always read as a file).
"""
from __future__ import annotations

import re

import numpy as np

from gpuc.errors import GpucError

DTYPES = {"f16": "float16", "f32": "float32", "f64": "float64", "i8": "int8", "i16": "int16", "i32": "int32",
          "i64": "int64", "u8": "uint8", "u16": "uint16", "u32": "uint32", "u64": "uint64", "i1": "bool",
          "bool": "bool"}
FILLS = ("zeros", "ones", "random")
_SPEC = re.compile(r"((?:\d+x)*)(" + "|".join(DTYPES) + r")=(zeros|ones|random|[-+]?(?:\d+\.?\d*|\.\d+)(?:e[-+]?\d+)?)")
SEED = 0


class Generated:
    """A tensor to make: shape and dtype (None: the input's), and the fill."""

    def __init__(self, shape, dtype, fill, text):
        self.shape, self.dtype, self.fill, self.text = shape, dtype, fill, text

    def make(self, spec, rng) -> np.ndarray:
        """The array for model input `spec` (an IOSpec; None where the model's input is unknown)."""
        if self.shape is None and spec is None:
            raise GpucError(f"--input {self.text}: no model input there to take the shape and dtype of; give them "
                            "(e.g. 1x224x224x3xf32=zeros)")
        shape = self.shape if self.shape is not None else tuple(spec.shape)
        dtype = np.dtype(self.dtype if self.dtype is not None else spec.dtype)
        if self.fill == "zeros":
            return np.zeros(shape, dtype)
        if self.fill == "ones":
            return np.ones(shape, dtype)
        if self.fill == "random":
            if dtype.kind == "f":
                return rng.standard_normal(shape).astype(dtype)
            if dtype.kind == "b":
                return rng.integers(0, 2, shape).astype(bool)
            info = np.iinfo(dtype)
            return rng.integers(max(info.min, -128), min(info.max, 127) + 1, shape).astype(dtype)
        value = float(self.fill)
        if dtype.kind in "iu" and (value != int(value) or not np.iinfo(dtype).min <= value <= np.iinfo(dtype).max):
            raise GpucError(f"--input {self.text}: {self.fill} is not a {dtype} value")
        return np.full(shape, value, dtype)


def parse(arg: str) -> tuple[str | None, Generated] | None:
    """(input name or None, Generated) when `arg` asks for a generated tensor, else None."""
    text = str(arg)
    if text in FILLS:
        return None, Generated(None, None, text, text)
    m = _SPEC.fullmatch(text)
    if m:
        return None, _from_spec(m, text)
    name, sep, rest = text.partition("=")
    if not sep or not name:
        return None
    if rest in FILLS:
        return name, Generated(None, None, rest, text)
    m = _SPEC.fullmatch(rest)
    return (name, _from_spec(m, text)) if m else None


def _from_spec(m, text) -> Generated:
    shape = tuple(int(d) for d in m.group(1).split("x") if d)
    return Generated(shape, DTYPES[m.group(2)], m.group(3), text)


def resolve(arrays, specs):
    """The --input values with every Generated made for its model input (a list in model order or a
    dict by name, as io_files.read_inputs returns)."""
    rng = np.random.default_rng(SEED)
    if isinstance(arrays, dict):
        by_name = {s.name: s for s in specs}
        return {k: v.make(by_name.get(k), rng) if isinstance(v, Generated) else v for k, v in arrays.items()}
    return [v.make(specs[i] if i < len(specs) else None, rng) if isinstance(v, Generated) else v
            for i, v in enumerate(arrays)]
