"""The CPU kernel of LSH_PROJECTION, LiteRT's semantics (tensorflow/lite/kernels/lsh_projection.cc), and the
hash it needs: farmhash's Fingerprint64 (which is farmhashna::Hash64, fixed forever), in numpy uint64
arithmetic (wrapping like C's uint64_t), vectorized over many keys of one length.  runtime/cpu_ops.py
registers the kernel.

For every seed s (an element of the float32 hash tensor [num_hash, num_bits]) and every row i of the
input (its raw bytes), LiteRT hashes the key = s's 4 bytes + row i's bytes, reads the fingerprint as a
signed int64, converts it to double and sums sum_i w_i * h_i in double, row after row (w_i = 1 without
weights).  The bit is score > 0.  SPARSE packs a hash function's num_bits bits MSB first into an int32
and adds i * (1 << num_bits); DENSE writes each bit as an int32.  Imports numpy only.
"""
from __future__ import annotations

import numpy as np

U64 = np.uint64
K0, K1, K2 = U64(0xC3A5C85C97CB3127), U64(0xB492B66FBE98F273), U64(0x9AE16A3B2F90404F)
SPARSE, DENSE = 1, 2          # LSHProjectionType


def _rot(v, s: int):
    return v if s == 0 else (v >> U64(s)) | (v << U64(64 - s))


def _shift_mix(v):
    return v ^ (v >> U64(47))


def _len16(u, v, mul):
    a = (u ^ v) * mul
    a = a ^ (a >> U64(47))
    b = (v ^ a) * mul
    b = b ^ (b >> U64(47))
    return b * mul


class _Keys:
    """Keys of one length: a [P, L] uint8 matrix; f64 / f32 read little-endian words at a byte offset."""

    def __init__(self, b: np.ndarray):
        self.b = b

    def f64(self, off: int):
        return np.ascontiguousarray(self.b[:, off:off + 8]).view("<u8")[:, 0].astype(U64)

    def f32(self, off: int):
        return np.ascontiguousarray(self.b[:, off:off + 4]).view("<u4")[:, 0].astype(U64)


def _len0to16(k: _Keys, n: int):
    p = k.b.shape[0]
    if n >= 8:
        mul = K2 + U64(n * 2)
        a = k.f64(0) + K2
        b = k.f64(n - 8)
        c = _rot(b, 37) * mul + a
        d = (_rot(a, 25) + b) * mul
        return _len16(c, d, mul)
    if n >= 4:
        mul = K2 + U64(n * 2)
        return _len16(U64(n) + (k.f32(0) << U64(3)), k.f32(n - 4), mul)
    if n > 0:
        a, b, c = (k.b[:, i].astype(U64) for i in (0, n >> 1, n - 1))
        y = (a + (b << U64(8))) & U64(0xFFFFFFFF)           # uint32 arithmetic
        z = (U64(n) + (c << U64(2))) & U64(0xFFFFFFFF)
        return _shift_mix(y * K2 ^ z * K0) * K2
    return np.full(p, K2, U64)


def _len17to32(k: _Keys, n: int):
    mul = K2 + U64(n * 2)
    a = k.f64(0) * K1
    b = k.f64(8)
    c = k.f64(n - 8) * mul
    d = k.f64(n - 16) * K2
    return _len16(_rot(a + b, 43) + _rot(c, 30) + d, a + _rot(b + K2, 18) + c, mul)


def _len33to64(k: _Keys, n: int):
    mul = K2 + U64(n * 2)
    a = k.f64(0) * K2
    b = k.f64(8)
    c = k.f64(n - 8) * mul
    d = k.f64(n - 16) * K2
    y = _rot(a + b, 43) + _rot(c, 30) + d
    z = _len16(y, a + _rot(b + K2, 18) + c, mul)
    e = k.f64(16) * mul
    f = k.f64(24)
    g = (y + k.f64(n - 32)) * mul
    h = (z + k.f64(n - 24)) * mul
    return _len16(_rot(e + f, 43) + _rot(g, 30) + h, e + _rot(f + a, 18) + g, mul)


def _weak32(k: _Keys, off: int, a, b):
    """The 16-byte hash of 32 bytes at `off` with seeds a, b (WeakHashLen32WithSeeds)."""
    w, x, y, z = (k.f64(off + 8 * i) for i in range(4))
    a = a + w
    b = _rot(b + a + z, 21)
    c = a
    a = a + x + y
    b = b + _rot(a, 44)
    return a + z, b + c


