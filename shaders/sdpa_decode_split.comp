// @storage16
// Flash-decoding, pass 1 (ops/sdpa_decode.py: an odml.scaled_dot_product_attention composite for one
// query token).  Workgroup wg = kh * NCHUNK + c takes KV head kh, the G = H / KH query heads that read it
// (GQA: each key and value is read once for all of them) and keys [c * CHUNK, ...) of the cache
// k, v [KV, KH, D]; for each of its query heads h:
//   s_j = sum_d (q[h, d] * QS) * (k[j, kh, d] * KS) (+ mask[j]);  m = max_j s_j;  p_j = exp(s_j - m)
// and writes out_[h, c] = [m, sum_j p_j, sum_j p_j * v[j, kh, 0..D-1]] (D + 2 floats).  A chunk whose
// scores are all -inf gives p = 0 (the combine then weighs it 0).
// Work layout (n invocations, n = RP * TPR): scores RP keys at a time, TPR invocations a key (piece p reads
// d = p, p + TPR, ..: neighbours read neighbouring floats of a row; partial dots summed through shared
// memory); the chunk's max and sum per query head by segments of RED_SEG invocations (seg_reduce); P.V by
// RS = n / D slices of keys, invocation (slice, d) reading column d of its keys' rows (coalesced), the
// slices summed through shared memory.  Nothing is serial over the chunk but a slice's P.V loop.  The
// keys (a one-pass chunk: PRE_K) and values (at most 32 an invocation: PRE_V) are loaded into registers
// first, with the mask, so the kernel waits for memory about once (a decode step is latency-bound).
// Masked keys (HAS_MASK): a chunk whose mask values are all <= DEAD (-1e30: litert-torch's causal mask
// writes the float minimum or -inf) is not read when some key of the row is live: there its keys'
// weights exp(s_j - max) are exactly 0 (the scores differ by ~1e30 or more), so the chunk writes
// m = -inf and nothing else is computed; the decode step then reads the cache only up to its position.
// Defines: H D KV KH G CHUNK NCHUNK QS KS HAS_MASK TPR RP RS SEG (a power of two dividing n); ROPE_Q 1 (ops/rope.py: q is the rotary
// embedding of a tensor, computed here as it is read, by rope.glsl from q (that tensor), cosv and sinv; its
// defines too); SUBGROUP 1 (the `subgroup` variant: seg_reduce through subgroup arithmetic);
// KV_WRITE 1 (ops/kv_write.py: the step's cache writes folded in; needs ROPE_Q): position P = start[1]
// clamped to [0, MAX_POS] of the caches k and v (bound read-write) takes the new key, the rotary embedding
// of kx (rope_k: rope.glsl's formula with the K_ defines, cosv / sinv) and the new value vx[(f / V_ROW) *
// V_W + V_BEGIN + f % V_ROW] (f = kh * D + d).  Only workgroup (kh, P / CHUNK) writes head kh of row P, and
// it reads that row from the registers it wrote (shared kn / vn), never from the cache: no other
// workgroup reads row P, so no ordering between workgroups is needed.
// FUSED 1 (ops/sdpa_decode.py ONE_DISPATCH, off by default: the combine in the same dispatch): out_ is the attention
// output [H, D]; the partials go to xp (bound coherent, read-write) and each workgroup then arrives on
// arrive[kh] (a uint per KV head, persistent state that starts at 0): its stores, a buffer memory barrier,
// the workgroup barrier, one atomicAdd.  The workgroup that arrives last (it reads NCHUNK - 1) has every
// partial of its KV head visible (the writers' barrier before their atomic, its own after), combines its
// G query heads as sdpa_decode_combine.comp does and sets arrive[kh] back to 0 for the next run (every
// workgroup of the head has arrived, so nothing else touches it in this dispatch).  A dead chunk writes
// its m (-inf) only: the combine reads l and acc of live chunks only.
#extension GL_EXT_control_flow_attributes : enable
#ifndef SUBGROUP
#define SUBGROUP 0
#endif
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
#ifndef KV_WRITE
#define KV_WRITE 0
#endif
#ifndef FUSED
#define FUSED 0
#endif
#if FUSED
#define PST(i, x) ST(xp, i, x)
#else
#define PST(i, x) ST(out_, i, x)
#endif
#if KV_WRITE
int rope_k_src(int f) { return (f / K_SRC_ROW) * K_SRC_W + K_SRC_BEGIN + f % K_SRC_ROW; }

