"""BATCH_MATMUL (float32): adj_x / adj_y, numpy-broadcast batch dims, ranks 2..5 (LiteRT's limit),
constant or runtime operands.

A constant RHS without batch (all its batch dims 1) and no adj_x is a FULLY_CONNECTED over the LHS
rows: it goes through the tiled gemm (compiler/ops/conv.py gemm_kernels, weights re-laid out at
compile time).  Everything else runs shaders/batch_matmul.comp, which reads both operands through
strides (adjoint = swapped strides, broadcast batch dims = stride 0).  Either kernel computes a fused
elementwise chain on its output last (Node.epilogue.chain: passes/gemm_epilogue.py, ops/epi_chain.py)."""
from __future__ import annotations

import numpy as np

from gpuc.compiler.codegen.kernel import Kernel
from gpuc.compiler import sym_shapes as D
from gpuc.compiler.ops import NEUTRAL, SHAPE_ONLY, Why, declare, register, rules, template
from gpuc.compiler.ops.conv import float_const, gemm_kernels
from gpuc.compiler.ops.epi_chain import EBIND, apply_chain, sample_chain
from gpuc.compiler.ops.step_chunks import in_chunks
from gpuc.compiler.ops.util import broadcast_strides, checked, size
from gpuc.compiler.symbolic import hint

MAX_RANK = 5

