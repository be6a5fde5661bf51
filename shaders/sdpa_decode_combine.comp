// @storage16
// Flash-decoding, pass 2 (ops/sdpa_decode.py): out[h, d] from the NCHUNK partials x[h, c] = [m_c, l_c,
// acc_c[D]] of sdpa_decode_split.comp: M = max_c m_c, w_c = exp(m_c - M) (0 for a chunk of -inf
// scores), out = sum_c w_c * acc_c[d] / sum_c w_c * l_c.  One invocation per output element.
// Defines: H D NCHUNK
void main() {
    uint gid = gpuc_gid();
    if (gid >= TOTAL) return;
    int h = int(gid) / D, d = int(gid) % D;
    const float NEG_INF = uintBitsToFloat(0xff800000u);
    float M = NEG_INF;
    for (int c = 0; c < NCHUNK; ++c) M = max(M, LD(x, (h * NCHUNK + c) * (D + 2)));
    float den = 0.0, num = 0.0;
    for (int c = 0; c < NCHUNK; ++c) {
        int b = (h * NCHUNK + c) * (D + 2);
        float m = LD(x, b);
        float w = m == NEG_INF ? 0.0 : exp(m - M);
        den += w * LD(x, b + 1);
        num += w * LD(x, b + 2 + d);
    }
    ST(out_, gid, num / den);
}
