// gemm_q8_tiled.glsl's Q8_MODE 2 on s8 x s8 -> s32 cooperative matrices (the coopmat_int8 variant,
// compiler/ops/gemm_q8_coopmat.py): a workgroup of WM x WN subgroups of 32 computes a BM x BN tile, subgroup
// (wm, wn) its FM x FN 16 x 16 blocks at rows wm * BM / WM, channels wn * BN / WN.  Each K step of BKW
// words (4 int8 each) stages the BM rows' and BN channels' slices in shared memory, row-major (a row's
// BKW words contiguous, SST words apart), filled by coalesced 16-byte loads (xq bound as uvec4), the next
// step's loads issued before this step's products.  The int32 sums are exact, so they are the int_dot
// variant's bit for bit; each block then passes through a 16 x 16 shared scratch of its subgroup to the
// same epilogue (q8_out).
// CM_EMULATE (tests, CompileOptions.coopmat_emulate: lavapipe has no cooperative matrices): the same
// staging, blocks and epilogue with plain int32 sums, lane l of subgroup s (invocation 32 s + l) keeping
// the block elements the epilogue gives it (rows l / 16 + 2 t, column l % 16).
#ifndef CM_EMULATE
#define CM_EMULATE 0
#endif
#if !CM_EMULATE
// @include coopmat_int8.glsl
#define CM_UNROLL [[unroll]]
#else
#define CM_UNROLL                                // (lavapipe compiles the emulated loops faster rolled)
#endif
#define BKQ (BKW / 4)                            // 16-byte words of a row per K step
#define SST (BKW + 4)                            // shared row stride in words (16 bytes of padding)
#define FM (BM / (16 * WM))
#define FN (BN / (16 * WN))
#define NTC (32 * WM * WN)
#define LA (BM * BKQ / NTC)                      // 16-byte words each invocation stages per step: rows
#define LB (BN * BKQ / NTC)                      // channels
#if BM % (16 * WM) != 0 || BN % (16 * WN) != 0 || BKW % 8 != 0 || (BM * BKQ) % NTC != 0 || (BN * BKQ) % NTC != 0
#error gemm_q8_coopmat: BM, BN must be multiples of 16 WM, 16 WN, BKW of 8, the staged words of the invocations
#endif
shared uint sa[BM * SST];
shared uint sb[BN * SST];
#if GLU
shared uint su[BN * SST];
#endif
#if !CM_EMULATE
shared int scr[WM * WN * 256];
#endif

