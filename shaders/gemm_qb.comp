// @storage16
// FULLY_CONNECTED over blockwise int4 weights (litert-torch's dynamic_int4_block32 / _block128 exports;
// ops/gemm_qb.py), computed as LiteRT's default CPU path (XNNPACK qd8-f32-qb4w) computes it:
//   row m of x is quantized on the fly to int8 exactly as shaders/gemm_q8.comp does (rmin = min(0, min x),
//   rmax = max(0, max x), s = 255 / (rmax - rmin) (1 when equal), zp = round_even(clamp(-128 - rmin*s or
//   127 - rmax*s, whichever the rounding errors favour, -128, 127)), q = clamp(round_even(x * s) + zp, -128, 127));
//   per block b of BLOCK weights: acc_b = sum_k q[k] * W[n, k] - zp * sum_k W[n, k]   (exact in int32)
//   v = (sum_b float(acc_b) * wscale[n, b]) * (1 / s) + bias[n], then the activation / residual / chain epilogue.
// The weights stay int4 in the bundle ([GN][KQ] uvec4 words: 32 nibbles a word, the low nibble first, as the
// .tflite stores them) and are unpacked in registers.
// TPC invocations per channel (each takes blocks lane, lane + TPC, ...; their float sums meet in a tree in
// shared memory), NT / TPC channels at once, RN channels (RN / (NT / TPC) rounds, their loads all unrolled)
// and RM rows a workgroup (each weight word loaded once for the RM rows).
// Defines: GM GN GK KQ (GK / 32) BW (words a block) NB (blocks a row) TPC RM RN TILES_N HAS_BIAS ACT RESIDUAL
//          ACT2 EPI_CHAIN
// Bindings: out_ x w (uvec4) ws (float [GN][NB]) wsum (int [GN][NB]) [bias] [res] [e1..]
#extension GL_EXT_control_flow_attributes : enable
#ifndef EPI_CHAIN
#define EPI_CHAIN 0
#endif
#define NT gl_WorkGroupSize.x
// @include qd8.glsl
const int XR = KQ * 8;                           // (a quantized row's words: 4 int8 a word)
shared uint xq[RM * XR];
shared float red_lo[NT];
shared float red_hi[NT];
shared float part[RN / (NT / TPC) * RM * NT];
shared float q_inv[RM];
shared int q_zp[RM];

// 8 int8 values (words a, b) times 8 int4 values (word u, the low nibble first)
int dot8(uint a, uint b, uint u) {
    int s = 0;
    [[unroll]] for (int j = 0; j < 4; ++j) {
        s += bitfieldExtract(int(a), 8 * j, 8) * bitfieldExtract(int(u), 4 * j, 4);
        s += bitfieldExtract(int(b), 8 * j, 8) * bitfieldExtract(int(u), 16 + 4 * j, 4);
    }
    return s;
}

// 32 int8 values of row r from word o on times one 16-byte word of int4 weights
int dot32(int o, uvec4 wv) {
    return dot8(xq[o], xq[o + 1], wv.x) + dot8(xq[o + 2], xq[o + 3], wv.y) + dot8(xq[o + 4], xq[o + 5], wv.z)
         + dot8(xq[o + 6], xq[o + 7], wv.w);
}

// @include epi_chain.glsl

void main() {
    uint tid = gl_LocalInvocationID.x;
    int wg = int(gl_WorkGroupID.x + gl_NumWorkGroups.x * gl_WorkGroupID.y);
    int tn = wg % TILES_N, m0 = (wg / TILES_N) * RM;
    int n0 = tn * RN;
    if (m0 >= GM) return;                        // (whole workgroup: uniform)
    // phase 1: quantize this workgroup's rows into shared memory
    [[dont_unroll]] for (int r = 0; r < RM; ++r) {
        int m = min(m0 + r, GM - 1);             // (rows past GM: a copy of the last, never stored)
        float lo = 0.0, hi = 0.0;
        for (int k = int(tid); k < GK; k += int(NT)) {
            float v = LD(x, m * GK + k);
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
        if (tid == 0) {
            q_inv[r] = 1.0 / sc;
            q_zp[r] = zp;
        }
        for (int wd = int(tid); wd < XR; wd += int(NT)) {
            uint word = 0u;
            [[unroll]] for (int j = 0; j < 4; ++j) {
                float v = LD(x, m * GK + wd * 4 + j);
                int q = qd8(v, sc, zp);
                word |= (uint(q) & 0xffu) << (8 * j);
            }
            xq[r * XR + wd] = word;
        }
        barrier();                               // (also: every read of red_lo[0] before the next row's writes)
    }
    int zps[RM];
    [[unroll]] for (int r = 0; r < RM; ++r) zps[r] = q_zp[r];
    // phase 2: per block int8 x int4 dot products (exact in int32), scaled and summed in float; PASSES
    // rounds of CPP channels, every load of every round unrolled (all of them in flight), one reduction
    const int CPP = int(NT) / TPC, PASSES = RN / CPP, BPL = (NB + TPC - 1) / TPC;
    int sl = int(tid) / TPC, lane = int(tid) % TPC;
    float f[PASSES * RM];
    [[unroll]] for (int p = 0; p < PASSES; ++p) {
        int n = n0 + p * CPP + sl;
        [[unroll]] for (int r = 0; r < RM; ++r) f[p * RM + r] = 0.0;
        [[unroll]] for (int i = 0; i < BPL; ++i) {
            int bk = lane + i * TPC;
            if (n < GN && bk < NB) {
                int s[RM];
                [[unroll]] for (int r = 0; r < RM; ++r) s[r] = 0;
                [[unroll]] for (int j = 0; j < BW; ++j) {
                    int qd = bk * BW + j;
                    uvec4 wv = w[n * KQ + qd];
                    [[unroll]] for (int r = 0; r < RM; ++r) s[r] += dot32(r * XR + qd * 8, wv);
                }
                int ws_ = LD(wsum, n * NB + bk);
                float sb = LD(ws, n * NB + bk);
                [[unroll]] for (int r = 0; r < RM; ++r) f[p * RM + r] += float(s[r] - zps[r] * ws_) * sb;
            }
        }
    }
    [[unroll]] for (int e = 0; e < PASSES * RM; ++e) part[e * int(NT) + int(tid)] = f[e];
    barrier();
    for (int st = TPC / 2; st > 0; st >>= 1) {
        if (lane < st) {
            [[unroll]] for (int e = 0; e < PASSES * RM; ++e) part[e * int(NT) + int(tid)] += part[e * int(NT) + int(tid) + st];
        }
        barrier();
    }
    if (lane != 0) return;
    [[unroll]] for (int p = 0; p < PASSES; ++p) {
        int n = n0 + p * CPP + sl;
        if (n >= GN) break;
        [[unroll]] for (int r = 0; r < RM; ++r) {
            int m = m0 + r;
            if (m >= GM) break;
            float v = part[(p * RM + r) * int(NT) + int(tid)] * q_inv[r];
#if HAS_BIAS
            v += LD(bias, n);
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
    }
}
