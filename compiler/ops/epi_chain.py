"""A fused elementwise chain in a GEMM-like kernel's epilogue (Node.epilogue.chain, made by
passes/gemm_epilogue.py; shaders/epi_chain.glsl, called last by gemm.comp, depthwise.comp and
batch_matmul.comp).

The chain is ops/ew_fused.py's step list with operand ("x", 0) the kernel's own result v (after
bias, activation and residual) and ("x", k) chain input k - 1, bound as e<k> and read at the element
that broadcasting it to its step's output shape gives: every shape of the chain has the kernel
output's element count (elementwise ops on the output or on a RESHAPE view of it), so output element
o (linear index) is element o of each of them.
"""
from __future__ import annotations

import numpy as np

from gpuc.compiler.ops.ew_fused import MAX_INPUTS, Inputs, render_body, steps_reason
from gpuc.compiler.ops.util import broadcast_strides, size
from gpuc.compiler.symbolic import dim

MAX_CHAIN_INPUTS = MAX_INPUTS - 1       # e1..e6 (v0 is the kernel's result)


def index_expr(in_shape, out_shape) -> str:
    """GLSL int expression in `o` (the linear index of an element of out_shape) giving the element of
    a tensor of in_shape broadcast to out_shape.  Dimensions are merged into runs that are all
    broadcast or contiguous in the input, so a same-shape input reads o, a bias vector o % C."""
    st = broadcast_strides(tuple(in_shape), tuple(out_shape))
    runs, inner = [], 1                 # [elements inside the run, run length, input stride]
    for d in reversed(range(len(out_shape))):
        n, s = dim(out_shape[d]), dim(st[d])
        if n == 1:
            continue
        if runs and (runs[-1][2] == 0 and s == 0 or runs[-1][2] != 0 and s == runs[-1][2] * runs[-1][1]):
            runs[-1][1] *= n
        else:
            runs.append([inner, n, s])
        inner *= n
    terms = []
    for i, n, s in runs:
        if s == 0:
            continue
        e = "o" if i == 1 else f"o / {i}"
        if i * n != inner:
            e = f"({e}) % {n}"
        if s != 1:
            e = f"({e}) * {s}"
        terms.append(f"({e})")
    return " + ".join(terms) or "0"


def _slope(parts) -> int | None:
    """k when sum(digit_d * stride_d) == k * sum(digit_d * inner_d) for every digit (parts: (stride,
    inner) of the dims of one side of the row boundary), else None."""
    k = None
    for s, inner in parts:
        if s % inner or k is not None and s // inner != k:
            return None
        k = s // inner
    return 0 if k is None else k