void main() {
    int tid = int(gl_LocalInvocationID.x);
    int wg = int(gl_WorkGroupID.x + gl_NumWorkGroups.x * gl_WorkGroupID.y);
    int m0 = (wg / TILES_N) * BM, n0 = (wg % TILES_N) * BN;
    if (m0 >= GM) return;                        // (whole workgroup: uniform)
#if CM_EMULATE
    int sg = tid / 32, lane = tid % 32;
    int acc[FM * FN][8];
#if GLU
    int acu[FM * FN][8];
#endif
    [[unroll]] for (int f = 0; f < FM * FN; ++f) [[unroll]] for (int t = 0; t < 8; ++t) {
        acc[f][t] = 0;
#if GLU
        acu[f][t] = 0;
#endif
    }
#else
    int sg = int(gl_SubgroupID), lane = int(gl_SubgroupInvocationID);
    CM_C acc[FM * FN];
#if GLU
    CM_C acu[FM * FN];
#endif
    [[unroll]] for (int f = 0; f < FM * FN; ++f) {
        acc[f] = CM_C(0);
#if GLU
        acu[f] = CM_C(0);
#endif
    }
#endif
    int wm = sg / WN, wn = sg % WN;
    uvec4 ra[LA], rb[LB];
#if GLU
    uvec4 ru[LB];
#endif
    // staged word e = tid + i * NTC: row (channel) e / BKQ, its 16-byte word e % BKQ of the step
#define STAGE_LOAD(k0) \
    [[unroll]] for (int i = 0; i < LA; ++i) { \
        int e = tid + i * NTC, m = m0 + e / BKQ, qd = (k0) / 4 + e % BKQ; \
        ra[i] = m < GM && qd < KQ ? xq[m * KQ + qd] : uvec4(0u); \
    } \
    [[unroll]] for (int i = 0; i < LB; ++i) { \
        int e = tid + i * NTC, n = n0 + e / BKQ, qd = (k0) / 4 + e % BKQ; \
        bool ok = n < GN && qd < KQ; \
        rb[i] = ok ? w[n * KQ + qd] : uvec4(0u); \
        STAGE_LOAD_U \
    }
#if GLU
#define STAGE_LOAD_U ru[i] = ok ? wu[n * KQ + qd] : uvec4(0u);
#else
#define STAGE_LOAD_U
#endif
    STAGE_LOAD(0)
    for (int k0 = 0; k0 < KQ * 4; k0 += BKW) {
        [[unroll]] for (int i = 0; i < LA; ++i) {
            int e = tid + i * NTC, o = (e / BKQ) * SST + (e % BKQ) * 4;
            sa[o] = ra[i].x; sa[o + 1] = ra[i].y; sa[o + 2] = ra[i].z; sa[o + 3] = ra[i].w;
        }
        [[unroll]] for (int i = 0; i < LB; ++i) {
            int e = tid + i * NTC, o = (e / BKQ) * SST + (e % BKQ) * 4;
            sb[o] = rb[i].x; sb[o + 1] = rb[i].y; sb[o + 2] = rb[i].z; sb[o + 3] = rb[i].w;
#if GLU
            su[o] = ru[i].x; su[o + 1] = ru[i].y; su[o + 2] = ru[i].z; su[o + 3] = ru[i].w;
#endif
        }
        barrier();
        if (k0 + BKW < KQ * 4) {                 // (uniform) the next step's words, in flight meanwhile
            STAGE_LOAD(k0 + BKW)
        }
#if CM_EMULATE
        for (int f = 0; f < FM * FN; ++f) for (int t = 0; t < 8; ++t) {
            int ra0 = ((wm * FM + f / FN) * 16 + lane / 16 + 2 * t) * SST, cb0 = ((wn * FN + f % FN) * 16 + lane % 16) * SST;
            for (int kw = 0; kw < BKW; ++kw) {
                acc[f][t] += dot4(sa[ra0 + kw], sb[cb0 + kw]);
#if GLU
                acu[f][t] += dot4(sa[ra0 + kw], su[cb0 + kw]);
#endif
            }
        }
#else
        [[unroll]] for (int kk = 0; kk < BKW; kk += 8) {
            CM_A fa[FM];
            [[unroll]] for (int i = 0; i < FM; ++i)
                coopMatLoad(fa[i], sa, ((wm * FM + i) * 16) * SST + kk, SST, gl_CooperativeMatrixLayoutRowMajor);
            [[unroll]] for (int j = 0; j < FN; ++j) {
                CM_B fb;
                coopMatLoad(fb, sb, ((wn * FN + j) * 16) * SST + kk, SST, gl_CooperativeMatrixLayoutColumnMajor);
                [[unroll]] for (int i = 0; i < FM; ++i) acc[i * FN + j] = coopMatMulAdd(fa[i], fb, acc[i * FN + j]);
#if GLU
                coopMatLoad(fb, su, ((wn * FN + j) * 16) * SST + kk, SST, gl_CooperativeMatrixLayoutColumnMajor);
                [[unroll]] for (int i = 0; i < FM; ++i) acu[i * FN + j] = coopMatMulAdd(fa[i], fb, acu[i * FN + j]);
#endif
            }
        }
#endif
        barrier();
    }
    // each 16 x 16 block through the subgroup's scratch: lane l takes rows l / 16 + 2 t, column l % 16
    int sbase = sg * 256;
    CM_UNROLL for (int f = 0; f < FM * FN; ++f) {
        int mb = m0 + (wm * FM + f / FN) * 16, nb = n0 + (wn * FN + f % FN) * 16;
        int a[8], au[8];
#if CM_EMULATE
        [[unroll]] for (int t = 0; t < 8; ++t) {
            a[t] = acc[f][t];
#if GLU
            au[t] = acu[f][t];
#else
            au[t] = 0;
#endif
        }
#else
        coopMatStore(acc[f], scr, sbase, 16, gl_CooperativeMatrixLayoutRowMajor);
        subgroupMemoryBarrierShared();
        subgroupBarrier();
        [[unroll]] for (int t = 0; t < 8; ++t) a[t] = scr[sbase + (lane / 16 + 2 * t) * 16 + lane % 16];
        subgroupBarrier();
#if GLU
        coopMatStore(acu[f], scr, sbase, 16, gl_CooperativeMatrixLayoutRowMajor);
        subgroupMemoryBarrierShared();
        subgroupBarrier();
        [[unroll]] for (int t = 0; t < 8; ++t) au[t] = scr[sbase + (lane / 16 + 2 * t) * 16 + lane % 16];
        subgroupBarrier();
#else
        [[unroll]] for (int t = 0; t < 8; ++t) au[t] = 0;
#endif
#endif
        [[unroll]] for (int t = 0; t < 8; ++t) q8_out(mb + lane / 16 + 2 * t, nb + lane % 16, a[t], au[t]);
    }
}
