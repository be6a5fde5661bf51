"""The catalogue of tiny single-op model configurations (`CASES`) that tests/ops/test_catalogue.py
compares gpuc against (and tests/ops/test_nonfinite.py feeds special values), proven to run in LiteRT
by tests/compiler/test_model_builder.py; and the elementwise op lists of tests/ops/test_math.py.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from helpers.builder import ModelBuilder
from helpers.data import rnd, seed_of
from helpers.litert import run_litert

# ---------------------------------------------------------------------------------------------------
# single-op cases

@dataclass
class Case:
    model: bytes                                  # the model gpuc compiles
    inputs: list[np.ndarray]
    out_shapes: list[tuple]                       # declared output shapes
    out_dtypes: list[str] = field(default_factory=lambda: ["float32"])
    # LiteRT rejects some valid configurations (a CONV_2D / DEPTHWISE_CONV_2D without bias, a fused
    # activation on float CONCATENATION); their reference is `ref_model` (zero bias / no activation)
    # with `ref_post` applied to its outputs.
    ref_model: bytes | None = None
    ref_post: Callable[[list[np.ndarray]], list[np.ndarray]] | None = None
    builders: list[ModelBuilder] = field(default_factory=list)   # for the read-back test

    def reference(self) -> list[np.ndarray]:
        outs = run_litert(self.ref_model or self.model, self.inputs)
        return self.ref_post(outs) if self.ref_post else outs


CASES: dict[str, Callable[[], Case]] = {}


def case(name: str):
    def deco(fn):
        assert name not in CASES, name
        CASES[name] = fn
        return fn
    return deco


def build(op: str, args, out_shape, **options) -> tuple[bytes, ModelBuilder]:
    """One-op model. `args`: list/tuple -> runtime input of that shape, np.ndarray -> constant,
    None -> absent optional input (-1)."""
    mb = ModelBuilder()
    ids = []
    for i, a in enumerate(args):
        if a is None:
            ids.append(-1)
        elif isinstance(a, np.ndarray):
            ids.append(mb.const(f"c{i}", a))
        else:
            ids.append(mb.input(f"x{i}", a))
    y = mb.tensor("y", out_shape)
    mb.op(op, ids, [y], **options)
    mb.output(y)
    return mb.finish(), mb


def single(op, args, out_shape, name, lo=-1.0, hi=1.0, ref_args=None, ref_post=None, ref_options=None, **options):
    """A Case for one op; runtime inputs get seeded uniform(lo, hi) data."""
    model, mb = build(op, args, out_shape, **options)
    s = seed_of(name)
    inputs = [rnd(a, s + i, lo, hi) for i, a in enumerate(args) if isinstance(a, (list, tuple))]
    ref_model, builders = None, [mb]
    if ref_args is not None or ref_options is not None:
        ref_model, rmb = build(op, ref_args if ref_args is not None else args, out_shape,
                               **(ref_options if ref_options is not None else options))
        builders.append(rmb)
    return Case(model, inputs, [tuple(out_shape)], ref_model=ref_model, ref_post=ref_post, builders=builders)


def dims(shape) -> str:
    return "x".join(map(str, shape)) or "scalar"


def conv_out(n, k, s, d, padding):
    return -(-n // s) if padding == "SAME" else (n - (k - 1) * d - 1) // s + 1


def np_act(act: str):
    return {"NONE": lambda v: v, "RELU": lambda v: np.maximum(v, 0), "RELU6": lambda v: np.clip(v, 0, 6),
            "RELU_N1_TO_1": lambda v: np.clip(v, -1, 1), "TANH": np.tanh}[act]


# CONV_2D: (kernel hw, stride hw, dilation, padding, activation, bias, batch, h, w, cin, cout)
CONV = [
    ((1, 1), (1, 1), 1, "VALID", "NONE", True, 2, 7, 9, 3, 5),
    ((1, 1), (2, 2), 1, "SAME", "RELU", False, 2, 7, 9, 3, 5),
    ((1, 1), (1, 1), 1, "SAME", "RELU6", True, 1, 5, 5, 8, 16),
    ((3, 3), (1, 1), 1, "SAME", "RELU", True, 2, 7, 9, 3, 5),
    ((3, 3), (2, 2), 1, "SAME", "RELU6", True, 2, 7, 9, 3, 5),
    ((3, 3), (2, 2), 1, "VALID", "NONE", False, 2, 7, 9, 3, 5),
    ((3, 3), (2, 1), 1, "VALID", "RELU_N1_TO_1", True, 2, 7, 9, 3, 5),
    ((3, 3), (1, 1), 1, "SAME", "TANH", False, 1, 6, 6, 3, 5),
    ((5, 3), (1, 2), 1, "SAME", "TANH", True, 2, 7, 9, 3, 5),
    ((5, 3), (2, 1), 1, "VALID", "RELU6", False, 2, 7, 9, 3, 5),
    ((3, 3), (1, 1), 2, "SAME", "NONE", True, 2, 7, 9, 3, 5),
    ((3, 3), (1, 1), 2, "VALID", "RELU", True, 1, 7, 9, 3, 5),
    ((3, 3), (2, 2), 2, "SAME", "RELU6", False, 1, 9, 7, 3, 5),
]
for _k, _s, _d, _p, _a, _b, _n, _h, _w, _ci, _co in CONV:
    _name = (f"conv2d-k{_k[0]}x{_k[1]}-s{_s[0]}x{_s[1]}-d{_d}-{_p}-{_a}-{'bias' if _b else 'nobias'}"
             f"-{_n}x{_h}x{_w}x{_ci}to{_co}")

    @case(_name)
    def _conv(k=_k, s=_s, d=_d, p=_p, a=_a, bias=_b, n=_n, h=_h, w=_w, ci=_ci, co=_co, name=_name):
        out = [n, conv_out(h, k[0], s[0], d, p), conv_out(w, k[1], s[1], d, p), co]
        wt = rnd((co, *k, ci), seed_of(name) + 100)
        b = rnd((co,), seed_of(name) + 101)
        opts = dict(padding=p, stride_h=s[0], stride_w=s[1], dilation_hfactor=d, dilation_wfactor=d,
                    fused_activation_function=a)
        ref = None if bias else [[n, h, w, ci], wt, np.zeros(co, np.float32)]
        return single("CONV_2D", [[n, h, w, ci], wt, b if bias else None], out, name, ref_args=ref, **opts)


# grouped CONV_2D: input channels = groups x filter input channels (LiteRT accepts it for float)
for _g, _s, _p in [(2, 1, "SAME"), (3, 2, "VALID")]:
    _name = f"conv2d-grouped-g{_g}-s{_s}-{_p}"

    @case(_name)
    def _grouped(g=_g, s=_s, p=_p, name=_name):
        h, w, cig, co = 6, 7, 2, 2 * g
        out = [1, conv_out(h, 3, s, 1, p), conv_out(w, 3, s, 1, p), co]
        return single("CONV_2D", [[1, h, w, cig * g], rnd((co, 3, 3, cig), seed_of(name) + 100),
                                  rnd((co,), seed_of(name) + 101)], out, name,
                      padding=p, stride_h=s, stride_w=s)


# DEPTHWISE_CONV_2D: (stride hw, padding, dilation, multiplier, activation, bias, batch, c)
DW = [
    ((1, 1), "SAME", 1, 1, "RELU6", True, 1, 3),
    ((2, 2), "SAME", 1, 1, "NONE", True, 1, 3),
    ((2, 2), "VALID", 1, 1, "RELU", True, 2, 3),
    ((1, 2), "SAME", 1, 1, "RELU_N1_TO_1", True, 1, 3),
    ((1, 1), "SAME", 2, 1, "NONE", True, 1, 3),
    ((1, 1), "VALID", 2, 2, "RELU", True, 1, 3),
    ((1, 1), "VALID", 1, 2, "TANH", True, 1, 3),
    ((2, 2), "SAME", 1, 2, "RELU6", False, 2, 3),
    ((1, 1), "SAME", 1, 4, "NONE", True, 1, 1),
    ((1, 1), "SAME", 1, 1, "RELU", False, 1, 4),
]
for _s, _p, _d, _m, _a, _b, _n, _c in DW:
    _name = f"dwconv-s{_s[0]}x{_s[1]}-{_p}-d{_d}-m{_m}-{_a}-{'bias' if _b else 'nobias'}-{_n}x8x7x{_c}"

    @case(_name)
    def _dw(s=_s, p=_p, d=_d, m=_m, a=_a, bias=_b, n=_n, c=_c, name=_name):
        h, w = 8, 7
        out = [n, conv_out(h, 3, s[0], d, p), conv_out(w, 3, s[1], d, p), c * m]
        wt = rnd((1, 3, 3, c * m), seed_of(name) + 100)
        b = rnd((c * m,), seed_of(name) + 101)
        opts = dict(padding=p, stride_h=s[0], stride_w=s[1], depth_multiplier=m, dilation_hfactor=d,
                    dilation_wfactor=d, fused_activation_function=a)
        ref = None if bias else [[n, h, w, c], wt, np.zeros(c * m, np.float32)]
        return single("DEPTHWISE_CONV_2D", [[n, h, w, c], wt, b if bias else None], out, name, ref_args=ref, **opts)


# FULLY_CONNECTED: (input shape, output shape, keep_num_dims, bias, activation)
FC = [
    ([3, 10], [3, 6], False, True, "NONE"),
    ([2, 2, 2, 5], [4, 6], False, True, "RELU"),
    ([1, 2, 2, 5], [1, 6], False, True, "NONE"),
    ([2, 3, 10], [2, 3, 6], True, True, "RELU6"),
    ([1, 2, 3, 10], [1, 2, 3, 6], True, False, "RELU"),
    ([2, 10], [2, 6], False, True, "RELU_N1_TO_1"),
    ([1, 10], [1, 6], False, False, "NONE"),
]
for _i, _o, _keep, _b, _a in FC:
    _name = f"fc-{dims(_i)}-to-{dims(_o)}-keep{int(_keep)}-{'bias' if _b else 'nobias'}-{_a}"

    @case(_name)
    def _fc(i=_i, o=_o, keep=_keep, bias=_b, a=_a, name=_name):
        k = i[-1] if keep else int(np.prod(i)) // o[0]
        return single("FULLY_CONNECTED", [i, rnd((6, k), seed_of(name) + 100),
                                          rnd((6,), seed_of(name) + 101) if bias else None],
                      o, name, keep_num_dims=keep, fused_activation_function=a)


# ADD / SUB / MUL with two runtime operands: (a, b, out)
BCAST = [
    ([2, 3, 4], [2, 3, 4], [2, 3, 4]),
    ([2, 1, 4, 3], [3], [2, 1, 4, 3]),
    ([3], [2, 1, 4, 3], [2, 1, 4, 3]),
    ([1, 5, 1], [4, 1, 2], [4, 5, 2]),
    ([2, 3], [], [2, 3]),
    ([2, 1, 3, 1, 2], [1, 4, 1, 5, 1], [2, 4, 3, 5, 2]),
    ([2, 1, 3, 1, 2, 1], [1, 2, 1, 3, 1, 2], [2, 2, 3, 3, 2, 2]),
]
for _op in ["ADD", "SUB", "MUL"]:
    for _a, _bb, _o in BCAST:
        _name = f"{_op.lower()}-{'x'.join(map(str, _a)) or 'scalar'}-{'x'.join(map(str, _bb)) or 'scalar'}"

        @case(_name)
        def _bin(op=_op, a=_a, b=_bb, o=_o, name=_name):
            return single(op, [a, b], o, name)

    # a constant operand, and fused activations: (runtime shape, const shape, const first, activation)
    for _x, _c, _first, _act in [([1, 4, 4, 3], [3], False, "RELU6"), ([2, 3, 4], [], False, "NONE"),
                                 ([2, 3, 4], [2, 3, 4], False, "RELU"), ([1, 4, 4, 3], [4, 1, 3], True, "NONE"),
                                 ([2, 5], [5], True, "RELU_N1_TO_1"), ([2, 5], [2, 1], False, "TANH")]:
        _name = (f"{_op.lower()}-const{'first' if _first else ''}-{'x'.join(map(str, _x))}"
                 f"-{'x'.join(map(str, _c)) or 'scalar'}-{_act}")

        @case(_name)
        def _binc(op=_op, x=_x, c=_c, first=_first, act=_act, name=_name):
            const = rnd(c, seed_of(name) + 100, -4, 4)
            out = list(np.broadcast_shapes(tuple(x), tuple(c)))
            args = [const, x] if first else [x, const]
            return single(op, args, out, name, lo=-4, hi=4, fused_activation_function=act)

    _name = f"{_op.lower()}-same-tensor-twice"

    @case(_name)
    def _twice(op=_op, name=_name):
        mb = ModelBuilder()
        x = mb.input("x", [2, 3, 4])
        y = mb.tensor("y", [2, 3, 4])
        mb.op(op, [x, x], [y], fused_activation_function="NONE")
        mb.output(y)
        return Case(mb.finish(), [rnd([2, 3, 4], seed_of(name))], [(2, 3, 4)], builders=[mb])


for _op in ["LOGISTIC", "RELU", "RELU6", "TANH", "RELU_N1_TO_1"]:
    @case(f"{_op.lower()}-linspace")
    def _unary_lin(op=_op):
        model, mb = build(op, [[2, 50]], [2, 50])
        return Case(model, [np.linspace(-8, 8, 100, dtype=np.float32).reshape(2, 50)], [(2, 50)], builders=[mb])

    @case(f"{_op.lower()}-4d")
    def _unary_4d(op=_op):
        return single(op, [[1, 3, 4, 5]], [1, 3, 4, 5], f"{op}-4d", lo=-8, hi=8)


# PAD (paddings const int32 [rank, 2]) and PADV2
for _shape, _pads in [([3, 4], [[1, 2], [0, 3]]), ([2, 3, 4], [[0, 0], [1, 1], [2, 0]]),
                      ([1, 4, 5, 2], [[0, 0], [1, 1], [2, 2], [0, 0]]), ([1, 3, 3, 2], [[0, 0]] * 4),
                      ([2, 3], [[0, 0], [0, 0]]), ([1, 3, 5, 2], [[1, 0], [0, 2], [1, 1], [1, 3]])]:
    _name = f"pad-{'x'.join(map(str, _shape))}-{'_'.join(f'{a}{b}' for a, b in _pads)}"

    @case(_name)
    def _pad(shape=_shape, pads=_pads, name=_name):
        out = [d + a + b for d, (a, b) in zip(shape, pads)]
        return single("PAD", [shape, np.array(pads, np.int32)], out, name)


@case("padv2-value")
def _padv2():
    return single("PADV2", [[2, 3], np.array([[1, 1], [0, 1]], np.int32), np.array([2.5], np.float32)], [4, 4],
                  "padv2-value")


# MEAN and the other reducers (axis const int32)
for _op in ["MEAN", "SUM", "REDUCE_MAX", "REDUCE_MIN", "REDUCE_PROD"]:
    for _axes, _keep in [([1, 2], True), ([1, 2], False), ([-1], False), ([-1], True), ([0, 3], True),
                         ([0, 1, 2, 3], False), ([0, 1, 2, 3], True)]:
        _name = f"{_op.lower()}-axes{'_'.join(map(str, _axes))}-keep{int(_keep)}"

        @case(_name)
        def _reduce(op=_op, axes=_axes, keep=_keep, name=_name):
            shape = [2, 3, 4, 5]
            norm = sorted(a % 4 for a in axes)
            out = ([1 if i in norm else d for i, d in enumerate(shape)] if keep
                   else [d for i, d in enumerate(shape) if i not in norm])
            lo, hi = (0.5, 1.5) if op == "REDUCE_PROD" else (-1.0, 1.0)
            return single(op, [shape, np.array(axes, np.int32)], out, name, lo=lo, hi=hi, keep_dims=keep)


# RESHAPE: (input shape, new shape, shape given as an input tensor, shape tensor contents)
for _i, _o, _with_input, _spec in [([2, 3, 4], [6, 4], True, [6, 4]), ([2, 3, 4], [6, 4], False, [6, 4]),
                                   ([1, 12], [1, 3, 4], True, [1, 3, 4]), ([1, 12], [1, 3, 4], False, [1, 3, 4]),
                                   ([2, 3, 4], [4, 6], True, [-1, 6]), ([1, 1, 1, 10], [1, 10], True, [1, 10])]:
    _name = f"reshape-{'x'.join(map(str, _i))}-to-{'_'.join(map(str, _spec))}-{'input' if _with_input else 'options'}"

    @case(_name)
    def _reshape(i=_i, o=_o, with_input=_with_input, spec=_spec, name=_name):
        args = [i, np.array(spec, np.int32)] if with_input else [i]
        return single("RESHAPE", args, o, name, new_shape=np.array(spec, np.int32))


for _shape, _beta, _range in [([3, 10], 1.0, 5.0), ([3, 10], 0.5, 5.0), ([2, 3, 4, 5], 0.5, 5.0),
                              ([2, 3, 4, 5], 1.0, 5.0), ([1, 1000], 1.0, 5.0), ([2, 7], 1.0, 40.0)]:
    _name = f"softmax-{'x'.join(map(str, _shape))}-beta{_beta}-range{_range:g}"

    @case(_name)
    def _softmax(shape=_shape, beta=_beta, r=_range, name=_name):
        return single("SOFTMAX", [shape], shape, name, lo=-r, hi=r, beta=beta)


# pools: (filter hw, stride hw, padding, activation, batch, h, w, c)
POOL = [
    ((2, 2), (2, 2), "VALID", "NONE", 2, 7, 9, 3),
    ((3, 3), (1, 1), "SAME", "RELU", 2, 7, 9, 3),
    ((3, 3), (2, 2), "SAME", "RELU6", 1, 7, 9, 3),
    ((2, 2), (2, 2), "SAME", "NONE", 1, 7, 9, 3),
    ((3, 2), (1, 2), "VALID", "RELU_N1_TO_1", 1, 6, 7, 2),
    ((7, 9), (1, 1), "VALID", "NONE", 1, 7, 9, 4),
]
for _op in ["AVERAGE_POOL_2D", "MAX_POOL_2D"]:
    for _k, _s, _p, _a, _n, _h, _w, _c in POOL:
        _name = (f"{'avgpool' if _op[0] == 'A' else 'maxpool'}-k{dims(_k)}-s{dims(_s)}-{_p}-{_a}"
                 f"-{dims([_n, _h, _w, _c])}")

        @case(_name)
        def _pool(op=_op, k=_k, s=_s, p=_p, a=_a, n=_n, h=_h, w=_w, c=_c, name=_name):
            out = [n, conv_out(h, k[0], s[0], 1, p), conv_out(w, k[1], s[1], 1, p), c]
            return single(op, [[n, h, w, c]], out, name, padding=p, stride_h=s[0], stride_w=s[1],
                          filter_height=k[0], filter_width=k[1], fused_activation_function=a)


# CONCATENATION: (input shapes, axis, activation, index of an input that is a constant or None)
CONCAT = [
    ([[1, 4, 4, 2], [1, 4, 4, 3]], 3, "NONE", None),
    ([[2, 1, 3], [2, 4, 3], [2, 2, 3]], 1, "NONE", None),
    ([[2, 3], [2, 5]], -1, "NONE", None),
    ([[1, 2], [3, 2]], 0, "NONE", None),
    ([[1, 2, 2, 1], [1, 2, 2, 3], [1, 2, 2, 2]], -1, "RELU6", None),
    ([[1, 3, 2, 2], [1, 1, 2, 2]], 1, "RELU", None),
    ([[2, 3], [2, 2]], 1, "NONE", 1),
]
for _shapes, _axis, _a, _ci in CONCAT:
    _name = f"concat-{'_'.join(map(dims, _shapes))}-axis{_axis}-{_a}" + ("" if _ci is None else f"-const{_ci}")

    @case(_name)
    def _concat(shapes=_shapes, axis=_axis, a=_a, ci=_ci, name=_name):
        out = list(shapes[0])
        out[axis] = sum(s[axis] for s in shapes)
        args = [rnd(s, seed_of(name) + 100) if i == ci else s for i, s in enumerate(shapes)]
        if a == "NONE":
            return single("CONCATENATION", args, out, name, axis=axis, fused_activation_function=a)
        # LiteRT's float CONCATENATION rejects fused activations: reference = activation(concat)
        f = np_act(a)
        return single("CONCATENATION", args, out, name, axis=axis, fused_activation_function=a,
                      ref_options=dict(axis=axis), ref_post=lambda outs: [f(o) for o in outs])


@case("chain-conv-dw-add-mean-fc-softmax")
def _chain():
    """conv -> depthwise -> residual add -> mean -> FC -> softmax in one model (two outputs)."""
    s = seed_of("chain")
    mb = ModelBuilder()
    x = mb.input("x", [1, 8, 8, 3])
    c1 = mb.tensor("c1", [1, 8, 8, 4])
    mb.op("CONV_2D", [x, mb.const("w1", rnd((4, 3, 3, 3), s + 1)), mb.const("b1", rnd((4,), s + 2))], [c1],
          padding="SAME", stride_h=1, stride_w=1, fused_activation_function="RELU6")
    c2 = mb.tensor("c2", [1, 8, 8, 4])
    mb.op("DEPTHWISE_CONV_2D", [c1, mb.const("w2", rnd((1, 3, 3, 4), s + 3)), mb.const("b2", rnd((4,), s + 4))],
          [c2], padding="SAME", stride_h=1, stride_w=1, depth_multiplier=1, fused_activation_function="RELU")
    a = mb.tensor("a", [1, 8, 8, 4])
    mb.op("ADD", [c1, c2], [a], fused_activation_function="NONE")
    m = mb.tensor("m", [1, 4])
    mb.op("MEAN", [a, mb.const("axes", np.array([1, 2], np.int32))], [m], keep_dims=False)
    f = mb.tensor("f", [1, 5])
    mb.op("FULLY_CONNECTED", [m, mb.const("w3", rnd((5, 4), s + 5)), mb.const("b3", rnd((5,), s + 6))], [f],
          fused_activation_function="NONE")
    y = mb.tensor("y", [1, 5])
    mb.op("SOFTMAX", [f], [y], beta=1.0)
    mb.output(y)
    mb.output(a)
    return Case(mb.finish(signature_key="serving_default"), [rnd((1, 8, 8, 3), s)], [(1, 5), (1, 8, 8, 4)],
                out_dtypes=["float32", "float32"], builders=[mb])


# ---------------------------------------------------------------------------------------------------
# elementwise ops (compiler/ops/math.py): unary float32 ops with their option variants, and binary
# (op, dtype) pairs

UNARY_F32 = ["ABS", "NEG", "SQUARE", "SQRT", "RSQRT", "EXP", "LOG", "SIN", "COS", "FLOOR", "CEIL", "ROUND",
             "SIGN", "ELU", "HARD_SWISH", "RELU_0_TO_1"]
UNARY_VARIANTS = [(op, {}) for op in UNARY_F32] + [
    ("GELU", dict(approximate=False)), ("GELU", dict(approximate=True)),
    ("LEAKY_RELU", dict(alpha=0.2)), ("LEAKY_RELU", dict(alpha=1.5)), ("LEAKY_RELU", dict(alpha=-0.3)),
]

BINARY = [(op, dt) for op in ("DIV", "POW", "SQUARED_DIFFERENCE", "MAXIMUM", "MINIMUM", "FLOOR_DIV", "FLOOR_MOD")
          for dt in ("float32", "int32")] + [("PRELU", "float32")] + [(op, "int32") for op in ("ADD", "SUB", "MUL")] + [
    ("ATAN2", "float32"), ("BITWISE_XOR", "int32"), ("RIGHT_SHIFT", "int32")]
