"""Differential fuzzing against LiteRT: seeded random chains of 2..6 float32 ops (elementwise with broadcast
operands and fused activations, movement, reductions, softmax, FC, and convolutions / pooling / resizes on
4-d values, and the steps of scripts/fuzz_chains_more.py: matmuls, transposed convolutions, packing and
splitting, comparisons and selects, cumulative sums, space/batch moves, ARG_MAX ...), built as .tflite
models with the test builder and run on LiteRT's builtin kernels and on gpuc (fp32, the default device).  The chains reach the passes that fold movement, fuse elementwise ops and
epilogues and pick layouts, which one-op tests do not.

    python scripts/fuzz_chains.py [--cases N] [--seed S] [--precision fp32|fp16|int8] [--keep DIR] [--timeout SECONDS]

A case passes when gpuc's outputs match LiteRT's (dtype, shape; float32 within rtol 1e-4 and atol
1e-5 x max(1, max|ref|), NaN where LiteRT has NaN) with either of LiteRT's interpreters (the builtin kernels or the default one,
XNNPACK: they differ, e.g. the builtin kernels clamp +-Inf to +-FLT_MAX), or when both refuse the model (gpuc with a one-line
GpucError).  Anything else is a failure: a mismatch, a traceback, a multi-line message, gpuc running a model
LiteRT refuses, or gpuc refusing one LiteRT runs (reported apart: an unsupported combination, not
necessarily a bug).  Failures are printed with their case number; --keep writes their models.  Case i is
rebuilt from numpy.random.default_rng([seed, i]) alone (`case(seed, i)`).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import signal
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from helpers.builder import ModelBuilder  # noqa: E402

import fuzz_chains_more  # noqa: E402  (scripts/ is on sys.path: this file's folder)

ACTS = ("NONE", "RELU", "RELU6", "RELU_N1_TO_1")
UNARY = ("ABS", "NEG", "EXP", "LOGISTIC", "TANH", "RELU", "RELU6", "RELU_N1_TO_1", "HARD_SWISH", "SQUARE",
         "FLOOR", "CEIL", "ROUND", "SIN", "COS", "GELU", "ELU", "LEAKY_RELU", "SIGN")
POSITIVE = ("SQRT", "RSQRT", "LOG")               # on abs(x) + 0.5
BINARY = ("ADD", "SUB", "MUL", "DIV", "MAXIMUM", "MINIMUM", "SQUARED_DIFFERENCE")
REDUCE = ("MEAN", "SUM", "REDUCE_MAX", "REDUCE_MIN")
MAX_ELEMS = 4096
FP16_TOL = (2e-2, 2e-2)     # --precision fp16: rtol, atol x max(1, max|ref|)
# fused activations on CONCATENATION (off: gpuc runs them as their activation applied, which LiteRT's builtin kernel
# refuses and its XNNPACK delegate ignores; FUZZ_CONCAT_ACT=1 puts them in)
CONCAT_ACT = os.environ.get("FUZZ_CONCAT_ACT") == "1"


class Chain:
    """The model being built: the current value (tensor id, shape) and a counter for names."""

    def __init__(self, rng):
        self.rng, self.mb, self.n, self.feeds = rng, ModelBuilder(), 0, []

    def name(self, stem: str) -> str:
        self.n += 1
        return f"{stem}{self.n}"

    def t(self, shape, dtype="float32") -> int:
        return self.mb.tensor(self.name("t"), list(shape), dtype)

    def const(self, array) -> int:
        return self.mb.const(self.name("c"), np.asarray(array))

    def input(self, shape) -> int:
        x = self.rng.uniform(-2, 2, shape).astype(np.float32)
        self.feeds.append(x)
        return self.mb.input(self.name("x"), list(shape), "float32")

    def uniform(self, shape, lo=-1.0, hi=1.0):
        return self.rng.uniform(lo, hi, shape).astype(np.float32)

    def pick(self, seq):
        return seq[int(self.rng.integers(len(seq)))]

    def away_from_zero(self, x, shape) -> int:
        """abs(x) + 0.5: an operand for ops defined on positive values (SQRT, LOG, a divisor, POW's base)."""
        a = self.t(shape)
        self.mb.op("ABS", [x], [a])
        b = self.t(shape)
        self.mb.op("ADD", [a, self.const(np.full([1] * len(shape), 0.5, np.float32))], [b], fused_activation_function="NONE")
        return b


def _unary(c: Chain, x, shape):
    op = c.pick(UNARY + POSITIVE)
    if op in POSITIVE:
        x = c.away_from_zero(x, shape)
    y = c.t(shape)
    opts = {"alpha": float(c.rng.uniform(0.01, 0.5))} if op == "LEAKY_RELU" else {}
    if op == "GELU":
        opts = {"approximate": bool(c.rng.integers(2))}
    c.mb.op(op, [x], [y], **opts)
    return y, shape


def _other_shape(c: Chain, shape):
    """A shape broadcastable against `shape`: some dims set to 1, maybe fewer leading dims."""
    s = [d if c.rng.random() < 0.6 else 1 for d in shape]
    drop = int(c.rng.integers(0, len(s) + 1)) if c.rng.random() < 0.4 else 0
    return s[drop:]


def _binary(c: Chain, x, shape):
    op = c.pick(BINARY)
    os_ = _other_shape(c, shape)
    if c.rng.random() < 0.6:
        v = c.uniform(os_, 0.5, 2.0) * np.where(c.rng.random(os_) < 0.5, -1, 1).astype(np.float32)
        other = c.const(v if op == "DIV" else c.uniform(os_))
    else:
        other = c.input(os_)
        if op == "DIV":                                   # a divisor away from zero
            other = c.away_from_zero(other, os_)
    ins = [other, x] if c.rng.random() < 0.3 else [x, other]
    out = list(np.broadcast_shapes(tuple(shape), tuple(os_)))
    y = c.t(out)
    opts = {"fused_activation_function": c.pick(ACTS)} if op in ("ADD", "SUB", "MUL", "DIV") else {}
    c.mb.op(op, ins, [y], **opts)
    return y, out


def _reshape(c: Chain, x, shape):
    size = int(np.prod(shape))
    dims, left = [], size
    for _ in range(int(c.rng.integers(1, 5)) - 1):
        divs = [d for d in range(1, left + 1) if left % d == 0]
        d = c.pick(divs)
        dims.append(d)
        left //= d
    dims.append(left)
    c.rng.shuffle(dims)
    y = c.t(dims)
    c.mb.op("RESHAPE", [x, c.const(np.array(dims, np.int32))], [y])
    return y, dims


def _transpose(c: Chain, x, shape):
    perm = [int(p) for p in c.rng.permutation(len(shape))]
    out = [shape[p] for p in perm]
    y = c.t(out)
    c.mb.op("TRANSPOSE", [x, c.const(np.array(perm, np.int32))], [y])
    return y, out


def _concat(c: Chain, x, shape):
    axis = int(c.rng.integers(len(shape)))
    os_ = list(shape)
    os_[axis] = int(c.rng.integers(1, 4))
    other = c.const(c.uniform(os_)) if c.rng.random() < 0.5 else c.input(os_)
    ins = [x, other] if c.rng.random() < 0.5 else [other, x]
    out = list(shape)
    out[axis] += os_[axis]
    y = c.t(out)
    act = c.pick(ACTS)
    c.mb.op("CONCATENATION", ins, [y], axis=axis - (len(shape) if c.rng.random() < 0.3 else 0),
            fused_activation_function=act if CONCAT_ACT else "NONE")
    return y, out


def _pad(c: Chain, x, shape):
    pads = c.rng.integers(0, 3, (len(shape), 2)).astype(np.int32)
    out = [d + int(p.sum()) for d, p in zip(shape, pads)]
    y = c.t(out)
    if c.rng.random() < 0.5:
        c.mb.op("PAD", [x, c.const(pads)], [y])
    else:
        c.mb.op("PADV2", [x, c.const(pads), c.const(np.array(c.rng.uniform(-1, 1), np.float32))], [y])
    return y, out


def _slice(c: Chain, x, shape):
    begin = [int(c.rng.integers(0, d)) for d in shape]
    size = [int(c.rng.integers(1, d - b + 1)) for d, b in zip(shape, begin)]
    if c.rng.random() < 0.5:
        y = c.t(size)
        c.mb.op("SLICE", [x, c.const(np.array(begin, np.int32)), c.const(np.array(size, np.int32))], [y])
        return y, size
    strides = [int(c.rng.integers(1, 3)) for _ in shape]
    end = [b + s for b, s in zip(begin, size)]
    out = [-(-(e - b) // s) for b, e, s in zip(begin, end, strides)]
    y = c.t(out)
    c.mb.op("STRIDED_SLICE", [x, c.const(np.array(begin, np.int32)), c.const(np.array(end, np.int32)),
                              c.const(np.array(strides, np.int32))], [y], begin_mask=0, end_mask=0,
            ellipsis_mask=0, new_axis_mask=0, shrink_axis_mask=0)
    return y, out


def _gather(c: Chain, x, shape):
    axis = int(c.rng.integers(len(shape)))
    n = int(c.rng.integers(1, 5))
    idx = c.rng.integers(0, shape[axis], n).astype(np.int32)
    out = list(shape[:axis]) + [n] + list(shape[axis + 1:])
    y = c.t(out)
    c.mb.op("GATHER", [x, c.const(idx)], [y], axis=axis, batch_dims=0)
    return y, out


def _tile(c: Chain, x, shape):
    mult = [int(c.rng.integers(1, 3)) for _ in shape]
    out = [d * m for d, m in zip(shape, mult)]
    if int(np.prod(out)) > MAX_ELEMS:
        return None
    y = c.t(out)
    c.mb.op("TILE", [x, c.const(np.array(mult, np.int32))], [y])
    return y, out


def _reduce(c: Chain, x, shape):
    op = c.pick(REDUCE)
    k = int(c.rng.integers(1, len(shape) + 1))
    axes = sorted(int(a) for a in c.rng.choice(len(shape), k, replace=False))
    keep = bool(c.rng.integers(2))
    out = [1 if i in axes else d for i, d in enumerate(shape)] if keep else \
        [d for i, d in enumerate(shape) if i not in axes]
    if not out:
        out = []
    y = c.t(out)
    given = [a - len(shape) if c.rng.random() < 0.3 else a for a in axes]
    c.mb.op(op, [x, c.const(np.array(given, np.int32))], [y], keep_dims=keep)
    return y, out


def _softmax(c: Chain, x, shape):
    y = c.t(shape)
    if c.rng.random() < 0.7:
        c.mb.op("SOFTMAX", [x], [y], beta=float(c.rng.uniform(0.5, 2.0)))
    else:
        c.mb.op("LOG_SOFTMAX", [x], [y])
    return y, shape


def _fc(c: Chain, x, shape):
    k = shape[-1]
    n = int(c.rng.integers(1, 17))
    keep = bool(c.rng.integers(2)) and len(shape) > 1
    rows = int(np.prod(shape[:-1])) if shape[:-1] else 1
    out = list(shape[:-1]) + [n] if keep else [rows, n]
    ins = [x, c.const(c.uniform([n, k]))] + ([c.const(c.uniform([n]))] if c.rng.random() < 0.6 else [-1])
    y = c.t(out)
    c.mb.op("FULLY_CONNECTED", ins, [y], fused_activation_function=c.pick(ACTS), keep_num_dims=keep)
    return y, out


def _conv_out(size, k, s, d, same):
    eff = (k - 1) * d + 1
    return -(-size // s) if same else (size - eff) // s + 1


def _conv(c: Chain, x, shape):
    if len(shape) != 4:
        return None
    n, h, w, ci = shape
    kh, kw = int(c.rng.integers(1, 4)), int(c.rng.integers(1, 4))
    s, d = int(c.rng.integers(1, 3)), int(c.rng.integers(1, 3)) if c.rng.random() < 0.3 else 1
    same = bool(c.rng.integers(2))
    oh, ow = _conv_out(h, kh, s, d, same), _conv_out(w, kw, s, d, same)
    if oh < 1 or ow < 1:
        return None
    depthwise = c.rng.random() < 0.4
    opts = dict(padding="SAME" if same else "VALID", stride_w=s, stride_h=s, dilation_wfactor=d,
                dilation_hfactor=d, fused_activation_function=c.pick(ACTS))
    if depthwise:
        m = int(c.rng.integers(1, 3))
        co = ci * m
        wt = c.uniform([1, kh, kw, co])
        opts["depth_multiplier"] = m
    else:
        co = int(c.rng.integers(1, 9))
        wt = c.uniform([co, kh, kw, ci])
    bias = c.const(c.uniform([co]))          # (gpuc runs bias-less convolutions as zero-bias ones; LiteRT refuses them)
    out = [n, oh, ow, co]
    y = c.t(out)
    c.mb.op("DEPTHWISE_CONV_2D" if depthwise else "CONV_2D", [x, c.const(wt), bias], [y], **opts)
    return y, out


def _pool(c: Chain, x, shape):
    if len(shape) != 4:
        return None
    n, h, w, ch = shape
    f, s = int(c.rng.integers(1, 4)), int(c.rng.integers(1, 3))
    same = bool(c.rng.integers(2))
    oh, ow = _conv_out(h, f, s, 1, same), _conv_out(w, f, s, 1, same)
    if oh < 1 or ow < 1:
        return None
    out = [n, oh, ow, ch]
    y = c.t(out)
    c.mb.op(c.pick(("AVERAGE_POOL_2D", "MAX_POOL_2D")), [x], [y], padding="SAME" if same else "VALID",
            stride_w=s, stride_h=s, filter_width=f, filter_height=f, fused_activation_function=c.pick(ACTS))
    return y, out


def _resize(c: Chain, x, shape):
    if len(shape) != 4:
        return None
    n, h, w, ch = shape
    oh, ow = int(c.rng.integers(1, 2 * h + 2)), int(c.rng.integers(1, 2 * w + 2))
    if n * oh * ow * ch > MAX_ELEMS:
        return None
    out = [n, oh, ow, ch]
    y = c.t(out)
    align = bool(c.rng.integers(2))
    half = not align and bool(c.rng.integers(2))
    c.mb.op(c.pick(("RESIZE_BILINEAR", "RESIZE_NEAREST_NEIGHBOR")), [x, c.const(np.array([oh, ow], np.int32))],
            [y], align_corners=align, half_pixel_centers=half)
    return y, out


def _space_depth(c: Chain, x, shape):
    if len(shape) != 4:
        return None
    n, h, w, ch = shape
    if h % 2 == 0 and w % 2 == 0 and c.rng.random() < 0.5:
        out = [n, h // 2, w // 2, ch * 4]
        op = "SPACE_TO_DEPTH"
    elif ch % 4 == 0:
        out = [n, h * 2, w * 2, ch // 4]
        op = "DEPTH_TO_SPACE"
    else:
        return None
    y = c.t(out)
    c.mb.op(op, [x], [y], block_size=2)
    return y, out


def _l2norm(c: Chain, x, shape):
    y = c.t(shape)
    c.mb.op("L2_NORMALIZATION", [x], [y], fused_activation_function="NONE")
    return y, shape


STEPS = [(_unary, 4), (_binary, 5), (_reshape, 2), (_transpose, 2), (_concat, 2), (_pad, 2), (_slice, 2),
         (_gather, 1), (_tile, 1), (_reduce, 2), (_softmax, 1), (_fc, 2), (_conv, 3), (_pool, 2), (_resize, 1),
         (_space_depth, 1), (_l2norm, 1)] + fuzz_chains_more.STEPS
TERMINAL = {fuzz_chains_more.argmax_step}       # steps whose int32 value ends the chain
_W = np.array([w for _, w in STEPS], float)


def case(seed: int, i: int) -> tuple[bytes, list]:
    """(model, feeds) of case i."""
    rng = np.random.default_rng([seed, i])
    c = Chain(rng)
    rank = int(rng.choice([1, 2, 3, 4, 4, 4]))
    shape = [int(rng.integers(1, 3))] + [int(rng.integers(1, 9)) for _ in range(rank - 1)] if rank > 1 \
        else [int(rng.integers(1, 17))]
    x = c.input(shape)
    steps = int(rng.integers(2, 7))
    done = 0
    for _ in range(steps * 4):
        if done == steps:
            break
        fn = STEPS[int(rng.choice(len(STEPS), p=_W / _W.sum()))][0]
        r = fn(c, x, shape)
        if r is None or not r[1] or int(np.prod(r[1])) > MAX_ELEMS or 0 in r[1]:
            if r is not None and r[1] == []:          # a scalar: end the chain there
                x, shape = r
                break
            continue
        x, shape = r
        done += 1
        if fn in TERMINAL:
            break
    c.mb.output(x)
    return c.mb.finish(), c.feeds


def compare(outs, refs, rtol: float = 1e-4, atol: float = 1e-5) -> str | None:
    if len(outs) != len(refs):
        return f"{len(outs)} outputs, LiteRT {len(refs)}"
    for k, (o, r) in enumerate(zip(outs, refs)):
        if o.dtype != r.dtype or o.shape != r.shape:
            return f"output {k}: {o.dtype}{list(o.shape)}, LiteRT {r.dtype}{list(r.shape)}"
        if r.dtype.kind != "f":
            if not np.array_equal(o, r):
                return f"output {k}: differs"
            continue
        nan = np.isnan(r)
        if not np.array_equal(nan, np.isnan(o)):
            return f"output {k}: NaN at other places"
        fin = np.abs(r[np.isfinite(r)])
        tol = atol * max(1.0, float(fin.max(initial=0.0)))
        bad = ~nan & ~(np.abs(o - r) <= tol + rtol * np.abs(r)) & ~((o == r) & np.isinf(r))
        if bad.any():
            j = int(np.flatnonzero(bad)[0])
            return (f"output {k}: {int(bad.sum())} of {r.size} differ, max |diff| "
                    f"{float(np.nanmax(np.abs(o - r)[bad])):.3g}, first at {j}: {o.flat[j]!r} vs {r.flat[j]!r}")
    return None


def build(seed: int, i: int, precision: str = "fp32") -> tuple[bytes, list, float | None]:
    """(model, feeds, output scale or None) of case i: the int8 chains of scripts/fuzz_chains_int8.py under
    precision int8, else the float chains."""
    if precision == "int8":
        import fuzz_chains_int8          # (here: it imports this module)
        return fuzz_chains_int8.case(seed, i)
    return (*case(seed, i), None)


def run_case(seed: int, i: int, precision: str = "fp32") -> tuple[str, str]:
    """(verdict, detail): verdict one of ok, both_refuse, fail, gpuc_refuses.  precision fp16: gpuc's
    --precision fp16 against the float32 references, within FP16_TOL (relative and x max|ref|); int8: the int8
    chains, on LiteRT's quantization steps exactly."""
    import gpuc
    import fuzz_chains_int8
    from gpuc.errors import GpucError
    from helpers.litert import run_litert

    model, feeds, scale = build(seed, i, precision)
    refs, lite_err = [], None
    for default in (False, True):          # builtin kernels, and the default (XNNPACK) interpreter
        try:
            refs.append(run_litert(model, [f.copy() for f in feeds], default=default))
        except Exception as e:  # noqa: BLE001
            lite_err = lite_err or f"{type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''}"
    refs = refs or None
    try:
        with gpuc.load(gpuc.compile(model, cache=False, precision="fp32" if precision == "int8" else precision)) as m:
            outs = list(m.run([f.copy() for f in feeds]))
    except GpucError as e:
        msg = str(e)
        if "\n" in msg or not msg:
            return "fail", f"multi-line or empty message: {msg[:300]!r}"
        return ("both_refuse", msg[:200]) if refs is None else ("gpuc_refuses", msg[:200])
    except Exception as e:  # noqa: BLE001
        import traceback
        return "fail", f"{type(e).__name__}: {e} | {traceback.format_exc().splitlines()[-3][:200]}"
    if refs is None:
        return "fail", f"gpuc ran a model LiteRT refuses ({lite_err})"
    if precision == "int8":
        bads = [fuzz_chains_int8.compare(outs, r, scale) for r in refs]      # exact, with either interpreter
    else:
        tol = FP16_TOL if precision == "fp16" else (1e-4, 1e-5)
        bads = [compare(outs, r, *tol) for r in refs]      # equal to either interpreter's outputs
    return ("ok", "") if None in bads else ("fail", bads[0])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=500)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--start", type=int, default=0)
    ap.add_argument("--keep", type=Path)
    ap.add_argument("--timeout", type=int, default=60)
    ap.add_argument("--precision", default="fp32", choices=("fp32", "fp16", "int8"))
    a = ap.parse_args()

    def on_alarm(*_):
        raise TimeoutError

    signal.signal(signal.SIGALRM, on_alarm)
    counts, failures, refusals = {}, [], {}
    t0 = time.time()
    for i in range(a.start, a.start + a.cases):
        signal.alarm(a.timeout)
        try:
            verdict, detail = run_case(a.seed, i, a.precision)
        except TimeoutError:
            verdict, detail = "fail", "hang (timeout)"
        finally:
            signal.alarm(0)
        counts[verdict] = counts.get(verdict, 0) + 1
        if verdict == "fail":
            failures.append((i, detail))
            print(f"FAIL case {i}: {detail}", flush=True)
            if a.keep:
                a.keep.mkdir(parents=True, exist_ok=True)
                (a.keep / f"chain_{a.seed}_{i}.tflite").write_bytes(build(a.seed, i, a.precision)[0])
        elif verdict == "gpuc_refuses":
            key = re.sub(r"^unsupported model: \d+ operator\(s\) cannot run on the GPU: ", "", detail)
            key = re.sub(r" \(operator #\d+\)", "", key)[:90]
            refusals[key] = refusals.get(key, 0) + 1
        if (i - a.start + 1) % 100 == 0:
            print(f"  {i - a.start + 1}/{a.cases} cases, {counts}", flush=True)
    print(json.dumps({"seed": a.seed, "cases": a.cases, "counts": counts, "gpuc_refuses": refusals,
                      "failures": failures, "seconds": round(time.time() - t0, 1)}, indent=1))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
