"""Graph IR: tensors and nodes in topological order, static shapes and dtypes.

A `Graph` is what the frontend produces and what passes rewrite.  Tensors are addressed by
integer id (index into `Graph.tensors`); a node input of -1 means "optional input absent".
Constants carry their numpy array in `Tensor.data`.  Quantization parameters are carried for
every tensor that has them (scale/zero_point arrays plus the quantized axis).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass
class Quant:
    scale: np.ndarray           # float32, shape [n]
    zero_point: np.ndarray      # int64, shape [n]
    axis: int = 0               # quantized_dimension for per-channel (n > 1)

    @property
    def per_channel(self) -> bool:
        return self.scale.size > 1


@dataclass
class Tensor:
    id: int
    name: str
    shape: tuple[int, ...]
    dtype: str                  # numpy dtype name: float32, float16, int32, int8, uint8, int64, bool, ...
    data: np.ndarray | None = None      # constant value (already shaped and typed)
    quant: Quant | None = None
    is_variable: bool = False
    shape_signature: tuple[int, ...] | None = None   # -1 marks a dynamic dimension in the source model

    @property
    def is_const(self) -> bool:
        return self.data is not None

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) if self.shape else 1

    @property
    def nbytes(self) -> int:
        return self.size * np.dtype(self.dtype).itemsize


@dataclass
class Node:
    op: str                     # builtin op name ("CONV_2D") or "CUSTOM:<code>"
    inputs: list[int]
    outputs: list[int]
    attrs: dict[str, Any] = field(default_factory=dict)
    version: int = 1
    index: int = -1             # position of the operator in the source subgraph (for messages)

    def label(self) -> str:
        return f"{self.op} (operator #{self.index})" if self.index >= 0 else self.op


@dataclass
class Graph:
    name: str
    tensors: list[Tensor]
    nodes: list[Node]
    inputs: list[int]
    outputs: list[int]
    aliases: dict[int, int] = field(default_factory=dict)   # view tensor -> tensor whose memory it shares
    precision: str = "fp32"                                  # compile option: "fp32" or "fp16"
    fp32_pinned: set | None = None      # fp16 plan (passes/precision.py): tensors kept fp32; None: no fp16
    in_place: list = field(default_factory=list)   # (output, input) pairs that may share memory (passes/inplace.py)

    def storage(self, tid: int) -> int:
        """The tensor whose memory `tid` uses (follows view aliases)."""
        while tid in self.aliases:
            tid = self.aliases[tid]
        return tid

    def t(self, tid: int) -> Tensor:
        return self.tensors[tid]

    def add_tensor(self, name: str, shape, dtype: str, data: np.ndarray | None = None,
                   quant: Quant | None = None) -> int:
        tid = len(self.tensors)
        self.tensors.append(Tensor(tid, name, tuple(int(d) for d in shape), dtype, data, quant))
        return tid

    def add_const(self, name: str, array: np.ndarray) -> int:
        array = np.ascontiguousarray(array)
        return self.add_tensor(name, array.shape, array.dtype.name, array)

    def consumers(self) -> dict[int, list[Node]]:
        users: dict[int, list[Node]] = {}
        for n in self.nodes:
            for i in n.inputs:
                if i >= 0:
                    users.setdefault(i, []).append(n)
        return users

    def producers(self) -> dict[int, Node]:
        return {o: n for n in self.nodes for o in n.outputs}


@dataclass
class Model:
    """A whole TFLite model: subgraph 0 is the entry point (or the signature's subgraph)."""
    subgraphs: list[Graph]
    description: str = ""
    version: int = 3
    signatures: list[dict] = field(default_factory=list)   # {key, subgraph, inputs:{name:tid}, outputs:{name:tid}}

    @property
    def main(self) -> Graph:
        return self.subgraphs[0]
