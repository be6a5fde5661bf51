"""Constant folding: nodes whose value is known at compile time are evaluated with numpy.

DEQUANTIZE of constants (fp16 weights, int8/uint8 per-tensor or per-channel) becomes float32
weights once, at compile time; RESHAPE/SQUEEZE/EXPAND_DIMS/TRANSPOSE/CAST of constants fold; SHAPE
folds whenever the shape is static; FILL/ZEROS_LIKE/RANGE/SELECT/SELECT_V2 of constants fold, float32
ADD/SUB/MUL and comparisons of constants fold (one IEEE operation per element, as LiteRT), and so does
DENSIFY (the importer already expanded the sparse constant it reads).  Folded nodes disappear; their
outputs become constants.
"""
from __future__ import annotations

import numpy as np

from gpuc.compiler.ir import Graph, Node
from gpuc.compiler.ops.compare import litert_cast
from gpuc.compiler.ops.fill import fill_value
from gpuc.compiler.ops.rules import placeholder
from gpuc.compiler.shapes import evaluate, from_shapes


FOLDABLE = ("DEQUANTIZE", "RESHAPE", "SQUEEZE", "EXPAND_DIMS", "TRANSPOSE", "CAST", "SHAPE", "FILL", "ZEROS_LIKE",
            "RANGE", "DENSIFY")


def litert_range(start, limit, delta, dtype: str) -> np.ndarray:
    """RANGE as LiteRT computes it: size from (limit - start) / delta, values by repeated addition."""
    dt = np.dtype(dtype)
    start, limit, delta = (dt.type(np.asarray(v).reshape(-1)[0]) for v in (start, limit, delta))
    if delta == 0 or not ((start >= limit and delta < 0) or (start <= limit and delta > 0)):
        raise ValueError(f"RANGE: start {start}, limit {limit}, delta {delta} is empty or infinite")
    if dt.kind in "iu":
        n = (abs(int(limit) - int(start)) + abs(int(delta)) - 1) // abs(int(delta))
    else:
        n = int(np.ceil(abs((limit - start) / delta)))
    out, v = np.empty(n, dt), start
    for i in range(n):
        out[i] = v
        v = dt.type(v + delta)
    return out


def dequantize(t) -> np.ndarray:
    data = t.data
    if data.dtype == np.float16:
        return data.astype(np.float32)
    if t.quant is None:
        raise ValueError(f"DEQUANTIZE input {t.name!r} has no quantization parameters")
    shape = [1] * data.ndim
    scale, zp = t.quant.scale.astype(np.float64), t.quant.zero_point.astype(np.float64)
    if scale.size > 1:
        shape[t.quant.axis] = scale.size
    return ((data.astype(np.float64) - zp.reshape(shape)) * scale.reshape(shape)).astype(np.float32)


def const_value(graph: Graph, node: Node):
    """The folded output value, or None when the node cannot be folded."""
    ins = [graph.t(i) if i >= 0 else None for i in node.inputs]
    if not ins or ins[0] is None or len(node.outputs) != 1 or node.outputs[0] < 0:
        return None
    out = graph.t(node.outputs[0])
    if node.op == "SHAPE":
        if ins[0].shape_signature is not None and any(d < 0 for d in ins[0].shape_signature):
            return None
        return np.asarray(ins[0].shape, dtype=out.dtype)
    if from_shapes(node):          # (RANK) values that follow from the input shapes alone
        outs = evaluate(node, [None if t is None else placeholder(t.shape, t.dtype) for t in ins], graph,
                        need_values=[False] * len(ins))
        return np.ascontiguousarray(outs[0]) if outs else None
    if any(t is not None and (not t.is_const or t.is_variable) for t in ins):
        return None                                   # variables (e.g. LSTM state) are runtime values
    x = ins[0].data
    if node.op == "DEQUANTIZE":
        return dequantize(ins[0])
    if node.op in ("RESHAPE", "SQUEEZE", "EXPAND_DIMS"):
        return np.ascontiguousarray(x).reshape(out.shape)
    if node.op == "TRANSPOSE":
        return np.ascontiguousarray(np.transpose(x, [int(p) for p in ins[1].data.reshape(-1)]))
    if node.op == "CAST":
        return litert_cast(x, out.dtype)
    if node.op in ("FILL", "ZEROS_LIKE"):
        return fill_value(node, graph)
    if node.op == "RANGE" and len(ins) == 3 and out.size <= 1 << 24:
        return litert_range(x, ins[1].data, ins[2].data, out.dtype)
    if node.op == "DENSIFY":
        return np.ascontiguousarray(x)
    if node.op in ("SELECT", "SELECT_V2") and len(ins) == 3 and out.size <= MAX_FOLDED:
        return _select(x, ins[1].data, ins[2].data, out, node.op)
    if node.op in FLOAT_EXACT and len(ins) == 2 and x.dtype == np.float32 and out.size <= MAX_FOLDED:
        return _float_exact(node, x, ins[1].data, out)
    return _shape_value(graph, node, ins)


