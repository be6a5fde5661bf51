"""Bounded dynamic dims off the batch axis (`--dynamic NAME:AXIS<=MAX`, issue 16 build 2).

`setup` gives each dynamic (input, axis) a dim variable of compiler/symbolic.py with its bound as the
hint, checks the graph at other concrete sizes (shapes._blocker: a RESHAPE with a constant target is named
there), and recomputes every shape of the main graph
symbolically (`propagate_symbolic`): shapes that depend on a dynamic size hold Sym expressions.  An op
reached by a dynamic shape that has no symbolic rule here, or whose rule cannot hold for every size
(a broadcast of the dynamic dim against a fixed one, a SQUEEZE that could drop it, ...), is refused
with a message naming the op and the dynamic tensor.  The passes and lowerings then compute with the
expressions (compiler/prepare.py), and the bundle carries them for the runtime (runtime/dynamic.py).
"""
from __future__ import annotations

import numpy as np

from gpuc.compiler import sym_scope
from gpuc.compiler import symbolic as S
from gpuc.compiler.guards import same_everywhere
from gpuc.compiler.ir import Graph, Node
from gpuc.compiler.shapes import UNARY_SHAPE, _blocker, parse_dynamic
from gpuc.errors import GpucError, UnsupportedError

MAX_DIMS = 16          # push-constant words (64 bytes)


def split(graph: Graph, specs) -> tuple[list, list]:
    """(batch-axis specs, other-axis specs) of a --dynamic list."""
    by_name = {graph.t(i).name: i for i in graph.inputs}
    batch, other = [], []
    for text in specs or ():
        name, axis, mx = parse_dynamic(text)
        if name in by_name:
            rank = len(graph.t(by_name[name]).shape)
            if -rank <= axis < rank and axis % rank != 0:
                other.append(text)
                continue
        batch.append(text)
    return batch, other


def setup(graph: Graph, specs) -> tuple[list, list, list]:
    """Make the graph's shapes symbolic for the dynamic dims `specs` (none on the batch axis).
    Returns (names, hints, [(input tensor, axis)]) for the dim variables d0, d1, ... in order."""
    by_name = {graph.t(i).name: i for i in graph.inputs}
    dims = []
    for text in specs:
        name, axis, mx = parse_dynamic(text)
        if name not in by_name:
            raise GpucError(f"--dynamic names {name!r}, not an input of the model (inputs: "
                            f"{', '.join(map(repr, by_name))})")
        tid = by_name[name]
        rank = len(graph.t(tid).shape)
        dims.append((tid, axis % rank, mx, f"{name}:{axis % rank}"))
    if len(dims) > MAX_DIMS:
        raise UnsupportedError(f"--dynamic: at most {MAX_DIMS} dynamic dims")
    for tid, axis, mx, label in dims:
        blocker = _blocker(graph, tid, axis, mx)     # (an op whose constant operand fixes the size)
        if blocker:
            raise UnsupportedError(f"--dynamic {label}<={mx}: the size of axis {axis} of {graph.t(tid).name!r} "
                                   f"cannot change: {blocker}")
    return [d[3] for d in dims], [d[2] for d in dims], [(d[0], d[1]) for d in dims]


def propagate_symbolic(graph: Graph, dims) -> None:
    """Input (tensor, axis) k gets dim variable k; every shape downstream is recomputed symbolically."""
    for k, (tid, axis) in enumerate(dims):
        shape = list(graph.t(tid).shape)
        shape[axis] = S.var(k)
        graph.t(tid).shape = tuple(shape)
    dynamic = {tid for tid, _ in dims}
    values: dict = {}               # tensor -> its value (an object array of ints and Syms): shape arithmetic
    folded = []                     # the nodes that computed them
    for node in graph.nodes:
        ins = [i for i in node.inputs if i >= 0]
        if not any(i in dynamic or i in values for i in ins):
            continue
        with sym_scope.site(node.label()):
            if node.op == "SHAPE" or any(i in values for i in ins if not (node.op == "RESHAPE" and i == node.inputs[1])):
                v = _value(node, graph, values)
                values[node.outputs[0]] = v
                folded.append(node)
                continue
            outs = _rule(node, graph, values)
        for o, shape in zip(node.outputs, outs):
            if o < 0:
                continue
            t = graph.t(o)
            shape = tuple(shape)
            if len(shape) != len(t.shape):
                raise UnsupportedError(f"--dynamic: {node.label()}: its output {t.name!r} comes out "
                                       f"{list(shape)}, the model says {list(t.shape)}")
            t.shape = shape
            if any(S.is_sym(d) for d in shape):
                dynamic.add(o)
    _fold_values(graph, values, folded)


