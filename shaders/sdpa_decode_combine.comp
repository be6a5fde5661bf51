// @storage16
// Flash-decoding, pass 2 (ops/sdpa_decode.py): out[h, d] from the NCHUNK partials x[h, c] = [m_c, l_c,
// acc_c[D]] of sdpa_decode_split.comp: M = max_c m_c, w_c = exp(m_c - M) (0 for a chunk of -inf
// scores), out = sum_c w_c * acc_c[d] / sum_c w_c * l_c.  One workgroup a query head: invocation
// (slice sl < RS = n / D, column d) takes chunks sl, sl + RS, .. (their m, l and acc[d] loaded up front
// when at most 32: one wait for memory); M and the denominator by workgroup reductions, the numerators
// summed over the slices through shared memory.
// Defines: H D NCHUNK RS; SUBGROUP 1 (the `subgroup` variant: wg_reduce through subgroup arithmetic).
#extension GL_EXT_control_flow_attributes : enable
#ifndef SUBGROUP
#define SUBGROUP 0
#endif
shared float red[gl_WorkGroupSize.x];
// @include wg_reduce.glsl
shared float part[RS * D];
#define CN ((NCHUNK + RS - 1) / RS)                     // chunks an invocation takes
#define PRE (CN <= 32)
#if PRE
#define LOOP [[unroll]]
#else
#define LOOP
#endif

void main() {
    uint wg = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
    if (wg * gl_WorkGroupSize.x >= TOTAL) return;      // whole workgroup leaves together
    int h = int(wg), l = int(gl_LocalInvocationID.x), n = int(gl_WorkGroupSize.x);
    int d = l % D, sl = l / D;
    bool mine = sl < RS;
    const float NEG_INF = uintBitsToFloat(0xff800000u);
#if PRE
    float mv[CN], lv[CN], av[CN];
    [[unroll]] for (int i = 0; i < CN; ++i) {
        int c = sl + i * RS, b = (h * NCHUNK + c) * (D + 2);
        bool in_ = mine && c < NCHUNK;
        mv[i] = in_ ? LD(x, b) : NEG_INF;
        lv[i] = in_ ? LD(x, b + 1) : 0.0;
        av[i] = in_ ? LD(x, b + 2 + d) : 0.0;
    }
#define M_AT(i, b) mv[i]
#define L_AT(i, b) lv[i]
#define A_AT(i, b) av[i]
#else
#define M_AT(i, b) LD(x, b)
#define L_AT(i, b) LD(x, (b) + 1)
#define A_AT(i, b) LD(x, (b) + 2 + d)
#endif
    float mx = NEG_INF;
    LOOP for (int i = 0; i < CN; ++i) {
        int c = sl + i * RS, b = (h * NCHUNK + c) * (D + 2);
        if (mine && c < NCHUNK) mx = max(mx, M_AT(i, b));
    }
    float M = wg_reduce(mx, true);
    float dn = 0.0, num = 0.0;
    LOOP for (int i = 0; i < CN; ++i) {
        int c = sl + i * RS, b = (h * NCHUNK + c) * (D + 2);
        if (mine && c < NCHUNK) {
            float m = M_AT(i, b);
            float w = m == NEG_INF ? 0.0 : exp(m - M);
            if (d == 0) dn += w * L_AT(i, b);          // (once a chunk)
            num += w * A_AT(i, b);
        }
    }
    float den = wg_reduce(dn, false);
    if (mine) part[sl * D + d] = num;
    memoryBarrierShared();
    barrier();
    for (int e = l; e < D; e += n) {
        float t = 0.0;
        for (int s = 0; s < RS; ++s) t += part[s * D + e];
        ST(out_, h * D + e, t / den);
    }
}