float rope_k(int f) {                  // (rope.glsl's rope_value with k's source and broadcast)
    int p = f % (2 * H2);
    int j = p % H2;
    int row = f / (2 * H2);
    int f1 = row * 2 * H2 + j;
    int t = row * H2 + j, ci = 0;
    for (int d = K_RANK - 1; d >= 0; --d) {
        ci += (t % K_HALF_SHAPE[d]) * K_CS_STRIDES[d];
        t /= K_HALF_SHAPE[d];
    }
    float x1 = LD(kx, rope_k_src(f1)), x2 = LD(kx, rope_k_src(f1 + H2));
    float c = LD(cosv, ci), s = LD(sinv, ci);
    precise float r;
    if (p < H2) {
        precise float a = x1 * c;
        precise float b = x2 * s;
        r = a - b;
    } else {
        precise float a = x2 * c;
        precise float b = x1 * s;
        r = a + b;
    }
    return r;
}
shared float kn[D];
shared float vn[D];
#define K_NEW(fresh, d, x) ((fresh) ? kn[d] : (x))
#define V_NEW(fresh, d, x) ((fresh) ? vn[d] : (x))
#else
#define K_NEW(fresh, d, x) (x)
#define V_NEW(fresh, d, x) (x)
#endif
// @include ew_math.glsl
#define RED_SEG SEG
shared float red[gl_WorkGroupSize.x];
// @include wg_reduce.glsl
// a head's max or sum over its segment: subgroup arithmetic alone where a segment is one subgroup
// (no shared memory, no barrier; uniform: the subgroup size is the workgroup's), else seg_reduce
float head_reduce(float x, bool is_max, uint pos) {
#if SUBGROUP
    if (gl_SubgroupSize == RED_SEG) return is_max ? subgroupMax(x) : subgroupAdd(x);
#endif
    return seg_reduce(x, is_max, pos);
}
shared float qs[G * D];
shared float sc[G * CHUNK];
shared float part[G * RP * TPR];
shared float mk[CHUNK];
shared int live[2];
const float DEAD = -1e30;
#define KN ((D + TPR - 1) / TPR)                        // key elements an invocation scores
#define VN ((CHUNK + RS - 1) / RS)                      // keys an invocation's P.V column takes
#define PRE_K (CHUNK <= RP)                             // one pass: the keys loaded up front
#define PRE_V (VN <= 32)                                // the values loaded up front
#if PRE_V
#define V_LOOP [[unroll]]
#else
#define V_LOOP
#endif

#if FUSED
shared float cm[G * NCHUNK];                            // the head's chunk maxima, then their weights
shared float cl[G * NCHUNK];                            // their sums
shared float cden[G];
shared uint last_;
#define CMN ((G * NCHUNK + int(gl_WorkGroupSize.x) - 1) / int(gl_WorkGroupSize.x))   // m, l an invocation loads
#define CCN ((NCHUNK + RS - 1) / RS)                    // chunks an invocation's column takes
#define PRE_C (G * CCN <= 96)                           // their numerators loaded up front

// (uniform control flow) this workgroup's partials written: arrive on the head's counter; the last
// workgroup combines the head's G query heads (sdpa_decode_combine.comp's formula: invocation (slice sl,
// column d) takes chunks sl, sl + RS, ..; every load issued before the first wait) and resets it
void arrive_and_combine(int kh, int l, int n) {
    const float NEG_INF = uintBitsToFloat(0xff800000u);
    memoryBarrierBuffer();                              // (release: this invocation's partials)
    barrier();
    if (l == 0) last_ = atomicAdd(arrive[kh], 1u) == uint(NCHUNK - 1) ? 1u : 0u;
    barrier();
    if (last_ == 0u) return;                            // (uniform)
    memoryBarrierBuffer();                              // (acquire: every workgroup's partials)
    int d = l % D, sl = l / D, b0 = kh * G * NCHUNK;
    float mv[CMN], lv[CMN];
    [[unroll]] for (int i = 0; i < CMN; ++i) {
        int j = l + i * n;
        mv[i] = j < G * NCHUNK ? LD(xp, (b0 + j) * (D + 2)) : NEG_INF;
        lv[i] = j < G * NCHUNK ? LD(xp, (b0 + j) * (D + 2) + 1) : 0.0;
    }
#if PRE_C
    float av[G * CCN];                                  // (a dead chunk's: never written, weighed 0 below)
    [[unroll]] for (int g = 0; g < G; ++g)
        [[unroll]] for (int i = 0; i < CCN; ++i) {
            int c = sl + i * RS;
            av[g * CCN + i] = sl < RS && c < NCHUNK ? LD(xp, ((b0 + g * NCHUNK + c) * (D + 2)) + 2 + d) : 0.0;
        }
#define AV(g, i, c) av[(g) * CCN + (i)]
#else
#define AV(g, i, c) LD(xp, ((b0 + (g) * NCHUNK + (c)) * (D + 2)) + 2 + d)
#endif
    [[unroll]] for (int i = 0; i < CMN; ++i) {
        int j = l + i * n;
        if (j < G * NCHUNK) {
            cm[j] = mv[i];
            cl[j] = mv[i] == NEG_INF ? 0.0 : lv[i];
        }
    }
    memoryBarrierShared();
    barrier();
    for (int g = l; g < G; g += n) {                    // M, the weights and the denominator of head g
        float M = NEG_INF;
        [[unroll]] for (int c = 0; c < NCHUNK; ++c) M = max(M, cm[g * NCHUNK + c]);
        float den = 0.0;
        [[unroll]] for (int c = 0; c < NCHUNK; ++c) {
            float m = cm[g * NCHUNK + c];
            float w = m == NEG_INF ? 0.0 : exp(m - M);
            cm[g * NCHUNK + c] = w;
            den += w * cl[g * NCHUNK + c];
        }
        cden[g] = den;
    }
    memoryBarrierShared();
    barrier();
    if (sl < RS) {
        [[unroll]] for (int g = 0; g < G; ++g) {
            float t = 0.0;
            [[unroll]] for (int i = 0; i < CCN; ++i) {
                int c = sl + i * RS;
                if (c < NCHUNK) {
                    float w = cm[g * NCHUNK + c];
                    t += w == 0.0 ? 0.0 : w * AV(g, i, c);
                }
            }
            part[(g * RS + sl) * D + d] = t;
        }
    }
    memoryBarrierShared();
    barrier();
    for (int i = l; i < G * D; i += n) {
        int g = i / D, e = i % D;
        float t = 0.0;
        for (int s2 = 0; s2 < RS; ++s2) t += part[(g * RS + s2) * D + e];
        ST(out_, (kh * G + g) * D + e, t / cden[g]);
    }
    if (l == 0) atomicExchange(arrive[kh], 0u);         // every workgroup of the head has arrived
}
#endif