VARIANTS = {
    "batch_matmul": (dict(M=5, N=6, K=7, NB=2, OUT_BATCH=[2, 3], A_BSTR=[0, 35], B_BSTR=[42, 0], A_SM=7, A_SK=1,
                          B_SK=6, B_SN=1, BM=16, BN=16, BK=16, TM=2, TN=2, TILES_M=1, TILES_N=1, NWG=6,
                          D=4, H=5, W=6, CI=3, OD=2, OH=3, OW=3, KH=3, KW=3, SD=2, SH=2, SW=2, DD=1, DH=1, DW=1,
                          PF=0, PT=1, PL=1),
                     {"A_KFAST": [0, 1], "B_NFAST": [0, 1], "IM2COL": [0, 1], "EPILOGUE": [0, 1],
                      "HAS_BIAS": [0, 1], "ACT": [0, 1, 2, 3, 7]}, ["out_", "a", "b", "bias"], {},
                     lambda d: dict(local_x=(d["BM"] // d["TM"]) * (d["BN"] // d["TN"]))),
}
for _n in (1, 7):       # a fused elementwise chain (ops/epi_chain.py) of 1 and 7 operands
    VARIANTS[f"batch_matmul:chain{_n}"] = (dict(VARIANTS["batch_matmul"][0], **sample_chain(_n)),
                                          {"A_KFAST": [0, 1], "B_NFAST": [0, 1], "EPI_R16": [0, 1]},
                                          ["out_", "a", "b"] + EBIND[:_n - 1], {},
                                          VARIANTS["batch_matmul"][4])
VARIANTS["batch_matmul:chunked"] = (dict(VARIANTS["batch_matmul"][0], CHUNKED=1),   # (in_k_chunks)
                                   {"A_KFAST": [0, 1], "IM2COL": [0, 1], "EPILOGUE": [0, 1], "HAS_BIAS": [0, 1]},
                                   ["out_", "a", "b", "bias", "steps", "ps"], {"steps": "int32"},
                                   lambda d: dict(VARIANTS["batch_matmul"][4](d), rw=("ps",)))


def _plan(node, graph):
    a, b, y = graph.t(node.inputs[0]), graph.t(node.inputs[1]), graph.t(node.outputs[0])
    for t in (a, b, y):
        if t.dtype != "float32" and not (t.is_const and np.dtype(t.dtype).kind == "f"):
            raise ValueError(f"tensor {t.name!r} has dtype {t.dtype} (float32 only)")
    if not (2 <= len(a.shape) <= MAX_RANK and 2 <= len(b.shape) <= MAX_RANK):
        raise ValueError(f"operand ranks {len(a.shape)} and {len(b.shape)} must be 2..{MAX_RANK}")
    adj_x, adj_y = bool(node.attrs.get("adj_x", False)), bool(node.attrs.get("adj_y", False))
    m, k = (a.shape[-1], a.shape[-2]) if adj_x else (a.shape[-2], a.shape[-1])
    kb, n = (b.shape[-1], b.shape[-2]) if adj_y else (b.shape[-2], b.shape[-1])
    if k != kb:
        raise ValueError(f"inner dimensions differ: {list(a.shape)} (adj_x={adj_x}) x {list(b.shape)} (adj_y={adj_y})")
    try:
        batch = list(np.broadcast_shapes(tuple(a.shape[:-2]), tuple(b.shape[:-2])))
    except ValueError:
        raise ValueError(f"batch dims of {list(a.shape)} and {list(b.shape)} do not broadcast") from None
    if k == 0:
        raise ValueError("empty inner dimension")
    if list(y.shape) != batch + [m, n]:
        raise ValueError(f"output {y.name!r} has shape {list(y.shape)}, expected {batch + [m, n]}")
    return a, b, y, adj_x, adj_y, m, n, k, batch


def _pow2_at_least(v: int, cap: int) -> int:
    b = 1
    while b < min(v, cap):
        b *= 2
    return b


def plan_tiles(m: int, n: int) -> tuple[int, int, int, int]:
    """(BM, BN, TM, TN): up to 64 x 64 output tiles, at most 16 x 16 invocations each computing a
    TM x TN block; a short M (matrix-vector shapes) widens the tile along N (up to 256) so that a
    workgroup still has up to 256 invocations."""
    bm = _pow2_at_least(m, 64)
    tm = max(1, bm // 16)
    rows = bm // tm                                        # invocations along M (<= 16)
    bn = _pow2_at_least(n, max(64, 256 // rows))
    tn = max(1, bn // (256 // rows))
    return bm, bn, tm, tn


@register("BATCH_MATMUL", check=checked(lambda n, g: _plan(n, g) and None), inputs=(2, 2),
          summary="adj_x/adj_y, broadcast batch dims, rank 2..5; constant RHS -> tiled gemm")
def lower_batch_matmul(node, graph):
    a, b, y, adj_x, adj_y, m, n, k, batch = _plan(node, graph)
    if y.size == 0:
        return []
    if float_const(graph, b.id) and not adj_x and all(d == 1 for d in b.shape[:-2]):
        w = np.asarray(b.data, np.float32).reshape(b.shape[-2:])
        w_kn = (w.T if adj_y else w)[None]                      # [1, K, N]
        return gemm_kernels(node, graph, M=size(batch) * m, GN=n, GK=k, G=1, lda=k, ldc=n, w_id=b.id,
                            w_kn=np.ascontiguousarray(w_kn), bias=None, conv=None, ignore=())
    a_id, b_id = a.id, b.id
    for i, t in ((0, a), (1, b)):                               # fp16 constants: float32 copies
        if t.is_const and t.dtype != "float32":
            new = graph.add_const(f"{t.name}/f32", np.asarray(t.data, np.float32))
            a_id, b_id = (new, b_id) if i == 0 else (a_id, new)
    a_b = broadcast_strides(tuple(a.shape[:-2]), tuple(batch)) if batch else [0]
    b_b = broadcast_strides(tuple(b.shape[:-2]), tuple(batch)) if batch else [0]
    am = m * k                                                  # matrix sizes: batch strides scale by them
    a_b = [s * am for s in a_b]
    b_b = [s * k * n for s in b_b]
    a_sm, a_sk = (1, m) if adj_x else (k, 1)
    b_sk, b_sn = (1, k) if adj_y else (n, 1)
    return in_k_chunks(apply_chain(matmul_kernel(node, [("out_", y.id), ("a", a_id), ("b", b_id)], m=m, n=n, k=k,
                                                 batch=batch, a_b=a_b, b_b=b_b, a_sm=a_sm, a_sk=a_sk, b_sk=b_sk,
                                                 b_sn=b_sn), node, graph), graph)


def in_k_chunks(k: Kernel, graph) -> list:
    """`k` (a batch_matmul dispatch), or one dispatch a chunk of K where an invocation's loops would pass
    step_chunks.LOOP_BUDGET (each BK-deep step loads its share of the two tiles: many passes where a small tile has few
    invocations; [1, 70,000] x [70,000, 3] was wrong on lavapipe), the partial sums kept in a float32 tensor."""
    d = k.defines
    nt = (d["BM"] // d["TM"]) * (d["BN"] // d["TN"])
    per_step = 1 + -(-d["BK"] * d["BM"] // nt) + -(-d["BK"] * d["BN"] // nt)
    return in_chunks(k, graph, per_step, "K", unit=d["BK"], scratch=("ps", [size(d["OUT_BATCH"]) * d["M"] * d["N"]]))


def matmul_kernel(node, binds, *, m, n, k, batch=(), a_b=(0,), b_b=(0,), a_sm, a_sk, b_sk, b_sn, extra=None) -> Kernel:
    """One `batch_matmul` dispatch (also CONV_3D's implicit GEMM: `extra` holds its IM2COL geometry
    and epilogue defines, `binds` its bias)."""
    bm, bn, tm, tn = plan_tiles(hint(m), hint(n))     # (speed only: a dynamic size plans for its bound)
    tiles_m, tiles_n = -(-m // bm), -(-n // bn)
    nwg = tiles_m * tiles_n * size(batch)
    threads = (bm // tm) * (bn // tn)
    defines = dict(M=m, N=n, K=k, NB=max(len(batch), 1), OUT_BATCH=list(batch) or [1], A_BSTR=list(a_b),
                   B_BSTR=list(b_b), A_SM=a_sm, A_SK=a_sk, B_SK=b_sk, B_SN=b_sn, A_KFAST=int(a_sk == 1),
                   B_NFAST=int(b_sn == 1), BM=bm, BN=bn, BK=16, TM=tm, TN=tn, TILES_M=tiles_m, TILES_N=tiles_n,
                   NWG=nwg, **(extra or {}))
    # the flat workgroup index is (batch, row tile, column tile): item-major in units of a row of tiles
    return Kernel("batch_matmul", binds, nwg * threads, defines, node.label(), local_x=threads, item_inner=tiles_n)


# --- facts (compiler/ops/__init__.py FACT_FIELDS) ---------------------------------------------------
def _sym(node, graph, values=None):
    x, y = D.in_shapes(node, graph)[:2]
    ax, ay = bool(node.attrs.get("adj_x")), bool(node.attrs.get("adj_y"))
    m = x[-1] if ax else x[-2]
    n = y[-2] if ay else y[-1]
    batch = D.broadcast(node, graph, [x[:-2], y[:-2]]) if len(x) > 2 or len(y) > 2 else []
    return [batch + [m, n]]


def _flops(node, graph):
    x = graph.t(node.inputs[0]).shape                  # K is the LHS's contracted dimension
    out = graph.t(node.outputs[0]).size
    return 2 * out * (x[-2] if node.attrs.get("adj_x") else x[-1]) if len(x) >= 2 else out


declare("BATCH_MATMUL", shape=Why("no host rule: the symbolic rule gives its shape"), exact=SHAPE_ONLY,
        sym_shape=_sym, batch="batch_matmul", pieces=Why("computes values"), fp16=NEUTRAL, in_place=False,
        templates=("batch_matmul",), flops=_flops, cpu=Why("no CPU kernel: the GPU runs every float BATCH_MATMUL"))
template("batch_matmul", item_major=False, flat=False)
