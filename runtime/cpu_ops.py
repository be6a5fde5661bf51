"""numpy CPU kernels for ops the GPU cannot run (partial delegation), with LiteRT's semantics.

The runtime runs them as host steps of a bundle's program (runtime/program.py); the compiler
consults `unsupported_reason` for every node the GPU registry refuses (and evaluates CALL_ONCE init
subgraphs with `run`).  This module imports numpy only: never the compiler.

A kernel is `fn(attrs, inputs, out_specs) -> [arrays]`: attrs is the node's option dict (JSON
types), inputs numpy arrays (None for an absent optional input), out_specs the output Specs.
`check(attrs, in_specs, out_specs)` returns None when the kernel handles that node, else a reason.
Integer activations that carry quantization parameters are refused by arithmetic kernels (they
would need LiteRT's integer requantization); data-movement kernels (runtime/cpu_movement.py, which
registers into the same table) take any dtype.
"""
from __future__ import annotations

import numpy as np

from gpuc.runtime.cpu_table import CPU_OPS, CpuOp, Spec, cpu_op, norm_axis  # noqa: F401 - Spec, CPU_OPS re-exported

NUMERIC = ("float32", "float64", "float16", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
           "uint64", "bool")
ACTS = {0: None, 1: (0.0, None), 2: (-1.0, 1.0), 3: (0.0, 6.0)}


def unsupported_reason(op: str, attrs: dict, in_specs: list, out_specs: list) -> str | None:
    d = CPU_OPS.get(op)
    if d is None:
        return "no CPU kernel either"
    for s in list(in_specs) + list(out_specs):
        if s is None:
            continue
        if s.dtype not in NUMERIC:
            return f"dtype {s.dtype} has no CPU kernel"
        if s.quantized and not d.raw and s.dtype != "float32":
            return f"quantized {s.dtype} tensors have no CPU kernel for {op}"
    if d.check is None:
        return None
    try:
        return d.check(attrs, in_specs, out_specs)
    except (ValueError, IndexError, KeyError, TypeError, ZeroDivisionError) as e:
        return f"malformed operator ({type(e).__name__}: {e})"


def run(op: str, attrs: dict, inputs: list, out_specs: list) -> list:
    outs = CPU_OPS[op].fn(attrs, inputs, out_specs)
    res = []
    for v, s in zip(outs, out_specs):
        v = np.asarray(v)
        if v.size != int(np.prod(s.shape, dtype=np.int64)):
            raise ValueError(f"{op}: CPU kernel produced {list(v.shape)} for an output of shape {list(s.shape)}")
        res.append(_epilogue(attrs, v.reshape(s.shape), s))
    fq = attrs.get("_fq_out")
    if fq:
        res = [r if q is None else fake_quant(r, *q) for r, q in zip(res, fq)]
    return res


def _epilogue(attrs, v, s):
    a = int(attrs.get("_act", attrs.get("fused_activation_function", 0)) or 0)
    if a in (1, 2, 3) and v.dtype.kind == "f":
        lo, hi = ACTS[a]
        v = np.maximum(v, lo) if hi is None else np.clip(v, lo, hi)
    elif a == 4 and "_act" in attrs:
        v = np.tanh(v)
    elif a == 5 and "_act" in attrs:
        v = 1 / (1 + np.exp(-v))
    return v.astype(s.dtype, copy=False)


def fake_quant(v, scale, zp, lo, hi):
    """LiteRT's rounding of a float to a quantized grid, back to float (simulated quantization)."""
    r = np.asarray(v, np.float32) / np.float32(scale)
    r = np.sign(r) * np.floor(np.abs(r) + np.float32(0.5))
    return ((np.clip(r + zp, lo, hi) - zp) * np.float32(scale)).astype(np.float32)


def litert_cast(x: np.ndarray, dtype) -> np.ndarray:
    """float -> integer truncates and saturates (NaN -> max); -> bool is != 0; integers wrap."""
    x, dt = np.asarray(x), np.dtype(dtype)
    if dt == np.bool_:
        return x != 0
    if x.dtype.kind == "f" and dt.kind in "iu":
        info = np.iinfo(dt)
        with np.errstate(invalid="ignore"):
            t = np.clip(np.trunc(x.astype(np.float64)), info.min, info.max)
        return np.where(np.isnan(t), info.max, t).astype(dt)
    return x.astype(dt)