def _fold_values(graph: Graph, values: dict, folded: list) -> None:
    """The shape arithmetic on dynamic sizes leaves the graph: its nodes go, and each RESHAPE target it
    computed becomes a constant (-1 for the one dynamic entry; the RESHAPE's output shape holds the
    expressions).  Any other reader of such a value was refused by _rule."""
    users = graph.consumers()
    for tid, v in values.items():
        readers = [n for n in users.get(tid, []) if all(n is not f for f in folded)]
        if tid in graph.outputs:
            raise UnsupportedError(f"--dynamic: output {graph.t(tid).name!r} is computed from a dynamic size")
        if readers:
            flat = list(np.asarray(v, dtype=object).reshape(-1))
            dyn = [k for k, d in enumerate(flat) if S.is_sym(d)]
            data = [-1 if len(dyn) == 1 and k == dyn[0] else S.hint(d) for k, d in enumerate(flat)]
            t = graph.t(tid)
            t.data = np.asarray(data, t.dtype).reshape(np.shape(v))
            t.shape = tuple(np.shape(v))
            for n in readers:
                if n.attrs.get("new_shape") is not None:
                    n.attrs["new_shape"] = list(data)
    graph.nodes = [n for n in graph.nodes if all(n is not f for f in folded)]


def _value(node: Node, graph: Graph, values: dict):
    """The value of an integer tensor computed from dynamic sizes (SHAPE, and arithmetic, slicing,
    gathering, packing and concatenation on it), as an object array of ints and Syms."""
    from gpuc.compiler.shapes import evaluate
    op = node.op
    if op == "SHAPE":
        return np.asarray(list(graph.t(node.inputs[0]).shape), dtype=object)
    vals = []
    for i in node.inputs:
        if i < 0:
            vals.append(None)
        elif i in values:
            vals.append(np.asarray(values[i], dtype=object))
        elif graph.t(i).is_const and np.asarray(graph.t(i).data).dtype.kind in "iu":
            vals.append(np.asarray(graph.t(i).data))
        else:
            _refuse(node, graph, "it mixes a size computed at run time with a runtime tensor")
    binary = {"ADD": lambda a, b: a + b, "SUB": lambda a, b: a - b, "MUL": lambda a, b: a * b,
              "FLOOR_DIV": lambda a, b: a // b, "FLOOR_MOD": lambda a, b: a % b,
              "MAXIMUM": S.smax, "MINIMUM": S.smin}
    if op in binary and len(vals) == 2 and not node.attrs.get("fused_activation_function"):
        return np.frompyfunc(binary[op], 2, 1)(vals[0], vals[1])
    if op == "CAST" and graph.t(node.outputs[0]).dtype.startswith("int"):
        return vals[0]
    if op in ("STRIDED_SLICE", "SLICE", "GATHER", "PACK", "CONCATENATION", "RESHAPE", "SQUEEZE", "EXPAND_DIMS"):
        try:
            out = evaluate(node, vals, graph, need_values=[True] * len(vals))
        except (ValueError, IndexError, TypeError, KeyError) as e:
            _refuse(node, graph, f"its shape arithmetic failed ({e})")
        if out is not None:
            return np.asarray(out[0], dtype=object)
    _refuse(node, graph, "it computes with a dynamic size as data (only SHAPE arithmetic feeding a RESHAPE's "
                         "target is supported)")


def dynamic_tensor(node: Node, graph: Graph) -> str:
    for i in node.inputs:
        if i >= 0 and any(S.is_sym(d) for d in graph.t(i).shape):
            return sym_scope.pretty(f"{graph.t(i).name!r} {list(graph.t(i).shape)}")
    return "?"


def _refuse(node, graph, why):
    raise UnsupportedError(f"--dynamic: {node.label()} cannot take the dynamic dim of its input "
                           f"{dynamic_tensor(node, graph)}: {why}")


def _const_ints(graph, tid, node, what):
    t = graph.t(tid)
    if not t.is_const:
        _refuse(node, graph, f"its {what} is not a constant")
    return [int(v) for v in np.asarray(t.data).reshape(-1)]


def _is_dyn(d) -> bool:
    return S.is_sym(d)


def _broadcast(node, graph, shapes):
    rank = max(len(s) for s in shapes)
    out = []
    for k in range(rank):
        ds = [s[len(s) - rank + k] for s in shapes if len(s) - rank + k >= 0]
        dyn = [d for d in ds if _is_dyn(d)]
        fixed = [d for d in ds if not _is_dyn(d) and d != 1]
        if dyn:
            if fixed:
                _refuse(node, graph, f"it broadcasts the dynamic size against a fixed size {fixed[0]}")
            first = dyn[0]
            for d in dyn[1:]:           # (the same size reached two ways, e.g. SAME and padded VALID halvings)
                if not same_everywhere(first, d):
                    _refuse(node, graph, f"two dynamic sizes {first} and {d} meet in one dimension and differ at "
                                         "some sizes within the bounds (the model runs only at some sizes)")
            out.append(first)
        else:
            out.append(max(ds))
    return out


