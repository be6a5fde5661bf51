"""Graph IR: tensors and nodes in topological order, static shapes and dtypes.

A `Graph` is what the frontend produces and what passes rewrite.  Tensors are addressed by
integer id (index into `Graph.tensors`); a node input of -1 means "optional input absent".
Constants carry their numpy array in `Tensor.data`.  Quantization parameters are carried for
every tensor that has them (scale/zero_point arrays plus the quantized axis).

Everything a pass records is a declared field: `Tensor.fake_quant` / `Tensor.initial`,
`Node.epilogue` (what fusion folded into the node), `Graph.var_keys` / `Graph.memo`,
`Model.variables`.  Lowering turns nodes into a program: `Kernel`s (codegen/kernel.py), `HostOp`s,
`Label`s and `Jump`s, told apart by their `kind`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from gpuc.compiler.symbolic import hint, is_sym, prod
from gpuc.errors import UnsupportedError


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
    # simulated quantization (passes/quant.py): the grid every write rounds to, (scale, zero_point, qmin, qmax)
    fake_quant: tuple | None = None
    initial: np.ndarray | None = None   # a variable's value at load and reset (passes/variables.py)
    dequantized: str | None = None      # a constant's stored dtype before passes/quant.py dequantized it

    @property
    def is_const(self) -> bool:
        return self.data is not None

    @property
    def size(self) -> int:
        """Element count (a compiler/symbolic.py expression where the shape holds a dynamic dim)."""
        if any(not isinstance(d, (int, np.integer)) for d in self.shape):
            return prod(self.shape)
        return int(np.prod(self.shape, dtype=np.int64)) if self.shape else 1

    @property
    def nbytes(self) -> int:
        """Bytes at the largest size (a dynamic dim at its bound: what the arena holds).  A dtype numpy has no
        type for (bfloat16, string, int4, ...) that reaches a kernel's memory is refused, naming the tensor."""
        try:
            item = np.dtype(self.dtype).itemsize
        except TypeError:
            raise UnsupportedError(f"tensor {self.name!r} has dtype {self.dtype}, which no GPU kernel reads "
                                   "or writes") from None
        return hint(self.size) * item


@dataclass
class Epilogue:
    """What passes fold into a node beyond its own attributes.  Templates with an epilogue (gemm,
    depthwise, transpose_conv: ops/util.epilogue) compute v = act(acc + bias); v = act2(v + residual);
    gemm and batch_matmul then the elementwise `chain` (passes/gemm_epilogue.py, ops/epi_chain.py)."""
    act: int | None = None      # gpuc activation code replacing the node's own fused activation (fusion passes)
    residual: int | None = None     # tensor added after `act` (a fused ADD, passes/fusion.py)
    act2: int = 0               # activation after the residual add
    pad: tuple[int, int, int, int] | None = None   # (top, bottom, left, right) of a PAD folded in (fold_pad*)
    pad_value: float = 0.0      # that PAD's value (pools)
    fq_mid: tuple | None = None     # passes/quant.py: the node's own output grid, recorded before fusion
    fq_rs: int | None = None        # passes/quant.py: rounding mode of LiteRT's requantization (gemm kernels)
    # passes/gemm_epilogue.py: elementwise steps applied to v last (ops/ew_fused.py's step format; operand
    # ("x", 0) is v, ("x", k) is chain_inputs[k - 1]), each input with the shape it broadcasts to
    chain: list | None = None
    chain_inputs: list = field(default_factory=list)    # [(tensor, broadcast shape)]
    chain_r16: bool = False     # round v to float16 first (the unfused program stored it so: --precision fp16)

    def reads(self) -> list[int]:
        """Tensors the epilogue reads beyond the node's inputs."""
        return ([] if self.residual is None else [self.residual]) + [t for t, _ in self.chain_inputs]


@dataclass
class Node:
    op: str                     # builtin op name (e.g. CONV_2D) or "CUSTOM:<code>"
    inputs: list[int]
    outputs: list[int]
    attrs: dict[str, Any] = field(default_factory=dict)     # the operator's options, as the model gives them
    version: int = 1
    index: int = -1             # position of the operator in the source subgraph (for messages)
    epilogue: Epilogue = field(default_factory=Epilogue)

    def label(self) -> str:
        return f"{self.op} (operator #{self.index})" if self.index >= 0 else self.op