def _broadcast_check(attrs, ins, outs):
    try:
        shape = np.broadcast_shapes(*[tuple(s.shape) for s in ins])
    except ValueError:
        return f"input shapes {[list(s.shape) for s in ins]} do not broadcast"
    if tuple(shape) != tuple(outs[0].shape):
        return f"output shape {list(outs[0].shape)} is not the broadcast {list(shape)}"
    return None


# -- elementwise ----------------------------------------------------------------------------------
def _int_div(a, b):
    q = np.abs(a) // np.where(b == 0, 1, np.abs(b))
    return np.where((a < 0) != (b < 0), -q, q)


BINARY = {
    "ADD": np.add, "SUB": np.subtract, "MUL": np.multiply, "MAXIMUM": np.maximum, "MINIMUM": np.minimum,
    "SQUARED_DIFFERENCE": lambda a, b: (a - b) * (a - b),
    "DIV": lambda a, b: a / b if a.dtype.kind == "f" else _int_div(a, b),
    "FLOOR_DIV": lambda a, b: np.floor_divide(a, np.where(b == 0, 1, b)) if a.dtype.kind != "f" else np.floor(a / b),
    "FLOOR_MOD": lambda a, b: np.mod(a, np.where(b == 0, 1, b)) if a.dtype.kind != "f" else np.fmod(a, b) + np.where((np.fmod(a, b) != 0) & ((np.fmod(a, b) < 0) != (b < 0)), b, 0),
    "POW": np.power,
    "EQUAL": np.equal, "NOT_EQUAL": np.not_equal, "LESS": np.less, "LESS_EQUAL": np.less_equal,
    "GREATER": np.greater, "GREATER_EQUAL": np.greater_equal,
    "LOGICAL_AND": np.logical_and, "LOGICAL_OR": np.logical_or,
}
UNARY = {"ABS": np.abs, "NEG": np.negative, "SQUARE": np.square, "SIGN": np.sign, "LOGICAL_NOT": np.logical_not,
         "ZEROS_LIKE": np.zeros_like, "ONES_LIKE": np.ones_like, "SQRT": np.sqrt, "EXP": np.exp, "LOG": np.log,
         "FLOOR": np.floor, "CEIL": np.ceil, "SIN": np.sin, "COS": np.cos}


def _check_binary(attrs, ins, outs):
    if len(ins) != 2 or len(outs) != 1 or None in ins:
        return "expects 2 inputs and 1 output"
    if ins[0].dtype != ins[1].dtype:
        return f"input dtypes differ ({ins[0].dtype}, {ins[1].dtype})"
    return _broadcast_check(attrs, ins, outs)


def _make_binary(name):
    f = BINARY[name]

    def fn(attrs, x, outs):
        with np.errstate(all="ignore"):
            return [f(x[0], x[1])]
    return fn


for _n in BINARY:
    CPU_OPS[_n] = CpuOp(_make_binary(_n), _check_binary, False, "numpy broadcasting, every numeric dtype")


def _check_unary(attrs, ins, outs):
    if len(ins) != 1 or len(outs) != 1 or ins[0] is None or tuple(ins[0].shape) != tuple(outs[0].shape):
        return "expects 1 input and 1 output of the same shape"
    return None


def _make_unary(name):
    f = UNARY[name]

    def fn(attrs, x, outs):
        with np.errstate(all="ignore"):
            return [f(x[0])]
    return fn


for _n in UNARY:
    CPU_OPS[_n] = CpuOp(_make_unary(_n), _check_unary, False, "elementwise, every numeric dtype")


@cpu_op("CAST", check=_check_unary, summary="every numeric dtype, LiteRT's saturating float -> integer")
def _cast(attrs, x, outs):
    return [litert_cast(x[0], outs[0].dtype)]


