"""LSH_PROJECTION on the CPU (runtime/cpu_lsh.py), LiteRT's semantics (tensorflow/lite/kernels/
lsh_projection.cc): for each float32 seed of the hash functions [num_hash, num_bits], the sign of
sum_i w_i * Fingerprint64(seed bytes + input row i's bytes) (farmhash, as a signed int64 in double);
SPARSE packs each function's bits into an int32 signature plus i << num_bits, DENSE gives every bit.
The input rows are hashed as raw bytes, so every input dtype runs (quantized ones too); the optional
weights are float32, one per row.  Its output is a few hundred bits at most, so there is no GPU
kernel: a 64-bit multiply-heavy hash over a handful of keys is host work (one round trip).
"""
from __future__ import annotations

from gpuc.compiler.ops import ALWAYS, NEUTRAL, Why, declare, rules
from gpuc.runtime import cpu_lsh

OP = "LSH_PROJECTION"
_NO_GPU = Why("no GPU kernel: farmhash Fingerprint64 of a few keys runs on the CPU (runtime/cpu_lsh.py)")


def _out_len(node, h_shape) -> int:
    t = int(node.attrs.get("type", 0))
    if t not in (cpu_lsh.SPARSE, cpu_lsh.DENSE):
        raise ValueError(f"type {t} is neither SPARSE nor DENSE (LiteRT's Prepare fails)")
    return int(h_shape[0]) * (int(h_shape[1]) if t == cpu_lsh.DENSE else 1)


def _shape(node, vals, graph, need=None):
    h, x = vals[0], vals[1]
    w = vals[2] if len(vals) > 2 else None
    if h.ndim != 2 or h.shape[1] > 32:
        raise ValueError(f"hash functions {list(h.shape)}: LiteRT takes 2-D, at most 32 bits per function")
    if x.ndim < 1 or x.shape[0] == 0:
        raise ValueError(f"input {list(x.shape)}: LiteRT hashes the rows of a non-empty tensor of rank >= 1")
    if w is not None and (w.ndim != 1 or w.shape[0] != x.shape[0]):
        raise ValueError(f"weights {list(w.shape)} must be 1-D with one per input row ({x.shape[0]})")
    n = _out_len(node, h.shape)
    if need is not None and all(need) and h.dtype == "float32":
        return cpu_lsh.lsh_projection(node.attrs, list(vals), None)
    return [rules.placeholder([n], "int32")]


def _flops(node, graph):
    h, x = graph.t(node.inputs[0]), graph.t(node.inputs[1])
    return h.size * max(x.size, 1) * 16          # a few 64-bit multiplies per key word


declare(OP, lower=_NO_GPU, check=Why("no GPU kernel to check for (runtime/cpu_lsh.py's check runs)"),
        shape=_shape, exact=ALWAYS, sym_shape=Why("no dynamic-size rule yet"),
        batch=Why("no GPU kernel: a --max-batch program with it replicates per item"),
        pieces=Why("computes values"), fp16=NEUTRAL, in_place=False, templates=_NO_GPU,
        flops=_flops, cpu=OP)