def tile_access(in_shape, out_shape, ldc: int) -> tuple[int, int] | None:
    """How a chain input of in_shape (broadcast to out_shape) is read by the output element at row m,
    column c of the kernel output seen as rows of ldc elements (o = m * ldc + c), for the cooperative-
    matrix epilogue that loads it as a 16 x 16 matrix (gemm.comp cm_epilogue, EPI_CM / EPI_SR):
    (0, sr): element m * sr + c (sr 0: a row vector); (1, 0): element m (a column vector); (2, 0):
    element 0 throughout; None: the index is not one of these (that kernel then stages its tiles)."""
    if any(not isinstance(dim(d), int) for d in list(in_shape) + list(out_shape)):
        return None
    st = broadcast_strides(tuple(in_shape), tuple(out_shape))
    runs = []                           # (length, stride), innermost first, contiguous dims merged
    for n, s in reversed([(dim(n), dim(s)) for n, s in zip(out_shape, st) if dim(n) != 1]):
        if runs and s == runs[-1][1] * runs[-1][0]:
            runs[-1] = (runs[-1][0] * n, runs[-1][1])
        else:
            runs.append((n, s))
    col, row, inner = [], [], 1
    for n, s in runs:
        if inner >= ldc:
            row.append((s, inner // ldc))
        elif inner * n <= ldc:
            col.append((s, inner))
        elif ldc % inner == 0 and (inner * n) % ldc == 0:       # a dim across the row boundary: split it
            a = ldc // inner
            col.append((s, inner))
            row.append((s * a, 1))
        else:
            return None
        inner *= n
    if inner % ldc:
        return None
    sc, sr = _slope(col), _slope(row)
    if sc == 1 and sr is not None:
        return 0, sr
    if sc == 0 and sr == 1:
        return 1, 0
    if sc == 0 and sr == 0:
        return 2, 0
    return None


def chain_reason(graph, out_size: int, steps, inputs) -> str | None:
    """None when `steps` over `inputs` [(tensor, broadcast shape)] is a chain the kernels can compute
    for an output of out_size elements, else why not."""
    if len(inputs) > MAX_CHAIN_INPUTS:
        return f"{len(inputs)} chain inputs (at most {MAX_CHAIN_INPUTS})"
    for tid, shape in inputs:
        t = graph.t(tid)
        padded = [1] * (len(shape) - len(t.shape)) + list(t.shape)
        if len(t.shape) > len(shape) or any(p not in (1, o) for p, o in zip(padded, shape)):
            return f"chain input {t.name!r} {list(t.shape)} does not broadcast to {list(shape)}"
        if size(shape) != out_size:
            return f"chain step shape {list(shape)} is not {out_size} elements"
        if t.dtype != "float32" and not (t.is_const and np.dtype(t.dtype) == np.float32):
            return f"chain input {t.name!r} must be float32"
    if any(s.get("op") == "CAST" for s in steps or []):
        return "CAST in an epilogue chain"
    return steps_reason(Inputs([-1] + [t for t, _ in inputs], {"steps": steps}), graph)


def apply_chain(k, node, graph):
    """Add node.epilogue's chain (if any) to kernel `k` of a template that calls epi_chain (gemm,
    batch_matmul): its input bindings e1.., the index expressions and the rendered steps."""
    ep = node.epilogue
    if not ep.chain:
        return k
    body, result = render_body(ep.chain)
    d = dict(EPI_CHAIN=1, EPI_NIN=1 + len(ep.chain_inputs), EW_BODY=body, EW_RESULT=result,
             EPI_R16=int(ep.chain_r16), EW_ROUND16=int(ep.chain_r16 or any(s.get("r16") for s in ep.chain)))
    tiles = "LDC" in k.defines                # gemm: how the cooperative-matrix epilogue reads each input
    for j, (tid, shape) in enumerate(ep.chain_inputs, 1):
        k.bindings.append((f"e{j}", tid))
        d[f"EPI_IDX{j}"] = index_expr(graph.t(tid).shape, shape)
        if tiles:
            acc = tile_access(graph.t(tid).shape, shape, k.defines["LDC"])
            tiles = acc is not None and (acc[0] != 0 or acc[1] % 4 == 0)   # 16-byte aligned rows of float32
            if tiles:
                d[f"EPI_CM{j}"], d[f"EPI_SR{j}"] = acc
    if "LDC" in k.defines:
        d["EPI_TILE"] = int(tiles)
    k.defines.update(d)
    k.label = f"{k.label}+{'+'.join(s['op'] for s in ep.chain)}"
    return k


def sample_chain(nin: int) -> dict:
    """Defines of a chain using every input and every fusible op once (for `make shaders`)."""
    from gpuc.compiler.ops.ew_fused import sample_steps
    steps = sample_steps()
    for k in range(1, nin):             # then one ADD per chain input
        steps.append(dict(op="ADD", args=[("t", len(steps) - 1), ("x", k)], act=0, r16=k == 1))
    body, result = render_body(steps)
    d = dict(EPI_CHAIN=1, EPI_NIN=nin, EW_BODY=body, EW_RESULT=result, EW_ROUND16=1)
    d.update({f"EPI_IDX{k}": ["(o)", "(o % 6)", "0", "(((o / 6) % 3) * 2) + (o % 2)"][k % 4] for k in range(1, nin)})
    return d


EBIND = [f"e{k}" for k in range(1, MAX_INPUTS)]
_GEMM = dict(N=1, H=5, W=6, OH=3, OW=3, KW=3, SH=2, SW=2, DH=1, DW=1, PT=1, PL=1, GM=9, GN=6, GK=36, GROUPS=2,
             LDA=8, LDC=12, GNP=8, CIG=4, BM=8, BN=8, BK=8, TM=2, TN=2, TILES_M=2, TILES_N=1, NWG=4, VEC_A=0, B_T=1)
_DW = dict(N=1, H=5, W=6, OH=3, OW=3, KH=3, KW=3, SH=2, SW=2, DH=1, DW=1, PT=1, PL=1, CI=4, CO=8, MULT=2, CG=2, OXB=1,
           HAS_BIAS=1)
_CM = dict(_GEMM, COOPMAT=1, CM_WM=2, CM_WN=1, CM_TM=1, CM_TN=2, CM_SG=32, BM=32, BN=32, BK=32, KS=1, TM=1, TN=1,
           TILES_M=1, TILES_N=1, NWG=2)
# `make shaders`: gemm.comp (plain and cooperative-matrix paths), depthwise.comp (and batch_matmul.comp,
# ops/batch_matmul.py) with a chain of 1 and 7 operands (every input binding used once)
VARIANTS = {}
for _n in (1, MAX_INPUTS):
    VARIANTS[f"gemm:chain{_n}"] = (
        dict(_GEMM, **sample_chain(_n)), {"IM2COL": [0, 1], "KS": [1, 2], "HAS_BIAS": [0, 1], "RESIDUAL": [0, 1],
                                     "ACT": [0, 3], "EPI_R16": [0, 1]},
        ["out_", "x", "w", "bias", "res"] + EBIND[:_n - 1], {},
        lambda d: dict(local_x=(d["BM"] // d["TM"]) * (d["BN"] // d["TN"]) * d["KS"]))
    VARIANTS[f"gemm:coopmat_chain{_n}"] = (      # (register epilogue: chain inputs as row, column, element)
        dict(_CM, **sample_chain(_n), EPI_TILE=1, **{f"EPI_CM{k}": (k - 1) % 3 for k in range(1, _n)},
             **{f"EPI_SR{k}": 0 for k in range(1, _n)}),
        {"IM2COL": [0, 1], "RESIDUAL": [0, 1], "CM_EMULATE": [0, 1], "CM_DIRECT": [0, 1]},
        ["out_", "x", "w", "bias", "res"] + EBIND[:_n - 1], {"x": "float16", "w": "float16"},
        lambda d: dict(local_x=d["CM_WM"] * d["CM_WN"] * d["CM_SG"]))
    VARIANTS[f"depthwise:chain{_n}"] = (
        dict(_DW, **sample_chain(_n)), {"VEC": [0, 1], "PX": [1, 3], "RESIDUAL": [0, 1], "EPI_R16": [0, 1]},
        ["out_", "x", "w", "bias", "res"] + EBIND[:_n - 1], {},
        lambda d: dict(vec4=("out_", "x", "w", "bias", "res") if d["VEC"] else ()))
    VARIANTS[f"depthwise:tile_chain{_n}"] = (
        dict(_DW, **sample_chain(_n), TILE=1, RY=2, OYB=2), {"VEC": [0, 1], "WREG": [0, 1], "PX": [1, 3],
                                                        "RESIDUAL": [0, 1], "EPI_R16": [0, 1]},
        ["out_", "x", "w", "bias", "res"] + EBIND[:_n - 1], {},
        lambda d: dict(vec4=("out_", "x", "w", "bias", "res") if d["VEC"] else ()))
