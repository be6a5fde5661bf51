"""The op registry: the single source of truth for which ops (and attribute combinations) gpuc
supports.  `gpuc inspect`, the compiler's unsupported-op error and lowering all read it.

Each op module registers an `OpDef` with `@register(...)` on its lowering function.  A lowering
takes (node, graph) and returns a list of codegen Kernels; `check(node, graph)` returns None when
the node is supported, else a short reason.
"""
from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass
from typing import Callable

from gpuc.compiler.ir import Graph, Node
from gpuc.compiler.symbolic import SymbolicSize


ANY_COUNT = 1 << 20           # inputs/outputs of ops TFLite sets no count limit for (CONCATENATION, PACK ...)
LITERT_REJECTS = "LiteRT's kernel rejects"   # starts the reason for a dtype in OpDef.rejects (no CPU fallback)


@dataclass
class OpDef:
    name: str
    lower: Callable
    check: Callable | None = None
    dtypes: frozenset = frozenset({"float32"})   # dtypes of non-constant tensors this lowering handles
    max_version: int = 99
    summary: str = ""
    inputs: tuple = (1, 99)          # allowed number of inputs (min, max); ANY_COUNT: as many as TFLite allows
    outputs: tuple = (1, 1)          # allowed number of outputs
    optional: tuple = ()             # input positions that may be -1 (absent)
    rejects: frozenset = frozenset()  # dtypes LiteRT's builtin kernel refuses for this op: an error, not the CPU
    shapes: Callable | None = None   # (node, graph) -> output shapes the op sets itself (LiteRT's Prepare resizes them)


REGISTRY: dict[str, OpDef] = {}


def register(*names, check=None, dtypes=("float32",), max_version=99, summary="", inputs=(1, 99), outputs=(1, 1),
             optional=(), rejects=(), shapes=None):
    def deco(fn):
        for n in names:
            REGISTRY[n] = OpDef(n, fn, check, frozenset(dtypes), max_version, summary, tuple(inputs), tuple(outputs),
                                tuple(optional), frozenset(rejects), shapes)
        return fn
    return deco


def _arity_reason(node: Node, d: OpDef) -> str | None:
    ni, no = len(node.inputs), len(node.outputs)
    if not d.inputs[0] <= ni <= d.inputs[1]:
        return f"has {ni} inputs (expected {d.inputs[0]}..{d.inputs[1]})"
    if not d.outputs[0] <= no <= d.outputs[1]:
        return f"has {no} outputs (expected {d.outputs[0]}..{d.outputs[1]})"
    absent = [i for i, t in enumerate(node.inputs) if t < 0 and i not in d.optional]
    if absent or any(t < 0 for t in node.outputs):
        return f"required input {absent[0]} is absent" if absent else "an output is absent"
    return None


def unsupported_reason(node: Node, graph: Graph) -> str | None:
    """None if gpuc can run `node` on the GPU, else why not."""
    d = REGISTRY.get(node.op)
    if d is None:
        return "op not implemented"
    if node.version > d.max_version:
        return f"version {node.version} not supported (max {d.max_version})"
    bad = _arity_reason(node, d)
    if bad:
        return bad
    for tid in list(node.inputs) + list(node.outputs):
        if tid < 0:
            continue
        t = graph.t(tid)
        if not t.is_const and t.dtype in d.rejects:
            return f"{LITERT_REJECTS} {t.dtype} tensors ({t.name!r}; it takes {', '.join(sorted(d.dtypes))})"
        if not t.is_const and t.dtype not in d.dtypes:
            return f"tensor {t.name!r} has dtype {t.dtype} (supported: {', '.join(sorted(d.dtypes))})"
        if t.quant is not None and t.dtype in ("int8", "uint8", "int16") and not t.is_const \
                and not (node.op in ("QUANTIZE", "DEQUANTIZE") and t.dtype in ("int8", "uint8")):
            return f"quantized tensor {t.name!r} ({t.dtype}) not supported yet"
    if d.check is None:
        return None
    try:
        return d.check(node, graph)
    except (ValueError, IndexError, KeyError, TypeError, ZeroDivisionError) as e:
        return f"malformed operator ({type(e).__name__}: {e})"
    except SymbolicSize as e:          # (--dynamic: the op needs a fixed size; prepare refuses it, naming it)
        return str(e)


def set_output_shapes(graph: Graph) -> None:
    """Give the outputs of ops with an OpDef.shapes rule the shapes the op sets when it runs (the model
    may leave them unknown, e.g. TFLite_Detection_PostProcess's); a rule that fails leaves them (the
    op's check then says why)."""
    for n in graph.nodes:
        d = REGISTRY.get(n.op)
        if d is None or d.shapes is None or len(n.outputs) < d.outputs[0]:
            continue
        try:
            shapes = d.shapes(n, graph)
        except (ValueError, IndexError, KeyError, TypeError):
            continue
        for o, s in zip(n.outputs, shapes):
            if o >= 0:
                graph.t(o).shape = tuple(int(x) for x in s)


def lower(node: Node, graph: Graph):
    return REGISTRY[node.op].lower(node, graph)


def _load_all():
    """Import every module of this package: each registers its ops (and shader VARIANTS)."""
    for m in pkgutil.iter_modules(__path__):
        if m.name != "util":
            importlib.import_module(f"{__name__}.{m.name}")


_load_all()