ELEMENTWISE = {"ADD", "SUB", "MUL", "DIV", "MAXIMUM", "MINIMUM", "SQUARED_DIFFERENCE", "POW", "FLOOR_DIV",
               "FLOOR_MOD", "LESS", "LESS_EQUAL", "GREATER", "GREATER_EQUAL", "EQUAL", "NOT_EQUAL", "LOGICAL_AND",
               "LOGICAL_OR", "SELECT", "SELECT_V2", "PRELU"}
SAME_SHAPE = set(UNARY_SHAPE) - {"PRELU"} | {"NEG", "ABS", "LOGICAL_NOT", "CAST", "IDENTITY", "ZEROS_LIKE",
                                              "ONES_LIKE", "LOG_SOFTMAX", "SOFTMAX", "HARD_SWISH", "SIGN"}
REDUCE = {"MEAN", "SUM", "REDUCE_MAX", "REDUCE_MIN", "REDUCE_PROD"}


def _spatial(node, graph, size, k, stride, dil):
    pad = int(node.attrs.get("padding", 0) or 0)          # 0 SAME, 1 VALID
    if pad == 0:
        return S.ceil_div(size, stride)
    eff = (k - 1) * dil + 1
    if _is_dyn(size) and size < eff:     # (a guard, False at the bound: sizes below the window are refused)
        _refuse(node, graph, f"VALID padding needs at least {eff} elements")
    return (size - eff) // stride + 1