void main() {
    uint wg = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
    if (wg * gl_WorkGroupSize.x >= TOTAL) return;      // whole workgroup leaves together
    int kh = int(wg) / NCHUNK, c = int(wg) % NCHUNK;
    int l = int(gl_LocalInvocationID.x), n = int(gl_WorkGroupSize.x);
    int j0 = c * CHUNK, nj = min(CHUNK, KV - j0);
    const float NEG_INF = uintBitsToFloat(0xff800000u);
    int r = l / TPR, p = l % TPR;                      // scores: piece p of key r of a pass
    int d = l % D, sl = l / D;                         // P.V: column d of slice sl
    // every load of the chunk's keys and values issued up front (one latency for the whole kernel;
    // a dead chunk's are dropped, the new row's replaced by the values written below)
#if PRE_K
    float kr[KN];
    [[unroll]] for (int i = 0; i < KN; ++i) {
        int e = p + i * TPR;
        kr[i] = r < nj && e < D ? LD(k, ((j0 + r) * KH + kh) * D + e) : 0.0;
    }
#endif
#if PRE_V
    float vr[VN];
    [[unroll]] for (int i = 0; i < VN; ++i) {
        int jj = sl + i * RS;
        vr[i] = sl < RS && jj < nj ? LD(v, ((j0 + jj) * KH + kh) * D + d) : 0.0;
    }
#endif
#if KV_WRITE
    int P = clamp(start[1], 0, MAX_POS);
    if (c == P / CHUNK) {              // (uniform) this workgroup's chunk holds the new row
        for (int e = l; e < D; e += n) {
            int f = kh * D + e, o = (P * KH + kh) * D + e;
            float kk = rope_k(f), vv = LD(vx, (f / V_ROW) * V_W + V_BEGIN + f % V_ROW);
            ST(k, o, kk);
            ST(v, o, vv);
            kn[e] = float(k_S(kk));    // (the values as the cache holds them)
            vn[e] = float(v_S(vv));
        }
        memoryBarrierShared();
        barrier();
    }
#else
    int P = -1;
#endif
#if HAS_MASK
    if (l == 0) { live[0] = 0; live[1] = 0; }
    barrier();
    bool mine = false;
    for (int jj = l; jj < nj; jj += n) {
        float mv = LD(mask, j0 + jj);
        mk[jj] = mv;
        mine = mine || !(mv <= DEAD);                  // (NaN: live)
    }
    if (mine) atomicOr(live[0], 1);
    barrier();
    if (live[0] == 0) {                                // (uniform) a dead chunk: is any key live?
        bool any = false;
        for (int j = l; j < KV; j += n) any = any || !(LD(mask, j) <= DEAD);
        if (any) atomicOr(live[1], 1);
        barrier();
        if (live[1] != 0) {
#if FUSED
            for (int g = l; g < G; g += n) PST(((kh * G + g) * NCHUNK + c) * (D + 2), NEG_INF);
            arrive_and_combine(kh, l, n);
#else
            for (int i = l; i < G * (D + 2); i += n) {
                int g = i / (D + 2), e = i % (D + 2);
                PST(((kh * G + g) * NCHUNK + c) * (D + 2) + e, e == 0 ? NEG_INF : 0.0);
            }
#endif
            return;
        }
    }
#endif
    for (int e = l; e < G * D; e += n) qs[e] = q_at(kh * G * D + e) * QS;
    memoryBarrierShared();
    barrier();
    // scores: invocation l is piece p of key r of each pass of RP keys
    for (int j = 0; j < nj; j += RP) {                 // (uniform)
        int jj = j + r;
        float s[G];
        [[unroll]] for (int g = 0; g < G; ++g) s[g] = 0.0;
        if (jj < nj) {
            bool fresh = j0 + jj == P;
            int b = ((j0 + jj) * KH + kh) * D;
            [[unroll]] for (int i = 0; i < KN; ++i) {
                int e = p + i * TPR;
                if (e < D) {
#if PRE_K
                    float kv = K_NEW(fresh, e, kr[i]) * KS;
#else
                    float kv = K_NEW(fresh, e, LD(k, b + e)) * KS;
#endif
                    [[unroll]] for (int g = 0; g < G; ++g) s[g] += qs[g * D + e] * kv;
                }
            }
        }
        [[unroll]] for (int g = 0; g < G; ++g) part[g * RP * TPR + l] = s[g];
        memoryBarrierShared();
        barrier();
        for (int i = l; i < G * RP; i += n) {
            int g = i / RP, rr = i % RP;
            if (j + rr < nj) {
                float t = 0.0;
                [[unroll]] for (int e = 0; e < TPR; ++e) t += part[g * RP * TPR + rr * TPR + e];
#if HAS_MASK
                t = t + mk[j + rr];
#endif
                sc[g * CHUNK + j + rr] = t;
            }
        }
        memoryBarrierShared();
        barrier();
    }
    // the chunk's max and sum per query head: segment seg of RED_SEG invocations takes head g0 + seg
#if SUBGROUP
    int pos = int(gl_SubgroupID * gl_SubgroupSize + gl_SubgroupInvocationID);
#else
    int pos = l;
#endif
    int seg = pos / RED_SEG, lane = pos % RED_SEG, nseg = n / RED_SEG;
    for (int g0 = 0; g0 < G; g0 += nseg) {             // (uniform)
        int g = g0 + seg;
        float mx = NEG_INF;
        if (g < G)
            for (int jj = lane; jj < nj; jj += RED_SEG) mx = max(mx, sc[g * CHUNK + jj]);
        float m = head_reduce(mx, true, uint(pos));
        float ls = 0.0;
        if (g < G)
            for (int jj = lane; jj < nj; jj += RED_SEG) {
                float e = m == NEG_INF ? 0.0 : exp(sc[g * CHUNK + jj] - m);
                sc[g * CHUNK + jj] = e;
                ls += e;
            }
        float lsum = head_reduce(ls, false, uint(pos));
        if (g < G && lane == 0) {
            int o = ((kh * G + g) * NCHUNK + c) * (D + 2);
            PST(o, m);
            PST(o + 1, lsum);
        }
    }
    memoryBarrierShared();
    barrier();
    // P.V: slice sl of RS takes keys sl, sl + RS, ..; invocation (sl, d) column d
    if (sl < RS) {
        float acc[G];
        [[unroll]] for (int g = 0; g < G; ++g) acc[g] = 0.0;
        V_LOOP for (int i = 0; i < VN; ++i) {
            int jj = sl + i * RS;
            if (jj < nj) {
#if PRE_V
                float vv = V_NEW(j0 + jj == P, d, vr[i]);
#else
                float vv = V_NEW(j0 + jj == P, d, LD(v, ((j0 + jj) * KH + kh) * D + d));
#endif
                [[unroll]] for (int g = 0; g < G; ++g) acc[g] += sc[g * CHUNK + jj] * vv;
            }
        }
        [[unroll]] for (int g = 0; g < G; ++g) part[(g * RS + sl) * D + d] = acc[g];
    }
    memoryBarrierShared();
    barrier();
    for (int i = l; i < G * D; i += n) {
        int g = i / D, e = i % D;
        float t = 0.0;
        for (int s2 = 0; s2 < RS; ++s2) t += part[(g * RS + s2) * D + e];
        PST(((kh * G + g) * NCHUNK + c) * (D + 2) + 2 + e, t);
    }
#if FUSED
    arrive_and_combine(kh, l, n);
#endif
}
