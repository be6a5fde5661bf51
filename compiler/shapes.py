"""Shape specialization at compile time (issue 16, build 1).

A -1 in an input's `shape_signature` takes the concrete `shape` the model gives, or the shape named
by `input_shapes` (`gpuc compile --input-shape NAME=1x144000`).  When an input's shape changes, the
output shapes of the main graph are recomputed op by op, as LiteRT does after `resize_tensor_input`
(`propagate`); an op whose output shape cannot be inferred here fails with a message naming it.
A model with a -1 in an input's signature is propagated at its own shape too: downstream of the -1
TensorFlow's converter writes placeholder shapes (e.g. [1, 1]) that LiteRT recomputes at allocation
(there an op without a shape rule keeps the file's shapes).
Afterwards every shape of the main graph is static, so SHAPE and the arithmetic on it fold
(passes/fold.py evaluates the same `evaluate` rules on constants).

`evaluate(node, values, graph)` runs one op on numpy values: for each input either its constant
value or, for a runtime tensor, a zero-stride placeholder of its shape (`placeholder`).  It returns
the output arrays, or None when there is no rule for the op.  A result is a true value only when
every input was a constant and the op is in EXACT (see `exact`).
"""
from __future__ import annotations

import numpy as np

from gpuc.compiler.ir import Graph, Node
from gpuc.compiler.ops import ALWAYS, FROM_SHAPES, INTEGER, fact
from gpuc.compiler.ops.rules import placeholder
from gpuc.compiler.sym_shapes import rule
from gpuc.errors import GpucError, UnsupportedError

MAX_DIMS = 8


class ShapeConflict(GpucError):
    """An op's operands cannot take the propagated shapes (e.g. a RESHAPE's constant target)."""


# --- the option ----------------------------------------------------------------------------------

def parse_input_shape(text: str) -> tuple[str, tuple[int, ...]]:
    """'NAME=1x144000' -> (NAME, (1, 144000)); NAME may contain ':' and '=' (the last '=' splits)."""
    name, sep, dims = str(text).rpartition("=")
    if not sep or not name:
        raise GpucError(f"--input-shape {text!r}: expected NAME=DIMS, e.g. input=1x144000")
    return name, check_shape(name, dims.split("x") if dims else [])


def check_shape(name: str, dims) -> tuple[int, ...]:
    try:
        out = tuple(int(d) for d in dims)
    except (TypeError, ValueError):
        raise GpucError(f"input shape of {name!r}: {dims!r} is not a list of integers") from None
    if not out or len(out) > MAX_DIMS or any(d < 1 or d > 1 << 31 for d in out):
        raise GpucError(f"input shape of {name!r}: {list(out)} must have 1..{MAX_DIMS} dimensions, each >= 1")
    return out


def normalize_input_shapes(value) -> dict:
    """The option's value (a dict name -> shape, or NAME=DIMS strings) as {name: [dims]}, sorted."""
    if not value:
        return {}
    if isinstance(value, dict):
        items = [(str(k), check_shape(str(k), v if not isinstance(v, str) else v.split("x")))
                 for k, v in value.items()]
    else:
        items = [parse_input_shape(v) for v in ([value] if isinstance(value, str) else value)]
    out = {}
    for k, v in items:
        if k in out and tuple(out[k]) != v:
            raise GpucError(f"input shape of {k!r} given twice ({list(out[k])} and {list(v)})")
        out[k] = list(v)
    return dict(sorted(out.items()))


# --- bounded dynamic dims (--dynamic NAME:AXIS<=MAX) ---------------------------------------------------

def parse_dynamic(text: str) -> tuple[str, int, int]:
    """'NAME:AXIS<=MAX' -> (NAME, AXIS, MAX); NAME may contain ':' (the last ':' splits off the axis)."""
    spec, sep, mx = str(text).rpartition("<=")
    name, colon, axis = spec.rpartition(":")
    try:
        axis_i, max_i = int(axis), int(mx)
    except ValueError:
        axis_i = max_i = None
    if not sep or not colon or not name or axis_i is None or max_i is None:
        raise GpucError(f"--dynamic {text!r}: expected NAME:AXIS<=MAX, e.g. serving_default_x:0<=8 "
                        "(the last ':' separates the axis)")
    if not 1 <= max_i <= 4096:
        raise GpucError(f"--dynamic {text!r}: the bound {max_i} must be in 1..4096")
    return name, axis_i, max_i


def normalize_dynamic(value) -> list:
    """The option's value (NAME:AXIS<=MAX strings) checked and sorted."""
    items = [value] if isinstance(value, str) else list(value or [])
    out = {}
    for v in items:
        name, axis, mx = parse_dynamic(v)
        if (name, axis) in out and out[(name, axis)] != mx:
            raise GpucError(f"--dynamic {name}:{axis} given twice, with bounds {out[(name, axis)]} and {mx}")
        out[(name, axis)] = mx
    return [f"{n}:{a}<={m}" for (n, a), m in sorted(out.items())]


