// @storage16
// Flash-decoding, pass 1 (ops/sdpa_decode.py: an odml.scaled_dot_product_attention composite for one
// query token).  Workgroup wg = h * NCHUNK + c takes query head h and keys [c * CHUNK, ...) of the cache
// k, v [KV, KH, D] (query head h reads KV head h / (H / KH)):
//   s_j = sum_d (q[h, d] * QS) * (k[j, kh, d] * KS) (+ mask[j]);  m = max_j s_j;  p_j = exp(s_j - m)
// and writes out_[h, c] = [m, sum_j p_j, sum_j p_j * v[j, kh, 0..D-1]] (D + 2 floats).  A chunk whose
// scores are all -inf gives p = 0 (the combine then weighs it 0).
// Defines: H D KV KH CHUNK NCHUNK QS KS HAS_MASK; ROPE_Q 1 (ops/rope.py: q is the rotary embedding of a
// tensor, computed here as it is read, by rope.glsl from q (that tensor), cosv and sinv; its defines too)
#define SUBGROUP 0
#ifndef ROPE_Q
#define ROPE_Q 0
#endif
#if ROPE_Q
#define ROPE_LD(i) LD(q, i)
// @include rope.glsl
float q_at(int i) { return rope_value(i); }
#else
float q_at(int i) { return LD(q, i); }
#endif
// @include ew_math.glsl
shared float red[gl_WorkGroupSize.x];
// @include wg_reduce.glsl
shared float qs[D];
shared float sc[CHUNK];

void main() {
    uint wg = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
    if (wg * gl_WorkGroupSize.x >= TOTAL) return;      // whole workgroup leaves together
    int h = int(wg) / NCHUNK, c = int(wg) % NCHUNK, kh = h / (H / KH);
    int l = int(gl_LocalInvocationID.x), n = int(gl_WorkGroupSize.x);
    int j0 = c * CHUNK, nj = min(CHUNK, KV - j0);
    const float NEG_INF = uintBitsToFloat(0xff800000u);
    for (int d = l; d < D; d += n) qs[d] = q_at(h * D + d) * QS;
    memoryBarrierShared();
    barrier();
    float mx = NEG_INF;
    for (int jj = l; jj < nj; jj += n) {
        int b = ((j0 + jj) * KH + kh) * D;
        float s = 0.0;
        for (int d = 0; d < D; ++d) s += qs[d] * (LD(k, b + d) * KS);
#if HAS_MASK
        s = s + LD(mask, j0 + jj);
#endif
        sc[jj] = s;
        mx = max(mx, s);
    }
    float m = wg_reduce(mx, true);
    float ls = 0.0;
    for (int jj = l; jj < nj; jj += n) {
        float p = m == NEG_INF ? 0.0 : exp(sc[jj] - m);
        sc[jj] = p;
        ls += p;
    }
    float lsum = wg_reduce(ls, false);
    memoryBarrierShared();
    barrier();
    int o = (h * NCHUNK + c) * (D + 2);
    for (int d = l; d < D; d += n) {
        float acc = 0.0;
        for (int jj = 0; jj < nj; ++jj) acc += sc[jj] * LD(v, ((j0 + jj) * KH + kh) * D + d);
        ST(out_, o + 2 + d, acc);
    }
    if (l == 0) {
        ST(out_, o, m);
        ST(out_, o + 1, lsum);
    }
}
