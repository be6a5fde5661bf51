"""The window plan and numpy kernel of REDUCE_WINDOW, with LiteRT's semantics (tensorflow/lite/kernels/
stablehlo_reduce_window.cc, shared by REDUCE_WINDOW and STABLEHLO_REDUCE_WINDOW, which the importer
turns into a REDUCE_WINDOW node with its attributes: compiler/ops/reduce_window.py).

The input is dilated by base_dilations (holes hold the init value), padded / cropped by padding
(negative: crop; pads hold the init value), then each output element folds init and its window's
elements (window_dimensions, window_strides, window_dilations) in row-major window order with the
reduce function: 1 ADD, 2 MUL, 3 MINIMUM (a <= b ? a : b), 4 MAXIMUM (a >= b ? a : b), 5 ALL, 6 ANY
(std::logical_and / or: 1 or 0 in the dtype).  Integers wrap in their dtype (bool computes as int8).
Numpy only (runtime/cpu_ops.py registers the kernel for the dtypes the GPU does not run).
"""
from __future__ import annotations

import numpy as np

FUNCTIONS = {1: "add", 2: "mul", 3: "minimum", 4: "maximum", 5: "all", 6: "any"}
MAX_RANK = 6
DTYPES = ("float32", "float64", "int8", "int16", "int32", "int64", "uint8", "bool")


def plan(attrs: dict, shape, consts: list | None = None) -> dict:
    """The window plan of a REDUCE_WINDOW node: window / strides / window and base dilations / padding
    lo and hi per dim, the dilated and output shapes.  `consts`: the values of inputs 2..4 (window
    shape, strides, dilations: the REDUCE_WINDOW form) or None (the StableHLO form's attributes)."""
    r = len(shape)
    if not 0 < r <= MAX_RANK:
        raise ValueError(f"input of rank {r} (LiteRT takes rank 1..{MAX_RANK})")
    fn = int(attrs.get("reduce_function") or 0)
    if fn not in FUNCTIONS:
        raise ValueError(f"reduce function {fn} is not one LiteRT runs (ADD, MUL, MINIMUM, MAXIMUM, ALL, ANY)")
    if consts is not None:
        win, st, wd = ([int(v) for v in np.asarray(c).reshape(-1)] for c in consts)
        bd, pad = [1] * r, [0] * (2 * r)
    else:
        def vec(name, default):
            v = attrs.get(name)
            return [int(a) for a in v] if v is not None and len(v) else default
        win, st, bd, wd = (vec(n, None if n == "window_dimensions" else [1] * r)
                           for n in ("window_dimensions", "window_strides", "base_dilations", "window_dilations"))
        pad = vec("padding", [0] * (2 * r))
        if win is None:
            raise ValueError("no window_dimensions")
    for name, v, n in (("window_dimensions", win, r), ("window_strides", st, r), ("base_dilations", bd, r),
                       ("window_dilations", wd, r), ("padding", pad, 2 * r)):
        if len(v) != n:
            raise ValueError(f"{name} has {len(v)} values for a rank-{r} input (expected {n})")
        if name != "padding" and any(a <= 0 for a in v):
            raise ValueError(f"{name} {v} must be positive (LiteRT's Prepare fails)")
    dil = [(n - 1) * b + 1 if n else 0 for n, b in zip(shape, bd)]
    padded = [d + pad[2 * k] + pad[2 * k + 1] for k, d in enumerate(dil)]
    if any(p <= 0 for p in padded) and any(pad):
        raise ValueError(f"padding {pad} gives an empty tensor (LiteRT's invoke fails)")
    dwin = [(w - 1) * d + 1 for w, d in zip(win, wd)]
    out = [0 if p < w else (p - w) // s + 1 for p, w, s in zip(padded, dwin, st)]
    return dict(fn=fn, win=win, strides=st, base=bd, wdil=wd, lo=pad[0::2], dilated=dil, out=out)


def _combine(fn, acc, v):
    if fn == 1:
        return acc + v
    if fn == 2:
        return acc * v
    if fn == 3:
        return np.where(acc <= v, acc, v)
    if fn == 4:
        return np.where(acc >= v, acc, v)
    both = (acc != 0) & (v != 0) if fn == 5 else (acc != 0) | (v != 0)
    return both.astype(acc.dtype)


def reduce_window(p: dict, x: np.ndarray, init) -> np.ndarray:
    """LiteRT's result (x of any DTYPES; bool computes as int8 and comes back as bool)."""
    is_bool = x.dtype == np.bool_
    x = x.astype(np.int8) if is_bool else x
    init = np.asarray(init).astype(x.dtype).reshape(())
    out = np.full(p["out"], init, x.dtype)
    with np.errstate(over="ignore", invalid="ignore"):
        for w in np.ndindex(*p["win"]):
            idx, ok = [], np.ones(p["out"], bool)
            for k, o in enumerate(p["out"]):
                q = np.arange(o) * p["strides"][k] + w[k] * p["wdil"][k] - p["lo"][k]
                good = (q >= 0) & (q < p["dilated"][k]) & (q % p["base"][k] == 0)
                shape = [1] * len(p["out"])
                shape[k] = o
                ok = ok & good.reshape(shape)
                idx.append(np.where(good, q // p["base"][k], 0).reshape(shape))
            v = np.where(ok, x[tuple(idx)] if x.size else init, init) if out.size else out
            out = _combine(p["fn"], out, v.astype(x.dtype)).astype(x.dtype)
    return out.astype(bool) if is_bool else out


def kernel(attrs, inputs, outs):
    x, init = inputs[0], inputs[1]
    consts = inputs[2:5] if len(inputs) == 5 else None
    return [reduce_window(plan(attrs, x.shape, consts), x, init)]


def check(attrs, ins, outs):
    if ins[0].dtype not in DTYPES:
        return f"LiteRT's kernel refuses {ins[0].dtype}"
    if len(ins) == 5 and any(s.value is None for s in ins[2:5]):
        return "window shape / strides / dilations are computed at run time (LiteRT needs them constant)"
    p = plan(attrs, ins[0].shape, [s.value for s in ins[2:5]] if len(ins) == 5 else None)
    return None if tuple(outs[0].shape) == tuple(p["out"]) else \
        f"output shape {list(outs[0].shape)} is not LiteRT's {p['out']}"