@dataclass
class LoweringMemo:
    """Tensors lowerings derive from others, made once per graph and shared by every op asking."""
    word_views: dict[int, int] = field(default_factory=dict)     # tensor -> its uint32 words (ops/math.words)
    relayout: dict[tuple, int] = field(default_factory=dict)     # (constant, kind) -> re-laid-out copy (ops/gemm_dispatch)


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
    var_keys: dict[int, tuple] = field(default_factory=dict)  # a WHILE / IF subgraph's variable tensor -> its key
    memo: LoweringMemo = field(default_factory=LoweringMemo)
    items: int = 1              # --max-batch N: items each dispatch computes (passes/batching.py; 1: one)
    batch_refusal: str | None = None    # why the graph could not be made batch-native (items then 1)
    unbatched: set = field(default_factory=set)     # batch-native: runtime tensors the items share (from constants)
    dynamic_dims: list = field(default_factory=list)    # --dynamic off the batch axis: (input name, axis) of d0, d1..
    checks: list = field(default_factory=list)     # run-time checks lowerings declared (compiler/status.py)
    status: int | None = None                       # their status tensor (compiler/status.py)

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
        self.tensors.append(Tensor(tid, name, tuple(d if is_sym(d) else int(d) for d in shape), dtype, data, quant))
        return tid

    def add_fp32_scratch(self, name: str, shape) -> int:
        """A float32 working tensor a lowering adds (partial sums): kept float32 under the fp16 plan, where a
        partial sum may pass float16's range or lose the bits the final result needs."""
        tid = self.add_tensor(name, shape, "float32")
        if self.fp32_pinned is not None:
            self.fp32_pinned = set(self.fp32_pinned) | {tid}
        return tid

    def add_const(self, name: str, array: np.ndarray) -> int:
        array = np.ascontiguousarray(array)
        return self.add_tensor(name, array.shape, array.dtype.name, array)

    def consumers(self) -> dict[int, list[Node]]:
        users: dict[int, list[Node]] = {}
        for n in self.nodes:
            for i in list(n.inputs) + n.epilogue.reads():     # (a node reading a tensor twice: listed twice)
                if i >= 0:
                    users.setdefault(i, []).append(n)
        return users

    def producers(self) -> dict[int, Node]:
        return {o: n for n in self.nodes for o in n.outputs}

    def reshape_node(self, src: int, dst: int, shape) -> Node:
        """A RESHAPE node from `src` to `dst` with target `shape` (its shape operand a new constant)."""
        shape = [d if is_sym(d) else int(d) for d in shape]
        c = self.add_const(f"{self.t(dst).name}/shape", np.asarray(hint(shape), np.int32))
        return Node("RESHAPE", [src, c], [dst], {"new_shape": shape})

    def remove_unread(self, nodes) -> None:
        """Remove those of `nodes` whose outputs nothing reads any more (no node, epilogue, graph output
        or variable), repeatedly, so a chain left unread goes whole."""
        keep_out = set(self.outputs) | {t.id for t in self.tensors if t.is_variable}
        todo = list(nodes)
        while todo:
            users = self.consumers()
            dead = [nd for nd in todo if any(nd is x for x in self.nodes)
                    and not any(o in keep_out or users.get(o) for o in nd.outputs)]
            if not dead:
                return
            self.nodes = [nd for nd in self.nodes if all(nd is not x for x in dead)]
            todo = [nd for nd in todo if all(nd is not x for x in dead)]


@dataclass
class VariableState:
    """A model's resource variables (passes/variables.py), shared by its main graph and subgraphs."""
    init: dict = field(default_factory=dict)    # key -> (value, quant) that CALL_ONCE assigned
    main: dict = field(default_factory=dict)    # key -> the main graph's variable tensor
    done: set = field(default_factory=set)      # init subgraphs already run


@dataclass
class Model:
    """A whole TFLite model: subgraph 0 is the entry point (or the signature's subgraph)."""
    subgraphs: list[Graph]
    description: str = ""
    version: int = 3
    signatures: list[dict] = field(default_factory=list)   # {key, subgraph, inputs:{name:tid}, outputs:{name:tid}}
    variables: VariableState = field(default_factory=VariableState)
    main_index: int = 0         # the graph compiled: subgraph 0, or a signature's (compiler/signatures.py)

    @property
    def main(self) -> Graph:
        return self.subgraphs[self.main_index]


# --- the lowered program -------------------------------------------------------------------------
# Lowering (compiler/prepare.py) turns nodes into program items, each with a `kind`: GPU (a
# codegen Kernel: one dispatch), HOST (a CPU node, runtime/cpu_ops.py), LABEL and JUMP (WHILE / IF,
# compiler/control_flow.py).  Every item has `bindings` [(name, tensor)] for memory planning.
GPU, HOST, LABEL, JUMP = "gpu", "host", "label", "jump"


@dataclass
class HostOp:
    """A CPU node in the lowered program, between GPU kernels (partition.host_op)."""
    op: str
    inputs: list
    outputs: list
    attrs: str                  # JSON, as the bundle stores it
    label: str
    bindings: list = field(default_factory=list)     # [(name, tid)] for memory planning, like a Kernel
    kind: ClassVar[str] = HOST


@dataclass(eq=False)
class Label:
    """A jump target."""
    bindings: list = field(default_factory=list)
    kind: ClassVar[str] = LABEL


@dataclass(eq=False)
class Jump:
    """Continue at `target`; with `cond`, only when that tensor's first element is false."""
    target: Label
    cond: int | None = None
    kind: ClassVar[str] = JUMP

    @property
    def bindings(self):
        return [] if self.cond is None else [("cond", self.cond)]

    @property
    def label(self) -> str:
        return "Jump" if self.cond is None else "JumpIfFalse"