def _rule(node: Node, graph: Graph, values: dict | None = None) -> list:
    op, a = node.op, node.attrs
    shapes = [list(graph.t(i).shape) if i >= 0 else None for i in node.inputs]
    x = shapes[0]
    if op in SAME_SHAPE:
        return [x]
    if op in ELEMENTWISE:
        return [_broadcast(node, graph, [s for s in shapes if s is not None])]
    if op in ("GATHER", "EMBEDDING_LOOKUP"):
        if op == "EMBEDDING_LOOKUP":               # (ids, params)
            ids, params = shapes[0], shapes[1]
            if any(_is_dyn(d) for d in params):
                _refuse(node, graph, "a dynamic embedding table")
            return [list(ids) + list(params[1:])]
        if int(a.get("batch_dims", 0) or 0):
            _refuse(node, graph, "batch_dims")
        ax = int(a.get("axis", 0) or 0)
        ax = ax + len(x) if ax < 0 else ax
        return [x[:ax] + list(shapes[1]) + x[ax + 1:]]
    if op == "EXPAND_DIMS":
        ax = _const_ints(graph, node.inputs[1], node, "axis")[0]
        ax = ax + len(x) + 1 if ax < 0 else ax
        return [x[:ax] + [1] + x[ax:]]
    if op == "SQUEEZE":
        dims = [d + len(x) if d < 0 else d for d in (a.get("squeeze_dims") or [])]
        if not dims:
            _refuse(node, graph, "a SQUEEZE without squeeze_dims would drop the dynamic dim at size 1")
        if any(_is_dyn(x[d]) for d in dims):
            _refuse(node, graph, "it squeezes the dynamic dim")
        return [[n for d, n in enumerate(x) if d not in dims]]
    if op == "RESHAPE":
        if values and len(node.inputs) > 1 and node.inputs[1] in values:       # a target computed from sizes
            target = list(np.asarray(values[node.inputs[1]], dtype=object).reshape(-1))
            known = [d for d in target if S.is_sym(d) or d != -1]
            if -1 in target:
                rest = S.prod(known)
                target = [S.prod(x) // rest if not S.is_sym(d) and d == -1 else d for d in target]
            if not isinstance(S.prod(target) - S.prod(x), int) or S.prod(target) - S.prod(x) != 0:
                _refuse(node, graph, f"its computed target {target} does not hold the {S.prod(x)} elements")
            return [target]
        if len(node.inputs) > 1 and node.inputs[1] >= 0 and graph.t(node.inputs[1]).shape != (0,):
            target = _const_ints(graph, node.inputs[1], node, "target shape")
        else:
            target = [int(d) for d in a.get("new_shape") or []]
        numel = S.prod(x)
        if -1 not in target:
            _refuse(node, graph, f"its target {target} is a constant that fixes the size")
        rest = int(np.prod([d for d in target if d != -1], dtype=np.int64))
        if rest == 0:
            _refuse(node, graph, f"target {target}")
        if numel % rest != 0:          # (a guard: the -1 must divide out at every size)
            _refuse(node, graph, f"{numel} elements do not divide into {target}")
        return [[numel // rest if d == -1 else d for d in target]]
    if op in ("CONV_2D", "DEPTHWISE_CONV_2D", "MAX_POOL_2D", "AVERAGE_POOL_2D", "L2_POOL_2D"):
        if len(x) != 4:
            _refuse(node, graph, "a rank other than 4")
        if op in ("CONV_2D", "DEPTHWISE_CONV_2D"):
            w = shapes[1]
            kh, kw = w[1], w[2]
            co = w[0] if op == "CONV_2D" else w[3]
            if _is_dyn(x[3]):
                _refuse(node, graph, "a dynamic channel count")
            dh, dw = int(a.get("dilation_h_factor", 1) or 1), int(a.get("dilation_w_factor", 1) or 1)
        else:
            kh, kw = int(a.get("filter_height", 1)), int(a.get("filter_width", 1))
            co, dh, dw = x[3], 1, 1
        sh, sw = int(a.get("stride_h", 1) or 1), int(a.get("stride_w", 1) or 1)
        return [[x[0], _spatial(node, graph, x[1], kh, sh, dh), _spatial(node, graph, x[2], kw, sw, dw), co]]
    if op == "FULLY_CONNECTED":
        w = shapes[1]
        if _is_dyn(x[-1]):
            _refuse(node, graph, "a dynamic input depth (the weights fix it)")
        if a.get("keep_num_dims"):
            return [x[:-1] + [w[0]]]
        return [[S.prod(x[:-1]), w[0]]]
    if op == "BATCH_MATMUL":
        y = shapes[1]
        ax, ay = bool(a.get("adj_x")), bool(a.get("adj_y"))
        m = x[-1] if ax else x[-2]
        n = y[-2] if ay else y[-1]
        batch = _broadcast(node, graph, [x[:-2], y[:-2]]) if len(x) > 2 or len(y) > 2 else []
        return [batch + [m, n]]
    if op in REDUCE:
        axes = {d + len(x) if d < 0 else d for d in _const_ints(graph, node.inputs[1], node, "axes")}
        keep = bool(a.get("keep_dims", False))
        return [[1 if d in axes else n for d, n in enumerate(x) if keep or d not in axes]]
    if op == "UNIDIRECTIONAL_SEQUENCE_LSTM":
        o = graph.t(node.outputs[0]).shape[-1]
        if _is_dyn(x[2]) or (not a.get("time_major") and _is_dyn(x[0])) or (a.get("time_major") and _is_dyn(x[1])):
            _refuse(node, graph, "only its time axis may be dynamic")
        return [x[:2] + [o]]
    if op == "TRANSPOSE":
        perm = _const_ints(graph, node.inputs[1], node, "perm")
        return [[x[p] for p in perm]]
    if op in ("PAD", "PADV2", "MIRROR_PAD"):
        p = np.asarray(_const_ints(graph, node.inputs[1], node, "paddings")).reshape(-1, 2)
        return [[n + int(p[d, 0]) + int(p[d, 1]) for d, n in enumerate(x)]]
    if op == "CONCATENATION":
        ax = int(a.get("axis", 0) or 0)
        ax = ax + len(x) if ax < 0 else ax
        out = list(x)
        out[ax] = sum((s[ax] for s in shapes if s is not None), 0)
        for s in shapes:
            for d in range(len(x)):
                if d != ax and (not isinstance(s[d] - x[d], int) or s[d] - x[d] != 0):
                    _refuse(node, graph, "its inputs differ in a dynamic dim")
        return [out]
    if op == "STRIDED_SLICE":
        from gpuc.compiler.ops.movement import strided_slice_dims
        ints = [_const_ints(graph, node.inputs[k], node, w) for k, w in ((1, "begin"), (2, "end"), (3, "strides"))]
        _, out = strided_slice_dims(x, *ints, *(int(a.get(k, 0) or 0) for k in (
            "begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask", "shrink_axis_mask")), bool(a.get("offset")))
        return [list(out)]
    if op == "SLICE":
        begin = _const_ints(graph, node.inputs[1], node, "begin")
        size_ = _const_ints(graph, node.inputs[2], node, "size")
        return [[n - b if sz == -1 else sz for n, b, sz in zip(x, begin, size_)]]
    if op == "LAYER_NORM":
        return [x]
    _refuse(node, graph, "gpuc has no dynamic-size rule for this op yet")
