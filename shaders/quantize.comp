// Boundary (de)quantization of 1-byte tensors, per-tensor parameters.
// As LiteRT's builtin kernels compute them (bit for bit, tests/ops/test_int8_kernels.py):
// TO_BYTES 0: x = int8/uint8 bytes (KIND 4 / 3, 4 per 32-bit word) -> out_ float: q * Q_SCALE - Q_ZP * Q_SCALE
//             (two rounded products, no fused multiply-add);
// TO_BYTES 1: x float -> out_ bytes: q = clamp(round_half_even(v * Q_INV) + Q_ZP, Q_MIN, Q_MAX), Q_INV the
//             float 1 / scale; each invocation writes one whole word (4 elements).
// Defines: N (elements) Q_SCALE Q_INV Q_ZP Q_MIN Q_MAX.  Buffers are read / written as raw 32-bit words.
uint q_bits(float v) { return floatBitsToUint(v); }
uint q_bits(int v) { return uint(v); }
uint q_bits(uint v) { return v; }
void q_put(out float d, uint b) { d = uintBitsToFloat(b); }
void q_put(out int d, uint b) { d = int(b); }
void q_put(out uint d, uint b) { d = b; }

void main() {
    uint gid = gpuc_gid();
    if (gid >= TOTAL) return;
#if TO_BYTES
    uint w = 0u;
    for (int j = 0; j < 4; ++j) {
        int e = int(gid) * 4 + j;
        if (e >= N) break;
        precise float v = uintBitsToFloat(q_bits(x[e])) * Q_INV;
        float r = roundEven(v);
        int q = int(clamp(r + float(Q_ZP), float(Q_MIN), float(Q_MAX)));
        w |= (uint(q) & 0xFFu) << (8 * j);
    }
    q_put(out_[gid], w);
#else
    int e = int(gid);
    uint b = (q_bits(x[e >> 2]) >> (8 * (e & 3))) & 0xFFu;
#if KIND == 4
    int q = bitfieldExtract(int(b), 0, 8);
#else
    int q = int(b);
#endif
    precise float qs = float(q) * Q_SCALE;
    precise float zs = float(Q_ZP) * Q_SCALE;
    precise float v = qs - zs;
    q_put(out_[gid], floatBitsToUint(v));
#endif
}