@cpu_op("SELECT", "SELECT_V2", raw=True, summary="condition ? x : y with broadcasting")
def _select(attrs, x, outs):
    c = x[0]
    if c.ndim == 1 and x[1].ndim > 1 and c.shape[0] == x[1].shape[0]:     # SELECT's rank-1 condition
        c = c.reshape((-1,) + (1,) * (x[1].ndim - 1))
    return [np.where(c, x[1], x[2])]


# -- reductions and selection ------------------------------------------------------------------------
def _axes(x, a):
    return tuple(sorted({norm_axis(v, x.ndim) for v in np.asarray(a).reshape(-1)}))


REDUCE = {"SUM": np.sum, "REDUCE_PROD": np.prod, "REDUCE_MAX": np.max, "REDUCE_MIN": np.min,
          "REDUCE_ANY": np.any, "REDUCE_ALL": np.all}


def _make_reduce(name):
    f = REDUCE[name]

    def fn(attrs, x, outs):
        r = f(x[0], axis=_axes(x[0], x[1]), keepdims=bool(attrs.get("keep_dims", False)))
        return [np.asarray(r).astype(outs[0].dtype)]
    return fn


for _n in REDUCE:
    CPU_OPS[_n] = CpuOp(_make_reduce(_n), None, False, "reduction over axes, every numeric dtype")