def dynamic_items(graph: Graph, specs) -> int:
    """The item count a --dynamic request makes the program batch-native for (1: none).  The batch axis
    (axis 0 of every input, each of size 1 in the model) is the dimension gpuc bounds today: each
    dispatch then covers 1..MAX items (compiler/passes/batching.py); any other axis is refused here."""
    if not specs:
        return 1
    by_name = {graph.t(i).name: i for i in graph.inputs}
    bounds = {}
    for text in specs:
        name, axis, mx = parse_dynamic(text)
        if name not in by_name:
            raise GpucError(f"--dynamic names {name!r}, not an input of the model (inputs: "
                            f"{', '.join(map(repr, by_name))})")
        t = graph.t(by_name[name])
        rank = len(t.shape)
        if not -rank <= axis < rank:
            raise GpucError(f"--dynamic {text}: axis {axis} is out of range for input {name!r} of shape {list(t.shape)}")
        if axis % rank != 0:
            why = blocker(graph, by_name[name], axis % rank, mx)
            if why:
                raise UnsupportedError(f"--dynamic {text}: the size of axis {axis % rank} of {name!r} cannot change: "
                                       f"{why}")
            raise UnsupportedError(f"--dynamic {text}: only the batch axis (0) of an input can be dynamic so far; "
                                   f"axis {axis % rank} of {name!r} (shape {list(t.shape)}) would need sizes at run "
                                   "time in every kernel, which gpuc does not do yet (use --input-shape to compile "
                                   "for one size)")
        if t.shape[0] != 1:
            raise UnsupportedError(f"--dynamic {text}: input {name!r} has shape {list(t.shape)}; a dynamic batch "
                                   "axis needs size 1 in the model")
        bounds[name] = mx
    if set(bounds) != set(by_name) or len(set(bounds.values())) != 1:
        raise UnsupportedError("--dynamic on the batch axis: every input must be named, with the same bound "
                               f"(got {', '.join(f'{k}<={v}' for k, v in bounds.items())}; inputs: "
                               f"{', '.join(map(repr, by_name))})")
    return next(iter(bounds.values()))


def blocker(graph: Graph, tid: int, axis: int, bound: int) -> str | None:
    """Why the graph cannot take another size on that axis (the op that fixes it, as propagating the
    shapes of a copy at other sizes reports it), or None."""
    import copy
    here = graph.t(tid).shape[axis]
    for n in dict.fromkeys(v for v in (bound, 1, bound - 1) if v >= 1 and v != here):
        g = copy.deepcopy(graph)
        shape = list(g.t(tid).shape)
        shape[axis] = n
        g.t(tid).shape = tuple(shape)
        try:
            propagate(g)
        except ShapeConflict as e:
            return f"at size {n}, {e}"
        except GpucError:            # an op without a shape rule here: nothing known against the size
            return None
    return None


# --- specialization ------------------------------------------------------------------------------

def specialize(graph: Graph, input_shapes: dict | None = None) -> None:
    """Give the main graph's inputs their shapes (input_shapes, else the model's), recompute the
    shapes downstream when one changed, and make every shape of the graph static."""
    input_shapes = input_shapes or {}
    by_name = {graph.t(i).name: i for i in graph.inputs}
    unknown = sorted(set(input_shapes) - set(by_name))
    if unknown:
        raise GpucError(f"--input-shape names {', '.join(map(repr, unknown))}, not an input of the model "
                        f"(inputs: {', '.join(map(repr, by_name))})")
    changed = False
    for name, shape in input_shapes.items():
        t = graph.t(by_name[name])
        shape = tuple(int(d) for d in shape)
        sig = t.shape_signature or t.shape
        if len(shape) != len(sig):
            raise GpucError(f"--input-shape {name}: {list(shape)} has rank {len(shape)}, the input has rank "
                            f"{len(sig)} (signature {list(sig)})")
        fixed = [d for d, (want, s) in enumerate(zip(shape, sig)) if s >= 0 and want != s]
        if fixed:
            raise GpucError(f"--input-shape {name}: {list(shape)} changes dimension {fixed[0]}, which the model "
                            f"fixes (signature {list(sig)}; only -1 dimensions may change)")
        changed |= shape != t.shape
        t.shape = shape
    _empty_constants(graph)
    declared = any(d < 0 for i in graph.inputs for d in graph.t(i).shape_signature or ())
    if changed or declared:
        # (at the file's own shape too: downstream of a -1 the converter writes placeholder shapes,
        # e.g. [1, 1], and computes the real ones at run time, as LiteRT does after allocation)
        propagate(graph, strict=changed)
    for t in graph.tensors:
        t.shape_signature = None


