// gemm_q8.comp's many-row (prefill) path: two dispatches instead of one whose workgroups each requantize
// their rows (ops/gemm_q8.py: M >= TILED_MIN_M).
// Q8_MODE 1 (rows): workgroup m quantizes row m once, as gemm_q8.comp's phase 1 does (RMS prologue
// included), into out_: the GM rows' KQ * 4 words of packed int8 (row m at word m * KQ * 4: 16-byte
// aligned rows), then per row 1 / s (float bits) and zp (words GM * KQ * 4 + 2 m, + 1).
// Q8_MODE 2 (tiled): out[m, n] over tiles of BM rows x BN channels, 256 invocations each computing 4 x 4
// (rows ty * 4 + i, channels tx * 4 + j), the K loop over BKW-word slices of the rows (xq) and weights in
// shared memory; exact int32 sums, then gemm_q8.comp's epilogue (q8_out).  COOPMAT (the coopmat_int8
// variant): the same sums on s8 x s8 -> s32 cooperative matrices (gemm_q8_coopmat.glsl).  Defines: GM GN GK
// KQ TILES_N HAS_BIAS ACT RESIDUAL ACT2 EPI_CHAIN GLU HAS_UBIAS DOT_EXT [COOPMAT BM BN BKW WM WN].
// Bindings: out_ xq w ws wsum [bias] [res] [wu wus wusum [ubias]]
#ifndef COOPMAT
#define COOPMAT 0
#endif
#define XQ_ROW(m) ((m) * (KQ * 4))                // row m's first word
#define XQ_SC(m) (GM * KQ * 4 + 2 * (m))          // row m's 1 / s; its zp follows
#if Q8_MODE == 1
shared float red_lo[NT];
shared float red_hi[NT];

void main() {
    uint tid = gl_LocalInvocationID.x;
    int m = int(gl_WorkGroupID.x + gl_NumWorkGroups.x * gl_WorkGroupID.y);
    if (m >= GM) return;                         // (whole workgroup: uniform)
#if RMS
    float ss = 0.0;
    for (int k = int(tid); k < GK; k += int(NT)) { float v = LD(x, m * GK + k); ss += v * v; }
    float rr = ew_rsqrt(wg_reduce(ss, false) / float(GK) + EPS);
#define XV(k) ((LD(x, m * GK + (k)) * rr) * LD(nw, (k)))
#else
#define XV(k) LD(x, m * GK + (k))
#endif
    float lo = 0.0, hi = 0.0;
    for (int k = int(tid); k < GK; k += int(NT)) {
        float v = XV(k);
        lo = min(lo, v);
        hi = max(hi, v);
    }
    red_lo[tid] = lo;
    red_hi[tid] = hi;
    barrier();
    for (uint s = NT / 2; s > 0; s >>= 1) {
        if (tid < s) {
            red_lo[tid] = min(red_lo[tid], red_lo[tid + s]);
            red_hi[tid] = max(red_hi[tid], red_hi[tid + s]);
        }
        barrier();
    }
    float rmin = red_lo[0], rmax = red_hi[0];
    float sc = qd8_scale(rmin, rmax);
    int zp = qd8_zero_point(rmin, rmax, sc);
    for (int wd = int(tid); wd < KQ * 4; wd += int(NT)) {
        uint word = 0u;
        [[unroll]] for (int j = 0; j < 4; ++j) {
            int k = wd * 4 + j;
            float v = k < GK ? XV(k) : 0.0;
            int q = qd8(v, sc, zp);
            word |= (uint(q) & 0xffu) << (8 * j);
        }
        out_[XQ_ROW(m) + wd] = word;
    }
    if (tid == 0) {
        out_[XQ_SC(m)] = floatBitsToUint(1.0 / sc);
        out_[XQ_SC(m) + 1] = uint(zp);
    }
}
#else
#if COOPMAT
#define XQW(i) xq[(i) >> 2][(i) & 3]   // (xq: uvec4 words)
#else
#define XQW(i) xq[i]
#endif