MAX_FOLDED = 1 << 22            # elements: shape arithmetic and index tensors, not whole activations

# float32 ops of constants whose result is one IEEE operation per element, which numpy rounds as
# LiteRT does (masks that converters build from constants: SUB of window ids, then EQUAL / NOT_EQUAL)
FLOAT_EXACT = {"ADD": np.add, "SUB": np.subtract, "MUL": np.multiply, "EQUAL": np.equal, "NOT_EQUAL": np.not_equal,
               "LESS": np.less, "LESS_EQUAL": np.less_equal, "GREATER": np.greater, "GREATER_EQUAL": np.greater_equal}


def _float_exact(node, a, b, out):
    """FLOAT_EXACT of float32 constants (None where subnormals appear: LiteRT may flush them)."""
    if a.dtype != np.float32 or b.dtype != np.float32 or node.attrs.get("fused_activation_function"):
        return None
    with np.errstate(all="ignore"):
        v = FLOAT_EXACT[node.op](a, b)
    tiny = np.finfo(np.float32).tiny
    if any(np.any((x != 0) & (np.abs(x) < tiny)) for x in (a, b, v) if x.dtype == np.float32):
        return None
    return np.ascontiguousarray(v) if tuple(v.shape) == tuple(out.shape) and v.dtype.name == out.dtype else None


def _select(c, a, b, out, op):
    """SELECT / SELECT_V2 of constants (a constant mask built from constants, as converters write
    attention masks): elements picked, never computed, so the values stay bit-exact."""
    c = np.asarray(c).astype(bool)
    if op == "SELECT" and c.ndim == 1 and np.ndim(a) > 1:
        c = c.reshape((-1,) + (1,) * (np.ndim(a) - 1))            # SELECT v1: a 1-D mask picks rows
    v = np.where(c, a, b)
    return np.ascontiguousarray(v) if tuple(v.shape) == tuple(out.shape) and v.dtype.name == out.dtype else None


def _shape_value(graph: Graph, node: Node, ins):
    """Ops compiler/shapes.py evaluates exactly (data movement, integer arithmetic) on constants."""
    from gpuc.compiler.shapes import evaluate, exact
    if not exact(node, ins):
        return None
    outs = evaluate(node, [None if t is None else t.data for t in ins], graph, need_values=[True] * len(ins))
    if outs is None or len(outs) != 1 or outs[0].size > MAX_FOLDED:
        return None
    return np.ascontiguousarray(outs[0])


def foldable(graph: Graph, node: Node) -> bool:
    try:
        return const_value(graph, node) is not None
    except (ValueError, IndexError, TypeError):
        return False


def _split_values(graph: Graph, node: Node):
    """The outputs of a multi-output op of constants compiler/shapes.py evaluates exactly (SPLIT,
    SPLIT_V, UNPACK of a shape vector), or None."""
    from gpuc.compiler.shapes import evaluate, exact
    ins = [graph.t(i) if i >= 0 else None for i in node.inputs]
    if any(t is not None and (not t.is_const or t.is_variable) for t in ins) or not exact(node, ins):
        return None
    outs = evaluate(node, [None if t is None else t.data for t in ins], graph, need_values=[True] * len(ins))
    if outs is None or len(outs) != len(node.outputs):
        return None
    for o, v in zip(node.outputs, outs):
        t = graph.t(o) if o >= 0 else None
        if t is not None and (tuple(v.shape) != tuple(t.shape) or v.size > MAX_FOLDED):
            return None
    return [np.ascontiguousarray(np.asarray(v).astype(graph.t(o).dtype)) if o >= 0 else None
            for o, v in zip(node.outputs, outs)]


def fold_constants(graph: Graph) -> None:
    for node in list(graph.nodes):
        if len(node.outputs) > 1:
            try:
                vs = _split_values(graph, node)
            except (ValueError, IndexError, TypeError):
                vs = None
            if vs is not None:
                for o, v in zip(node.outputs, vs):
                    if o >= 0:
                        graph.t(o).data = v
                graph.nodes.remove(node)
            continue
        try:
            v = const_value(graph, node)
        except (ValueError, IndexError, TypeError):
            v = None
        if v is None:
            continue
        out = graph.t(node.outputs[0])
        if tuple(v.shape) != tuple(out.shape) or v.dtype.name != out.dtype:
            if v.size != out.size:
                continue
            v = v.reshape(out.shape).astype(out.dtype)
        out.data = v
        out.quant = out.quant if node.op != "DEQUANTIZE" else None
        graph.nodes.remove(node)