def _long(k: _Keys, n: int):
    """Keys over 64 bytes: 64-byte blocks, then the last 64 bytes (which may overlap the previous block)."""
    p = k.b.shape[0]
    seed = U64(81)
    x = np.full(p, seed, U64)
    y = np.full(p, seed * K1 + U64(113), U64)
    z = _shift_mix(y * K2 + U64(113)) * K2
    v0 = v1 = w0 = w1 = np.zeros(p, U64)
    x = x * K2 + k.f64(0)
    for s in range(0, ((n - 1) // 64) * 64, 64):
        x = _rot(x + y + v0 + k.f64(s + 8), 37) * K1
        y = _rot(y + v1 + k.f64(s + 48), 42) * K1
        x = x ^ w1
        y = y + v0 + k.f64(s + 40)
        z = _rot(z + w0, 33) * K1
        v0, v1 = _weak32(k, s, v1 * K1, x + w0)
        w0, w1 = _weak32(k, s + 32, z + w1, y + k.f64(s + 16))
        x, z = z, x
    mul = K1 + ((z & U64(0xFF)) << U64(1))
    s = n - 64
    w0 = w0 + U64((n - 1) & 63)
    v0 = v0 + w0
    w0 = w0 + v0
    x = _rot(x + y + v0 + k.f64(s + 8), 37) * mul
    y = _rot(y + v1 + k.f64(s + 48), 42) * mul
    x = x ^ (w1 * U64(9))
    y = y + v0 * U64(9) + k.f64(s + 40)
    z = _rot(z + w0, 33) * mul
    v0, v1 = _weak32(k, s, v1 * mul, x + w0)
    w0, w1 = _weak32(k, s + 32, z + w1, y + k.f64(s + 16))
    x, z = z, x
    return _len16(_len16(v0, w0, mul) + _shift_mix(y) * K0 + z, _len16(v1, w1, mul) + x, mul)


def fingerprint64(keys: np.ndarray) -> np.ndarray:
    """farmhash Fingerprint64 of each row of `keys` ([P, L] uint8, every key L bytes) -> [P] uint64."""
    keys = np.ascontiguousarray(keys, np.uint8)
    if keys.ndim != 2:
        raise ValueError(f"fingerprint64 takes a [keys, bytes] matrix, got {list(keys.shape)}")
    k, n = _Keys(keys), keys.shape[1]
    with np.errstate(over="ignore"):
        if n <= 16:
            return _len0to16(k, n)
        if n <= 32:
            return _len17to32(k, n)
        if n <= 64:
            return _len33to64(k, n)
        return _long(k, n)


def projection_bits(hash_fns: np.ndarray, x: np.ndarray, weight: np.ndarray | None) -> np.ndarray:
    """LiteRT's sign bit for every seed of `hash_fns` ([H, B] float32): [H, B] int32 of 0 / 1."""
    seeds = np.ascontiguousarray(hash_fns, np.float32).reshape(-1).view(np.uint8).reshape(-1, 4)
    n = x.shape[0]
    rows = np.ascontiguousarray(x).reshape(-1).view(np.uint8).reshape(n, -1) if n else np.zeros((0, 0), np.uint8)
    s, r = seeds.shape[0], rows.shape[1]
    keys = np.empty((s, n, 4 + r), np.uint8)
    keys[:, :, :4] = seeds[:, None, :]
    keys[:, :, 4:] = rows[None]
    h = fingerprint64(keys.reshape(s * n, 4 + r)).view(np.int64).astype(np.float64).reshape(s, n)
    if weight is not None:
        h = np.asarray(weight, np.float32).astype(np.float64)[None, :] * h
    score = np.add.accumulate(h, axis=1)[:, -1] if n else np.zeros(s)        # summed row after row, as C++
    return (score > 0).astype(np.int32).reshape(hash_fns.shape)


def lsh_projection(attrs, x, outs):
    hash_fns, inp = x[0], x[1]
    weight = x[2] if len(x) > 2 else None
    bits = projection_bits(hash_fns, inp, weight)
    if int(attrs.get("type", 0)) == DENSE:
        return [bits.reshape(-1)]
    nb = bits.shape[1]
    sig = np.zeros(bits.shape[0], np.int64)
    for j in range(nb):
        sig = ((sig << 1) | bits[:, j]) & 0xFFFFFFFF
    offs = np.arange(bits.shape[0], dtype=np.int64) * ((1 << (nb & 31)) & 0xFFFFFFFF)   # (x86 masks the shift)
    return [((sig + offs) & 0xFFFFFFFF).astype(np.uint32).view(np.int32)]


def check(attrs, ins, outs):
    """None when the kernel runs this node the way LiteRT does, else why not."""
    if len(ins) not in (2, 3) or len(outs) != 1 or ins[0] is None or ins[1] is None:
        return "it takes hash functions, an input and optional weights, and has 1 output"
    h, inp = ins[0], ins[1]
    if len(h.shape) != 2 or h.shape[1] > 32:
        return f"hash functions {list(h.shape)}: LiteRT takes a 2-D tensor of at most 32 bits per function"
    if h.dtype != "float32":
        return f"hash functions are {h.dtype}: LiteRT reads them as float32 seeds"
    if len(inp.shape) < 1:
        return "the input must have at least 1 dimension (LiteRT hashes its rows)"
    w = ins[2] if len(ins) > 2 else None
    if w is not None:
        if w.dtype != "float32" or len(w.shape) != 1 or w.shape[0] != inp.shape[0]:
            return (f"weights {w.dtype} {list(w.shape)}: LiteRT takes float32 [{inp.shape[0]}] "
                    "(one per input row)")
    t = int(attrs.get("type", 0))
    if t not in (SPARSE, DENSE):
        return f"type {t} is neither SPARSE (1) nor DENSE (2): LiteRT's Prepare fails"
    n = h.shape[0] * (h.shape[1] if t == DENSE else 1)
    if outs[0].dtype != "int32" or tuple(outs[0].shape) != (n,):
        return f"output is {outs[0].dtype} {list(outs[0].shape)}, LiteRT makes it int32 [{n}]"
    return None