// the epilogue of out[m, n] from its int32 sums a (and au: up's, GLU): dequantize, bias, (GLU), activation,
// residual, chain
void q8_out(int m, int n, int a, int au) {
    if (m >= GM || n >= GN) return;
    float inv = uintBitsToFloat(XQW(XQ_SC(m)));
    int zp = int(XQW(XQ_SC(m) + 1));
    float v = float(a - zp * LD(wsum, n)) * inv;
#if HAS_BIAS
    v = v * LD(ws, n) + LD(bias, n);
#else
    v = v * LD(ws, n);
#endif
#if GLU
    float u = float(au - zp * LD(wusum, n)) * inv;
#if HAS_UBIAS
    u = u * LD(wus, n) + LD(ubias, n);
#else
    u = u * LD(wus, n);
#endif
    v = (v * ew_logistic(v)) * u;
#endif
    v = gpuc_act(v);
    int o = m * GN + n;
#if RESIDUAL
    v = gpuc_apply(v + LD(res, o), ACT2);
#endif
#if EPI_CHAIN
    v = epi_chain(o, v);
#endif
    ST(out_, o, v);
}
#if COOPMAT
// @include gemm_q8_coopmat.glsl
#else
#define BM 64
#define BN 64
#define BKW 8                                    // words (32 int8) of K per step
shared uint xs[BM][BKW + 1];
shared uint wsh[BN][BKW + 1];
#if GLU
shared uint ush[BN][BKW + 1];
#endif

void main() {
    uint tid = gl_LocalInvocationID.x;
    int wg = int(gl_WorkGroupID.x + gl_NumWorkGroups.x * gl_WorkGroupID.y);
    int tn = wg % TILES_N, tm = wg / TILES_N;
    int m0 = tm * BM, n0 = tn * BN;
    if (m0 >= GM) return;                        // (whole workgroup: uniform)
    int ty = int(tid) / 16, tx = int(tid) % 16;
    int acc[4][4];
#if GLU
    int acu[4][4];
#endif
    [[unroll]] for (int i = 0; i < 4; ++i) [[unroll]] for (int j = 0; j < 4; ++j) {
        acc[i][j] = 0;
#if GLU
        acu[i][j] = 0;
#endif
    }
    for (int k0 = 0; k0 < KQ * 4; k0 += BKW) {
        [[unroll]] for (int e2 = 0; e2 < BM * BKW / 256; ++e2) {
            int e = int(tid) + e2 * 256, r = e / BKW, kw = e % BKW;
            int m = m0 + r, k = k0 + kw;
            xs[r][kw] = m < GM && k < KQ * 4 ? xq[XQ_ROW(m) + k] : 0u;
        }
        if (tid < BN * BKW / 4) {                // (one 16-byte weight word each)
            int c = int(tid) / (BKW / 4), qw = int(tid) % (BKW / 4);
            int n = n0 + c, qd = k0 / 4 + qw;
            bool ok = n < GN && qd < KQ;
            uvec4 v = ok ? w[n * KQ + qd] : uvec4(0u);
            wsh[c][qw * 4] = v.x; wsh[c][qw * 4 + 1] = v.y; wsh[c][qw * 4 + 2] = v.z; wsh[c][qw * 4 + 3] = v.w;
#if GLU
            uvec4 u = ok ? wu[n * KQ + qd] : uvec4(0u);
            ush[c][qw * 4] = u.x; ush[c][qw * 4 + 1] = u.y; ush[c][qw * 4 + 2] = u.z; ush[c][qw * 4 + 3] = u.w;
#endif
        }
        barrier();
        [[unroll]] for (int kw = 0; kw < BKW; ++kw) {
            uint xa[4], wb[4];
            [[unroll]] for (int i = 0; i < 4; ++i) xa[i] = xs[ty * 4 + i][kw];
            [[unroll]] for (int j = 0; j < 4; ++j) wb[j] = wsh[tx * 4 + j][kw];
            [[unroll]] for (int i = 0; i < 4; ++i) [[unroll]] for (int j = 0; j < 4; ++j) acc[i][j] += dot4(xa[i], wb[j]);
#if GLU
            [[unroll]] for (int j = 0; j < 4; ++j) wb[j] = ush[tx * 4 + j][kw];
            [[unroll]] for (int i = 0; i < 4; ++i) [[unroll]] for (int j = 0; j < 4; ++j) acu[i][j] += dot4(xa[i], wb[j]);
#endif
        }
        barrier();
    }
    [[unroll]] for (int i = 0; i < 4; ++i) [[unroll]] for (int j = 0; j < 4; ++j) {
#if GLU
        q8_out(m0 + ty * 4 + i, n0 + tx * 4 + j, acc[i][j], acu[i][j]);
#else
        q8_out(m0 + ty * 4 + i, n0 + tx * 4 + j, acc[i][j], 0);
#endif
    }
}
#endif
#endif
