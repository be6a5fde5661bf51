// @storage16
// Flash-decoding, pass 2 (ops/sdpa_decode.py): out[h, d] from the NCHUNK partials x[h, c] = [m_c, l_c,
// acc_c[D]] of sdpa_decode_split.comp: M = max_c m_c, w_c = exp(m_c - M) (0 for a chunk of -inf
// scores, whose acc is not read), out = sum_c w_c * acc_c[d] / sum_c w_c * l_c.  One workgroup a query
// head: M and the denominator by workgroup reductions over the chunks; the numerators by RS = n / D
// slices of chunks, invocation (slice, d) reading column d (coalesced), summed through shared memory.
// Defines: H D NCHUNK RS; SUBGROUP 1 (the `subgroup` variant: wg_reduce through subgroup arithmetic).
#ifndef SUBGROUP
#define SUBGROUP 0
#endif
shared float red[gl_WorkGroupSize.x];
// @include wg_reduce.glsl
shared float part[RS * D];

void main() {
    uint wg = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
    if (wg * gl_WorkGroupSize.x >= TOTAL) return;      // whole workgroup leaves together
    int h = int(wg), l = int(gl_LocalInvocationID.x), n = int(gl_WorkGroupSize.x);
    const float NEG_INF = uintBitsToFloat(0xff800000u);
    float mx = NEG_INF;
    for (int c = l; c < NCHUNK; c += n) mx = max(mx, LD(x, (h * NCHUNK + c) * (D + 2)));
    float M = wg_reduce(mx, true);
    float dn = 0.0;
    for (int c = l; c < NCHUNK; c += n) {
        int b = (h * NCHUNK + c) * (D + 2);
        float m = LD(x, b);
        if (m != NEG_INF) dn += exp(m - M) * LD(x, b + 1);
    }
    float den = wg_reduce(dn, false);
    int d = l % D, sl = l / D;
    if (sl < RS) {
        float num = 0.0;
        for (int c = sl; c < NCHUNK; c += RS) {
            int b = (h * NCHUNK + c) * (D + 2);
            float m = LD(x, b);
            if (m != NEG_INF) num += exp(m - M) * LD(x, b + 2 + d);
        }
        part[sl * D + d] = num;
    }
    memoryBarrierShared();
    barrier();
    for (int e = l; e < D; e += n) {
        float t = 0.0;
        for (int s = 0; s < RS; ++s) t += part[s * D + e];
        ST(out_, h * D + e, t / den);
    }
}