def _empty_constants(graph: Graph) -> None:
    """Tensors of no elements that no node writes and that are not inputs (the converter's empty
    shape constants, e.g. a RESHAPE's [] target, stored without a buffer) become empty constants."""
    written = {o for n in graph.nodes for o in n.outputs} | set(graph.inputs)
    for t in graph.tensors:
        if t.data is None and not t.is_variable and t.id not in written and t.shape and 0 in t.shape \
                and _np_dtype(t.dtype) != np.dtype(object):
            t.data = np.zeros(t.shape, t.dtype)


def _np_dtype(dtype) -> np.dtype:
    try:
        return np.dtype(dtype)
    except TypeError:
        return np.dtype(object)


def propagate(graph: Graph, strict: bool = True) -> None:
    """Recompute every node's output shapes from its inputs' (in topological order).  strict=False
    (the model's own input shapes): an op gpuc has no shape rule for keeps the output shapes the file
    gives (and the ops after it follow those)."""
    known: dict[int, np.ndarray] = {t.id: t.data for t in graph.tensors if t.is_const and not t.is_variable}
    changed = set(graph.inputs)
    for node in graph.nodes:
        ins = [None if i < 0 else graph.t(i) for i in node.inputs]
        vals = [None if t is None else known.get(t.id, placeholder(t.shape, t.dtype)) for t in ins]
        touched = any(i in changed for i in node.inputs if i >= 0)
        consts = all(i < 0 or i in known for i in node.inputs)
        if not touched:
            if consts and exact(node, ins):            # (a constant chain a changed op may read)
                try:
                    outs = evaluate(node, vals, graph, need_values=[True] * len(vals))
                except (ValueError, IndexError, TypeError, KeyError):
                    outs = None
                for o, v in zip(node.outputs, outs or ()):
                    if o >= 0 and tuple(v.shape) == graph.t(o).shape:
                        known[o] = np.asarray(v).astype(graph.t(o).dtype)
            continue
        try:
            outs = evaluate(node, vals, graph, need_values=[i in known for i in node.inputs])
            if outs is None:
                outs = _shape_rule(node, graph)
        except (ValueError, IndexError, TypeError, KeyError) as e:
            if strict:
                raise ShapeConflict(f"{node.label()}: cannot compute its output shape for the given input shapes "
                                    f"({e})") from None
            shapes = ", ".join(f"{graph.t(i).name!r} {list(graph.t(i).shape)}" for i in graph.inputs)
            raise ShapeConflict(f"{node.label()}: cannot compute its output shape for the model's own input shapes "
                                f"({shapes}): {e}; give others with --input-shape") from None
        if outs is None and not strict:
            changed.update(o for o in node.outputs if o >= 0)
            continue
        if outs is None:
            raise GpucError(f"{node.label()}: gpuc cannot infer this op's output shape when an input shape "
                            f"changes (--input-shape); its input {ins[0].name if ins else '?'!r} now has shape "
                            f"{list(ins[0].shape) if ins else []}")
        exact_values = exact(node, ins) and (consts or from_shapes(node))    # (a shape is known)
        for o, v in zip(node.outputs, outs):
            if o < 0:
                continue
            t = graph.t(o)
            if tuple(v.shape) != tuple(t.shape):
                t.shape = tuple(int(d) for d in v.shape)
            changed.add(o)
            if exact_values:
                known[o] = np.asarray(v).astype(t.dtype)


def _shape_rule(node: Node, graph: Graph):
    """Placeholders of the output shapes compiler/sym_shapes.py's symbolic rules give (the ops `evaluate` has
    no rule for: convolutions, pools, matmuls, the LSTM, ...), or None."""
    try:
        shapes = rule(node, graph)
    except UnsupportedError:
        return None
    return [placeholder([int(d) for d in shape], graph.t(o).dtype) for o, shape in zip(node.outputs, shapes)
            if o >= 0]


# --- the rules: each op's `shape` and `exact` facts (compiler/ops/, shared families in ops/rules.py) ----

def exact(node: Node, ins) -> bool:
    """Whether `evaluate` gives LiteRT's exact values for `node` on constant inputs (the op's `exact`
    fact): data movement of unquantized tensors, and integer / bool arithmetic without a fused activation."""
    if any(t is not None and t.quant is not None for t in ins):
        return False
    how = fact(node.op, "exact")
    if how in (ALWAYS, FROM_SHAPES):
        return True
    if how == INTEGER:
        return all(t is None or t.dtype.startswith(("int", "uint", "bool")) for t in ins) \
            and not node.attrs.get("fused_activation_function")
    return False


def from_shapes(node: Node) -> bool:
    """The node's output values follow from its inputs' shapes alone (SHAPE)."""
    return fact(node.op, "exact") == FROM_SHAPES


def evaluate(node: Node, vals: list, graph: Graph, need_values=None):
    """The op on numpy values (constants, or placeholders of runtime tensors): its outputs, or None
    without a rule (the op's `shape` fact).  Raises ValueError (and friends) where the op is malformed
    for these inputs."""
    shape_rule = fact(node.op, "shape")
    return shape_rule(node, vals, graph, need_values) if callable(shape_rule) else None