@cpu_op("MEAN", summary="float: mean; integers: rounded like LiteRT's reference")
def _mean(attrs, x, outs):
    ax = _axes(x[0], x[1])
    if x[0].dtype.kind == "f":
        return [np.mean(x[0], axis=ax, keepdims=bool(attrs.get("keep_dims", False)), dtype=np.float32)]
    s = np.sum(x[0].astype(np.int64), axis=ax, keepdims=bool(attrs.get("keep_dims", False)))
    n = int(np.prod([x[0].shape[a] for a in ax])) or 1
    return [(s // n).astype(outs[0].dtype)]


@cpu_op("ARG_MAX", summary="first index of the max")
def _argmax(attrs, x, outs):
    return [np.argmax(x[0], axis=norm_axis(np.asarray(x[1]).reshape(-1)[0], x[0].ndim)).astype(outs[0].dtype)]


@cpu_op("ARG_MIN", summary="first index of the min")
def _argmin(attrs, x, outs):
    return [np.argmin(x[0], axis=norm_axis(np.asarray(x[1]).reshape(-1)[0], x[0].ndim)).astype(outs[0].dtype)]


@cpu_op("CUMSUM", summary="exclusive / reverse like LiteRT")
def _cumsum(attrs, x, outs):
    ax = norm_axis(np.asarray(x[1]).reshape(-1)[0], x[0].ndim)
    v = np.flip(x[0], ax) if attrs.get("reverse") else x[0]
    c = np.cumsum(v, axis=ax, dtype=v.dtype)
    if attrs.get("exclusive"):
        c = c - v
    return [np.flip(c, ax) if attrs.get("reverse") else c]


def _check_topk(attrs, ins, outs):
    if len(ins) != 2 or len(outs) != 2:
        return "expects 2 inputs and 2 outputs"
    if ins[1].value is None:
        return "k must be a constant"
    k = int(np.asarray(ins[1].value).reshape(-1)[0])
    if not 0 <= k <= (ins[0].shape[-1] if ins[0].shape else 1) or tuple(outs[0].shape[-1:]) != (k,):
        return f"k={k} does not fit input {list(ins[0].shape)} / output {list(outs[0].shape)}"
    return None


@cpu_op("TOPK_V2", check=_check_topk, summary="top k of the last axis, ties to the lower index (LiteRT)")
def _topk(attrs, x, outs):
    k = int(np.asarray(x[1]).reshape(-1)[0])
    v = x[0]
    key = -v.astype(np.float64) if v.dtype.kind != "b" else -v.astype(np.int8)
    idx = np.argsort(key, axis=-1, kind="stable")[..., :k]
    return [np.take_along_axis(v, idx, axis=-1), idx.astype(outs[1].dtype)]


def _check_rfft2d(attrs, ins, outs):
    if len(ins) != 2 or ins[0].dtype != "float32" or outs[0].dtype != "complex64":
        return "expects float32 input, int32 fft_length, complex64 output"
    if ins[1].value is None:
        return "fft_length must be a constant"
    return None


@cpu_op("RFFT2D", check=_check_rfft2d, summary="2-D real FFT of the two innermost axes (complex64)")
def _rfft2d(attrs, x, outs):
    n = [int(v) for v in np.asarray(x[1]).reshape(-1)]
    r = np.fft.rfft2(x[0].astype(np.float64), s=n, axes=(-2, -1))
    return [r.astype(np.complex64)]



def _check_one_hot(attrs, ins, outs):
    if len(ins) != 4 or ins[1] is None or ins[1].value is None:
        return "depth must be a constant"
    return None


@cpu_op("ONE_HOT", check=_check_one_hot, summary="indices -> on/off values along `axis`")
def _one_hot(attrs, x, outs):
    idx, depth, on, off = x
    hot = np.expand_dims(idx, -1) == np.arange(int(np.asarray(depth).reshape(-1)[0]))
    r = np.where(hot, np.asarray(on).reshape(()), np.asarray(off).reshape(()))
    axis = int(attrs.get("axis", -1))
    return [r if axis == -1 else np.moveaxis(r, -1, norm_axis(axis, r.ndim))]


@cpu_op("RANK", raw=True, summary="the input's rank (folded at compile time)")
def _rank(attrs, x, outs):
    return [np.asarray(np.ndim(x[0]), np.int32)]


@cpu_op("BROADCAST_ARGS", summary="the broadcast of two shapes (fails on shapes that do not broadcast)")
def _broadcast_args(attrs, x, outs):
    a, b = ([int(v) for v in np.asarray(t).reshape(-1)] for t in x)
    if min(a + b, default=0) < 0:
        raise ValueError(f"BROADCAST_ARGS: negative dimension in {a} / {b}")
    try:
        return [np.asarray(np.broadcast_shapes(tuple(a), tuple(b)), x[0].dtype)]
    except ValueError:
        raise ValueError(f"BROADCAST_ARGS: shapes {a} and {b} do not broadcast") from None


def _check_bucketize(attrs, ins, outs):
    b = np.asarray(attrs.get("boundaries") or [], np.float32)
    if ins[0].dtype not in ("float32", "float64", "int32", "int64"):
        return f"LiteRT's BUCKETIZE refuses {ins[0].dtype}"
    return "boundaries are not sorted (LiteRT's Prepare fails)" if b.size and not np.all(b[:-1] <= b[1:]) else None


@cpu_op("BUCKETIZE", check=_check_bucketize, summary="std::upper_bound per element (int64 / float64 inputs)")
def _bucketize(attrs, x, outs):
    v = x[0].astype(np.float32) if x[0].dtype.kind in "iu" else x[0]       # (C++: int -> float, float -> double)
    b = np.asarray(attrs.get("boundaries") or [], np.float32).astype(v.dtype)
    return [np.searchsorted(b, v, side="right").astype(np.int32)]


CPU_OPS["COMPLEX_ABS"] = CpuOp(lambda a, x, o: [np.abs(x[0].astype(np.complex128))], _check_unary)
CPU_OPS["REAL"] = CpuOp(lambda a, x, o: [np.real(x[0])], _check_unary)
CPU_OPS["IMAG"] = CpuOp(lambda a, x, o: [np.imag(x[0])], _check_unary)
NUMERIC = NUMERIC + ("complex64",)


from gpuc.runtime import cpu_movement  # noqa: E402,F401  (registers the data-movement kernels)
from gpuc.runtime import cpu_reduce_window  # noqa: E402
from gpuc.runtime import cpu_lsh  # noqa: E402

CPU_OPS["REDUCE_WINDOW"] = CpuOp(cpu_reduce_window.kernel, cpu_reduce_window.check,
                                 summary="LiteRT's window fold (bool / int8 / int16 / int64 / uint8 / float64)")
CPU_OPS["LSH_PROJECTION"] = CpuOp(cpu_lsh.lsh_projection, cpu_lsh.check, raw=True,
                                  summary="farmhash Fingerprint64 of (seed, row bytes), signed sum in double")
