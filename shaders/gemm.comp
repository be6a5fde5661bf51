// @storage16
// Tiled GEMM: out[m, g*GN + n] = epilogue(sum_k A_g[m, k] * B_g[k, n]), one workgroup per BM x BN
// output tile of one group g.  Used for FULLY_CONNECTED (A = x [GM, LDA]), 1x1 stride-1 unpadded
// convolutions (A = x viewed as [N*H*W, CI]) and every other non-depthwise convolution through
// implicit-GEMM (IM2COL: A[m, k] gathered from NHWC x with m = (n, oy, ox), k = (ky, kx, ci)).
//
// B (weights): B_T=0: re-laid out at compile time as [GROUPS][GK][GNP] (GNP = GN rounded up to 4,
//   zero-padded), read as vec4 along n.  B_T=1: as given, [GROUPS*GN][GK] (runtime weights).
// A: VEC_A=1 reads x as vec4 along k (needs GK, LDA and the group offset % 4 == 0).
//
// Each of the NT = (BM/TM)*(BN/TN)*KS invocations accumulates a TM x TN register block for one of
// KS K-slices; a K chunk of BK*KS rows is staged through shared memory (A transposed to [k][m],
// B as [k][n]) with the next chunk prefetched into registers while the current one is consumed.
// KS > 1 (split-K inside the workgroup) sums the slices through shared memory before the epilogue.
// Register blocks are strided (row ty + i*BM/TM, column tx + j*BN/TN) so that shared reads are
// conflict-free and global stores coalesce.  Every edge (M, N, K) is bounds-checked.
// Epilogue per output: + bias[col], ACT, then RESIDUAL: ACT2(v + res[same index]), then EPI_CHAIN:
// a fused elementwise chain (epi_chain.glsl: GELU, bias / residual ADD, scaling ... with inputs e1..).
//
// Workgroups: wg = (tm * GROUPS + g) * TILES_N + tn (row tile slowest, so a prefix of the grid computes
// exactly the first rows: batch-native dispatches of b <= max items).
//
// SPLIT_REDUCE = S: the reduce dispatch of a gemm split across workgroups (see its main() below).
// Defines: GM GN GK GROUPS LDA LDC BM BN BK TM TN KS TILES_M TILES_N NWG VEC_A B_T GNP
//          HAS_BIAS ACT RESIDUAL ACT2 EPI_CHAIN (epi_chain.glsl); IM2COL with H W OH OW KW CIG SH SW DH DW PT PL.
//
// COOPMAT=1 (the `coopmat` variant of --precision fp16, used where the device has
// VK_KHR_cooperative_matrix 16x16x16 fp16*fp16+fp32 at subgroup scope and subgroup size CM_SG): its own
// prefetched, bounds-checked loads (cm_*) move A and B as raw halves, 16 bytes at a time where rows
// allow (CM_AV / CM_BV = 8), into one uvec4 shared array (A as [BM][BK], B as [BK][BN] or, for runtime
// weights, [BN][BK], rows padded by 8 halves; CM_STAGES = 2: double-buffered, one barrier per K chunk),
// multiplied with cooperative matrices into fp32 accumulators.  CM_WM x CM_WN subgroups of CM_SG
// invocations; each owns CM_TM x CM_TN 16x16 accumulator tiles (BM = CM_WM*CM_TM*16, BN = CM_WN*CM_TN*16,
// KS = 1).  Epilogue: CM_DIRECT (no epilogue to run) stores a tile inside the output straight to it;
// otherwise one tile at a time goes to the subgroup's staging area (the A/B bytes, free after the K
// loop) and `finish` runs on it, so bias, activations, residual, chain and fake-quant are the plain path's.
// CM_KS > 1 (small M: ops/gemm_coopmat.py SMALL_PLANS): CM_KS times as many subgroups, each group of
// CM_WM x CM_WN taking every CM_KS-th 16-deep step of each K chunk (BK a multiple of 16 * CM_KS); after the
// loop all accumulator tiles go to shared memory and every invocation sums its outputs' slices for `finish`.
// CM_EMULATE=1 (tests only, GPUC_TEST_COOPMAT_EMULATE): the same tiling, staging and epilogue with
// the cooperative-matrix operations done per invocation (CM_SG invocations stand for a subgroup, each
// owning 256 / CM_SG elements of a tile), so devices without the extension can check everything else.
#extension GL_EXT_control_flow_attributes : enable
#ifndef COOPMAT
#define COOPMAT 0
#endif
#if COOPMAT
#if CM_EMULATE
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#else
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#endif
#define BKT BK
#ifndef CM_KS
#define CM_KS 1
#endif
#define NT (CM_WM * CM_WN * CM_KS * CM_SG)   // == local_size_x
// Shared: one uvec4 array (16-byte units).  Per stage, A as [BM][SA_LD] halves, then B as [BK][SB_LD]
// (B_T=0) or [BN][SB_LD] (B_T=1: column-major, as the runtime weights are laid out); rows padded by
// 8 halves (16-byte aligned rows whose 8-row groups fall on distinct banks: conflict-free matrix
// loads).  After the K loop the same bytes stage each subgroup's 16x16 fp32 accumulator tile for the
// epilogue (64 uvec4 per subgroup).
#define SA_LD (BK + 8)
#if B_T
#define SB_LD (BK + 8)
#define SB_SIZE (BN * SB_LD)
#else
#define SB_LD (BN + 8)
#define SB_SIZE (BK * SB_LD)
#endif
#define SB_OFF (BM * SA_LD)
#ifndef CM_STAGES
#define CM_STAGES 1
#endif
// CM_STAGES = 2: two such buffers (the next chunk is stored into one while the other is multiplied).
#define CM_STAGE (SB_OFF + SB_SIZE)
#define CM_AB_Q (CM_STAGES * CM_STAGE / 8)
#if CM_KS > 1
#define CM_C_Q (CM_KS * CM_WM * CM_WN * CM_TM * CM_TN * 64)     // every subgroup's tiles, for the K-slice sum
#else
#define CM_C_Q (CM_WM * CM_WN * 64)
#endif
shared uvec4 smem_q[CM_AB_Q > CM_C_Q ? CM_AB_Q : CM_C_Q];
#else
#ifndef SV4
#define SV4 0
#endif
#define BMT (BM / TM)
#define BNT (BN / TN)
#define BKT (BK * KS)
#define NT (BMT * BNT * KS)          // == local_size_x
#if SV4
// SV4=1 (KS = 1; TM, TN multiples of 4): shared memory as vec4, two stages (one barrier per K chunk).
// A as [BK][SA4] vec4 (m contiguous; rows padded by one vec4 so the 4 k-rows a thread stores fall on
// distinct banks), then B as [BK][BN/4].  An invocation's register block is TM/4 x TN/4 groups of 4
// consecutive rows / columns (row q*4*BMT + ty*4 + i, column p*4*BNT + tx*4 + j): each k step reads
// TM/4 + TN/4 vec4 (a quarter-warp's B reads are 8 consecutive vec4, its A reads one broadcast vec4).
#define SA4 (BM / 4 + 1)
#define SB4 (BN / 4)
#define SV4_STAGE (BK * (SA4 + SB4))
shared vec4 smem4[2 * SV4_STAGE];
#define SV4_A(buf, k, m) smem4[(buf) + (k) * SA4 + ((m) >> 2)][(m) & 3]
#define SV4_B4(buf, k, n4) smem4[(buf) + BK * SA4 + (k) * SB4 + (n4)]
#else
// Shared layout: per K-slice, A as [BK][BM+1] then B as [BK][BN].  Slices are padded so that the
// slices sharing a warp (KS > 1 with fewer than 32 invocations per slice) read distinct banks.
#define SA_STRIDE (BM + 1)
#define SA_SLICE (BK * SA_STRIDE + ((BMT - BK * SA_STRIDE) % 32 + 32) % 32)
#define SB_SLICE (BK * BN + ((BNT - BK * BN) % 32 + 32) % 32)
#define SB_OFF (KS * SA_SLICE)
#define SA_ROW(kr) (((kr) / BK) * SA_SLICE + ((kr) % BK) * SA_STRIDE)
#define SB_ROW(kr) (SB_OFF + ((kr) / BK) * SB_SLICE + ((kr) % BK) * BN)
#define SMEM_AB (SB_OFF + KS * SB_SLICE)
#if KS > 1 && KS * BM * BN > SMEM_AB
#define SMEM_SIZE (KS * BM * BN)
#else
#define SMEM_SIZE SMEM_AB
#endif
shared float smem[SMEM_SIZE];
#define SMEM_ST(i, v) smem[i] = (v)
#endif
#endif

#ifndef LN_FOLD
#define LN_FOLD 0
#endif
#if LN_FOLD
void ln_add4(int i, int k0, vec4 v);
int ln_kb;                                       // depth of the next A chunk stored (ln_add4)
#endif

#if !COOPMAT
// Global -> register staging of one K chunk (prefetched while the previous chunk is multiplied);
// the COOPMAT path has its own (cm_* below).
#if VEC_A
#define A_W (BKT / 4)
#define AVEC vec4
#else
#define A_W BKT
#define AVEC float
#endif
#define A_N (A_W * BM)
#define A_PER ((A_N + NT - 1) / NT)

#if B_T
#define B_N (BKT * BN)
#define BVEC float
#else
#define B_W (BN / 4)
#define B_N (B_W * BKT)
#define BVEC vec4
#endif
#define B_PER ((B_N + NT - 1) / NT)

AVEC ra[A_PER];
BVEC rb[B_PER];
int a_base[A_PER];        // element offset of the row's data in x (IM2COL: of the image), -1: row out of range
#if IM2COL
int a_iy[A_PER];
int a_ix[A_PER];
#endif

void init_a(int m0, int g) {
    int tid = int(gl_LocalInvocationIndex);
    [[unroll]] for (int i = 0; i < A_PER; ++i) {
        int row = (tid + i * NT) / A_W;
        int m = m0 + row;
        a_base[i] = -1;
        if (m < GM && row < BM) {
#if IM2COL
            int ox = m % OW;
            int t = m / OW;
            int oy = t % OH;
            a_base[i] = (t / OH) * (H * W * LDA) + g * CIG;
            a_iy[i] = oy * SH - PT;
            a_ix[i] = ox * SW - PL;
#else
            a_base[i] = m * LDA + g * GK;
#endif
        }
    }
}

void load_a(int kb) {
    int tid = int(gl_LocalInvocationIndex);
    [[unroll]] for (int i = 0; i < A_PER; ++i) {
        int e = tid + i * NT;
#if VEC_A
        int k = kb + (e % A_W) * 4;
#else
        int k = kb + e % A_W;
#endif
        AVEC v = AVEC(0.0);
        if (a_base[i] >= 0 && k < GK) {
#if IM2COL
            int ci = k % CIG;
            int t = k / CIG;
            int iy = a_iy[i] + (t / KW) * DH;
            int ix = a_ix[i] + (t % KW) * DW;
            if (iy >= 0 && iy < H && ix >= 0 && ix < W) {
                int addr = a_base[i] + (iy * W + ix) * LDA + ci;
#if VEC_A
                v = LD(x, addr >> 2);
#else
                v = LD(x, addr);
#endif
            }
#elif VEC_A
            v = LD(x, (a_base[i] + k) >> 2);
#else
            v = LD(x, a_base[i] + k);
#endif
        }
        ra[i] = v;
    }
}

void store_a(int buf) {
    int tid = int(gl_LocalInvocationIndex);
    [[unroll]] for (int i = 0; i < A_PER; ++i) {
        int e = tid + i * NT;
        if (e < A_N) {
            int row = e / A_W;
#if SV4 && VEC_A
            int kr = (e % A_W) * 4;
            SV4_A(buf, kr, row) = ra[i].x;
            SV4_A(buf, kr + 1, row) = ra[i].y;
            SV4_A(buf, kr + 2, row) = ra[i].z;
            SV4_A(buf, kr + 3, row) = ra[i].w;
#elif SV4
            SV4_A(buf, e % A_W, row) = ra[i];
#elif VEC_A
            int kr = (e % A_W) * 4;
            SMEM_ST(buf + SA_ROW(kr) + row, ra[i].x);
            SMEM_ST(buf + SA_ROW(kr + 1) + row, ra[i].y);
            SMEM_ST(buf + SA_ROW(kr + 2) + row, ra[i].z);
            SMEM_ST(buf + SA_ROW(kr + 3) + row, ra[i].w);
#else
            SMEM_ST(buf + SA_ROW(e % A_W) + row, ra[i]);
#endif
#if LN_FOLD && VEC_A
            if (a_base[i] >= 0) ln_add4(i, ln_kb + (e % A_W) * 4, ra[i]);
#endif
        }
    }
#if LN_FOLD
    ln_kb += BKT;
#endif
}

void load_b(int kb, int n0, int g) {
    int tid = int(gl_LocalInvocationIndex);
    [[unroll]] for (int i = 0; i < B_PER; ++i) {
        int e = tid + i * NT;
#if B_T
        int k = kb + e % BKT;
        int n = n0 + e / BKT;
        float v = 0.0;
        if (e < B_N && k < GK && n < GN) v = LD(w, (g * GN + n) * GK + k);
#else
        int k = kb + e / B_W;
        int n = n0 + (e % B_W) * 4;
        BVEC v = BVEC(0.0);
        if (e < B_N && k < GK && n < GNP) v = LD(w, ((g * GK + k) * GNP + n) >> 2);
#endif
        rb[i] = v;
    }
}

void store_b(int buf) {
    int tid = int(gl_LocalInvocationIndex);
    [[unroll]] for (int i = 0; i < B_PER; ++i) {
        int e = tid + i * NT;
        if (e < B_N) {
#if SV4 && B_T
            { int n = e / BKT; SV4_B4(buf, e % BKT, n >> 2)[n & 3] = rb[i]; }
#elif SV4
            SV4_B4(buf, e / B_W, e % B_W) = rb[i];
#elif B_T
            SMEM_ST(buf + SB_ROW(e % BKT) + e / BKT, rb[i]);
#else
            int o = buf + SB_ROW(e / B_W) + (e % B_W) * 4;
            smem[o] = rb[i].x;
            smem[o + 1] = rb[i].y;
            smem[o + 2] = rb[i].z;
            smem[o + 3] = rb[i].w;
#endif
        }
    }
}

#endif  // !COOPMAT

#if COOPMAT
// Global -> register staging of one K chunk (prefetched while the previous chunk is multiplied), as
// raw halves: A in groups of CM_AV consecutive k (8: two f16vec4 = 16 bytes; 4: one f16vec4, or four
// gathered elements without VEC_A), B (B_T=0) in groups of CM_BV consecutive n, B (B_T=1) in groups
// of 4 consecutive k.  A group of 8 is one uvec4 of registers and of shared memory, of 4 a uvec2.
#ifndef CM_AV
#define CM_AV 4
#endif
#ifndef CM_BV
#define CM_BV 4
#endif
#if B_T
#undef CM_BV
#define CM_BV 4
#define CB_W (BK / 4)                // groups per B row (n) of a chunk
#define CB_N (CB_W * BN)
#else
#define CB_W (BN / CM_BV)            // groups per B row (k) of a chunk
#define CB_N (CB_W * BK)
#endif
#define CA_W (BK / CM_AV)            // groups per A row of a chunk
#define CA_N (CA_W * BM)
#define CA_PER ((CA_N + NT - 1) / NT)
#define CB_PER ((CB_N + NT - 1) / NT)
#if CM_AV == 8
#define CA_T uvec4
#else
#define CA_T uvec2
#endif
#if CM_BV == 8
#define CB_T uvec4
#else
#define CB_T uvec2
#endif
CA_T ca[CA_PER];
CB_T cb[CB_PER];
int a_base[CA_PER];      // element offset of the row's data in x (IM2COL: of the image), -1: row out of range
#if IM2COL
int a_iy[CA_PER];
int a_ix[CA_PER];
#endif

uvec2 cm_pack4(f16vec4 v) { return uvec2(packFloat2x16(v.xy), packFloat2x16(v.zw)); }

void cm_init_a(int m0, int g) {
    int tid = int(gl_LocalInvocationIndex);
    [[unroll]] for (int i = 0; i < CA_PER; ++i) {
        int row = (tid + i * NT) / CA_W;
        int m = m0 + row;
        a_base[i] = -1;
        if (m < GM && row < BM) {
#if IM2COL
            int ox = m % OW;
            int t = m / OW;
            int oy = t % OH;
            a_base[i] = (t / OH) * (H * W * LDA) + g * CIG;
            a_iy[i] = oy * SH - PT;
            a_ix[i] = ox * SW - PL;
#else
            a_base[i] = m * LDA + g * GK;
#endif
        }
    }
}

#if !VEC_A
// One element A[row i][k] (zero outside the matrix / the padded image), raw float16.
float16_t a_elem(int i, int k) {
    if (k >= GK) return float16_t(0.0);
#if IM2COL
    int ci = k % CIG;
    int t = k / CIG;
    int iy = a_iy[i] + (t / KW) * DH;
    int ix = a_ix[i] + (t % KW) * DW;
    if (iy < 0 || iy >= H || ix < 0 || ix >= W) return float16_t(0.0);
    return x[a_base[i] + (iy * W + ix) * LDA + ci];
#else
    return x[a_base[i] + k];
#endif
}
#endif

void cm_load_a(int kb) {
    int tid = int(gl_LocalInvocationIndex);
    [[unroll]] for (int i = 0; i < CA_PER; ++i) {
        int e = tid + i * NT;
        int k = kb + (e % CA_W) * CM_AV;
        CA_T v = CA_T(0);
#if VEC_A
        if (a_base[i] >= 0 && k < GK) {
#if IM2COL
            int ci = k % CIG;
            int t = k / CIG;
            int iy = a_iy[i] + (t / KW) * DH;
            int ix = a_ix[i] + (t % KW) * DW;
            int addr = -1;
            if (iy >= 0 && iy < H && ix >= 0 && ix < W) addr = (a_base[i] + (iy * W + ix) * LDA + ci) >> 2;
#else
            int addr = (a_base[i] + k) >> 2;
#endif
            if (addr >= 0) {
#if CM_AV == 8
                v = uvec4(cm_pack4(x[addr]), cm_pack4(x[addr + 1]));
#else
                v = cm_pack4(x[addr]);
#endif
            }
        }
#else
        if (a_base[i] >= 0)
            v = cm_pack4(f16vec4(a_elem(i, k), a_elem(i, k + 1), a_elem(i, k + 2), a_elem(i, k + 3)));
#endif
        ca[i] = v;
    }
}

// Store a group of CM_AV / CM_BV halves at half offset h (a multiple of the group size).
void cm_put(int h, uvec4 v) { smem_q[h >> 3] = v; }
void cm_put(int h, uvec2 v) {
    int c = (h >> 1) & 3;
    smem_q[h >> 3][c] = v.x;
    smem_q[h >> 3][c + 1] = v.y;
}

void cm_store_a(int buf) {
    int tid = int(gl_LocalInvocationIndex);
    [[unroll]] for (int i = 0; i < CA_PER; ++i) {
        int e = tid + i * NT;
        if (e < CA_N) cm_put(buf + (e / CA_W) * SA_LD + (e % CA_W) * CM_AV, ca[i]);
#if LN_FOLD
        if (e < CA_N && a_base[i] >= 0) {
            int k0 = ln_kb + (e % CA_W) * CM_AV;
            ln_add4(i, k0, vec4(unpackHalf2x16(ca[i].x), unpackHalf2x16(ca[i].y)));
#if CM_AV == 8
            ln_add4(i, k0 + 4, vec4(unpackHalf2x16(ca[i].z), unpackHalf2x16(ca[i].w)));
#endif
        }
#endif
    }
#if LN_FOLD
    ln_kb += BK;
#endif
}

#if B_T
float16_t b_elem(int n, int k, int g) {
    return k < GK ? w[(g * GN + n) * GK + k] : float16_t(0.0);
}
#endif

void cm_load_b(int kb, int n0, int g) {
    int tid = int(gl_LocalInvocationIndex);
    [[unroll]] for (int i = 0; i < CB_PER; ++i) {
        int e = tid + i * NT;
        CB_T v = CB_T(0);
#if B_T
        int k = kb + (e % CB_W) * 4;
        int n = n0 + e / CB_W;
        if (e < CB_N && n < GN)
            v = cm_pack4(f16vec4(b_elem(n, k, g), b_elem(n, k + 1, g), b_elem(n, k + 2, g), b_elem(n, k + 3, g)));
#else
        int k = kb + e / CB_W;
        int n = n0 + (e % CB_W) * CM_BV;
        if (e < CB_N && k < GK && n < GNP) {
            int addr = ((g * GK + k) * GNP + n) >> 2;
#if CM_BV == 8
            v = uvec4(cm_pack4(w[addr]), cm_pack4(w[addr + 1]));
#else
            v = cm_pack4(w[addr]);
#endif
        }
#endif
        cb[i] = v;
    }
}

void cm_store_b(int buf) {
    int tid = int(gl_LocalInvocationIndex);
    [[unroll]] for (int i = 0; i < CB_PER; ++i) {
        int e = tid + i * NT;
#if B_T
        if (e < CB_N) cm_put(buf + SB_OFF + (e / CB_W) * SB_LD + (e % CB_W) * 4, cb[i]);
#else
        if (e < CB_N) cm_put(buf + SB_OFF + (e / CB_W) * SB_LD + (e % CB_W) * CM_BV, cb[i]);
#endif
    }
}
#endif  // COOPMAT

#if LN_FOLD
// LN_FOLD=1: a LayerNorm over A's rows folded in (ops/ln_fold.py): w holds gamma * W, bias the folded
// beta @ W + bias, and lnc[n] the column sums of w, so that LN(A) @ W + bias = rs[m] * (A @ w - mu[m] * lnc[n])
// + bias[n] (GROUPS = 1, VEC_A).  The statistics come from the A chunks the K loop stages anyway: each
// invocation keeps, for each of its A slots (a fixed row and group of k in every chunk), the count n, the
// first value c and the fp32 sums of x - c and (x - c)^2 (store_a / cm_store_a: ln_add4); after the loop
// the slots of each row are combined in order (ln_finish: mean, then sum (x - mean)^2 from each slot's
// shifted sums, so that a mean far from zero cancels nothing) into ln_sh: mu [BM], 1 / sqrt(var + LN_EPS) [BM].
#if COOPMAT
#define LN_PER CA_PER
#define LN_W CA_W
#define LN_SLOTS CA_N
#define LN_PST(i, v) smem_q[(i) >> 2][(i) & 3] = floatBitsToUint(v)
#define LN_PLD(i) uintBitsToFloat(smem_q[(i) >> 2][(i) & 3])
#else
#define LN_PER A_PER
#define LN_W A_W
#define LN_SLOTS A_N
#if SV4
#define LN_PST(i, v) smem4[(i) >> 2][(i) & 3] = (v)
#define LN_PLD(i) smem4[(i) >> 2][(i) & 3]
#else
#define LN_PST(i, v) smem[i] = (v)
#define LN_PLD(i) smem[i]
#endif
#endif
shared float ln_sh[2 * BM];
float ln_s[LN_PER], ln_q[LN_PER], ln_c[LN_PER], ln_n[LN_PER];

void ln_init() {
    ln_kb = 0;
    [[unroll]] for (int i = 0; i < LN_PER; ++i) {
        ln_s[i] = 0.0;
        ln_q[i] = 0.0;
        ln_c[i] = 0.0;
        ln_n[i] = 0.0;
    }
}

void ln_add4(int i, int k0, vec4 v) {
    if (k0 < GK) {                               // GK % 4 == 0: all four or none
        if (ln_n[i] == 0.0) ln_c[i] = v.x;
        vec4 d = v - ln_c[i];
        ln_s[i] += (d.x + d.y) + (d.z + d.w);
        ln_q[i] += dot(d, d);
        ln_n[i] += 4.0;
    }
}

void ln_finish() {
    int tid = int(gl_LocalInvocationIndex);
    [[unroll]] for (int i = 0; i < LN_PER; ++i) {
        int e = tid + i * NT;
        if (e < LN_SLOTS) {
            LN_PST(4 * e, ln_s[i]);
            LN_PST(4 * e + 1, ln_q[i]);
            LN_PST(4 * e + 2, ln_c[i]);
            LN_PST(4 * e + 3, ln_n[i]);
        }
    }
    barrier();
    for (int r = tid; r < BM; r += NT) {
        float sum = 0.0, cnt = 0.0;
        for (int j = 0; j < LN_W; ++j) {
            int e = r * LN_W + j;
            float n = LN_PLD(4 * e + 3);
            sum += LN_PLD(4 * e) + n * LN_PLD(4 * e + 2);
            cnt += n;
        }
        float mu = sum / max(cnt, 1.0);
        float q = 0.0;
        for (int j = 0; j < LN_W; ++j) {
            int e = r * LN_W + j;
            float dc = LN_PLD(4 * e + 2) - mu;
            q += LN_PLD(4 * e + 1) + 2.0 * dc * LN_PLD(4 * e) + LN_PLD(4 * e + 3) * dc * dc;
        }
        ln_sh[r] = mu;
        ln_sh[BM + r] = inversesqrt(max(q / max(cnt, 1.0), 0.0) + LN_EPS);
    }
    barrier();
}
#define LN_INIT() ln_init();
#define LN_FINISH() ln_finish();
#else
#define LN_INIT()
#define LN_FINISH()
#endif

// @include epi_chain.glsl
// @include gemm_epi.glsl

void finish(int m, int n, int g, float v) {
    if (m < GM && n < GN) {
        int col = g * GN + n;
        int o = m * LDC + col;
#if LN_FOLD
        v = ln_sh[BM + m % BM] * (v - ln_sh[m % BM] * LD(lnc, col));
#endif
        v = gemm_epi(v, BIAS_AT(col), RES_AT(o));
#if EPI_CHAIN
        v = epi_chain(o, v);                     // a fused elementwise chain (epi_chain.glsl)
#endif
        ST(out_, o, v);
    }
}

// Workgroup order: the m-tile varies slowest (wg = (tm * GROUPS + g) * TILES_N + tn), so the first
// k * GROUPS * TILES_N workgroups compute exactly the first k * BM rows.
#define TILE_OF_WG(wg, tm, g, tn) { tn = (wg) % TILES_N; int t_ = (wg) / TILES_N; g = t_ % GROUPS; tm = t_ / GROUPS; }

#ifndef SPLIT_REDUCE
#define SPLIT_REDUCE 0
#endif
#if SPLIT_REDUCE
// The second dispatch of a gemm split across workgroups (ops/gemm_split.py): x holds SPLIT_REDUCE partial
// sums per output as [GM][SPLIT_REDUCE][GN] (float32); one invocation sums an output's partials in order
// and runs the epilogue (GROUPS = 1).
void main() {
    uint gid = gpuc_gid();
    if (gid >= TOTAL) return;
    int m = int(gid) / GN, n = int(gid) % GN;
    float v = 0.0;
    for (int s = 0; s < SPLIT_REDUCE; ++s) v += LD(x, (m * SPLIT_REDUCE + s) * GN + n);
    finish(m, n, 0, v);
}
#elif COOPMAT
#ifndef CM_EMULATE
#define CM_EMULATE 0
#endif
#ifndef CM_DIRECT
#define CM_DIRECT 0
#endif
#define CM_ACC coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>
#define SM_HALF(i) unpackFloat2x16(smem_q[(i) >> 3][((i) >> 1) & 3])[(i) & 1]
#define SM_C(i) smem_q[(i) >> 2][(i) & 3]        // the epilogue's fp32 staging (bits), 4 per uvec4

// The register epilogue (CM_DIRECT) of a full 16x16 tile at output row mt, column col: the accumulator
// tile `v` (CM_T: a coopmat; under CM_EMULATE this invocation's 256 / CM_SG elements, element q at tile
// position lane + q * CM_SG) gets bias, activation, residual and chain as `finish` gives them, with each
// operand loaded as a matrix of the same type (CM_LOAD_ROW: row r at base + r * stride, stride 0
// repeating a row vector; CM_LOAD_COL: element (r, c) at base + r, a column vector), so that component q
// of every operand holds the same position; then it goes to out_ in out_'s storage type.
// Chain input k (ops/epi_chain.py tile_access): EPI_CM<k> 0: row-major with row stride EPI_SR<k> (0: a row
// vector); 1: a column vector; 2: element 0 throughout.
#if CM_EMULATE
#define CM_T float[256 / CM_SG]
#define CM_DECL(m) float m[256 / CM_SG]
#define CM_LOAD_ROW(m, b, base, stride) for (int q_ = 0; q_ < 256 / CM_SG; ++q_) { int e_ = lane + q_ * CM_SG; m[q_] = LD(b, (base) + (e_ / 16) * (stride) + e_ % 16); }
#define CM_LOAD_COL(m, b, base) for (int q_ = 0; q_ < 256 / CM_SG; ++q_) m[q_] = LD(b, (base) + (lane + q_ * CM_SG) / 16);
#define CM_FILL(m, x) for (int q_ = 0; q_ < 256 / CM_SG; ++q_) m[q_] = (x);
#define CM_STORE(m, b, base, stride) for (int q_ = 0; q_ < 256 / CM_SG; ++q_) { int e_ = lane + q_ * CM_SG; ST(b, (base) + (e_ / 16) * (stride) + e_ % 16, m[q_]); }
#else
#define CM_T CM_ACC
#define CM_DECL(m) CM_ACC m
#define CM_OF(b) coopmat<b##_S, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>
#define CM_LOAD_ROW(m, b, base, stride) { CM_OF(b) t_; coopMatLoad(t_, b, base, stride, gl_CooperativeMatrixLayoutRowMajor); m = CM_ACC(t_); }
#define CM_LOAD_COL(m, b, base) { CM_OF(b) t_; coopMatLoad(t_, b, base, 0, gl_CooperativeMatrixLayoutColumnMajor); m = CM_ACC(t_); }
#define CM_FILL(m, x) m = CM_ACC(x);
#define CM_STORE(m, b, base, stride) { CM_OF(b) t_ = CM_OF(b)(m); coopMatStore(t_, b, base, stride, gl_CooperativeMatrixLayoutRowMajor); }
#endif
#define CM_CHAIN_LOAD(m, k, b) \
    if (EPI_CM##k == 0) { CM_LOAD_ROW(m, b, mt * EPI_SR##k + col, EPI_SR##k) } \
    else if (EPI_CM##k == 1) { CM_LOAD_COL(m, b, mt) } \
    else { CM_FILL(m, LD(b, 0)) }
#if CM_DIRECT
void cm_epilogue(CM_T v, int mt, int col, int lane) {
    CM_DECL(bm);                                 // bias and residual as matrices (0.0 without them)
    CM_DECL(rm);
#if HAS_BIAS
    CM_LOAD_ROW(bm, bias, col, 0)
#else
    CM_FILL(bm, 0.0)
#endif
#if RESIDUAL
    CM_LOAD_ROW(rm, res, mt * LDC + col, LDC)
#else
    CM_FILL(rm, 0.0)
#endif
#if EPI_CHAIN && EPI_NIN > 1
    CM_DECL(c1); CM_CHAIN_LOAD(c1, 1, e1)
#endif
#if EPI_CHAIN && EPI_NIN > 2
    CM_DECL(c2); CM_CHAIN_LOAD(c2, 2, e2)
#endif
#if EPI_CHAIN && EPI_NIN > 3
    CM_DECL(c3); CM_CHAIN_LOAD(c3, 3, e3)
#endif
#if EPI_CHAIN && EPI_NIN > 4
    CM_DECL(c4); CM_CHAIN_LOAD(c4, 4, e4)
#endif
#if EPI_CHAIN && EPI_NIN > 5
    CM_DECL(c5); CM_CHAIN_LOAD(c5, 5, e5)
#endif
#if EPI_CHAIN && EPI_NIN > 6
    CM_DECL(c6); CM_CHAIN_LOAD(c6, 6, e6)
#endif
    [[unroll]] for (int q = 0; q < v.length(); ++q) {
        float x = gemm_epi(v[q], bm[q], rm[q]);
#if EPI_CHAIN
        float x1 = 0.0, x2 = 0.0, x3 = 0.0, x4 = 0.0, x5 = 0.0, x6 = 0.0;
#if EPI_NIN > 1
        x1 = c1[q];
#endif
#if EPI_NIN > 2
        x2 = c2[q];
#endif
#if EPI_NIN > 3
        x3 = c3[q];
#endif
#if EPI_NIN > 4
        x4 = c4[q];
#endif
#if EPI_NIN > 5
        x5 = c5[q];
#endif
#if EPI_NIN > 6
        x6 = c6[q];
#endif
        x = epi_body(x, x1, x2, x3, x4, x5, x6);
#endif
        v[q] = x;
    }
    CM_STORE(v, out_, mt * LDC + col, LDC)
}
#endif
void main() {
    int wg = int(gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x);
    if (wg >= NWG) return;                       // whole workgroup: uniform
    int tm, g, tn;
    TILE_OF_WG(wg, tm, g, tn);
    int m0 = tm * BM, n0 = tn * BN;
#if CM_EMULATE
    int sg = int(gl_LocalInvocationIndex) / CM_SG, lane = int(gl_LocalInvocationIndex) % CM_SG;
    float acc[CM_TM][CM_TN][256 / CM_SG];
    [[unroll]] for (int i = 0; i < CM_TM; ++i)
        [[unroll]] for (int j = 0; j < CM_TN; ++j)
            for (int q = 0; q < 256 / CM_SG; ++q) acc[i][j][q] = 0.0;
#else
    int sg = int(gl_SubgroupID), lane = int(gl_SubgroupInvocationID);
    CM_ACC acc[CM_TM][CM_TN];
    [[unroll]] for (int i = 0; i < CM_TM; ++i)
        [[unroll]] for (int j = 0; j < CM_TN; ++j) acc[i][j] = CM_ACC(0.0);
#endif
#if CM_KS > 1
    int ks = sg / (CM_WM * CM_WN);               // this subgroup's K slice (16-deep steps ks, ks + CM_KS, ...)
    int wm = (sg % (CM_WM * CM_WN)) / CM_WN, wn = sg % CM_WN;
#else
    const int ks = 0;
    int wm = sg / CM_WN, wn = sg % CM_WN;
#endif

    LN_INIT()
    cm_init_a(m0, g);
    cm_load_a(0);
    cm_load_b(0, n0, g);
    int buf = 0;                                 // shared offset (halves) of the stage being multiplied
#if CM_STAGES == 2
    cm_store_a(0);
    cm_store_b(0);
    barrier();
#endif
    for (int kb = 0; kb < GK; kb += BK) {
        bool more = kb + BK < GK;
#if CM_STAGES == 1
        cm_store_a(0);
        cm_store_b(0);
        barrier();
#endif
        if (more) {                              // prefetch the next chunk while this one is used
            cm_load_a(kb + BK);
            cm_load_b(kb + BK, n0, g);
        }
        [[unroll]] for (int kk = ks * 16; kk < BK; kk += 16 * CM_KS) {
#if CM_EMULATE
            for (int i = 0; i < CM_TM; ++i)
                for (int j = 0; j < CM_TN; ++j)
                    for (int q = 0; q < 256 / CM_SG; ++q) {
                        int e = lane + q * CM_SG;
                        int ao = buf + ((wm * CM_TM + i) * 16 + e / 16) * SA_LD + kk;
                        int nn = (wn * CM_TN + j) * 16 + e % 16;
                        for (int u = 0; u < 16; ++u) {
#if B_T
                            int bo = buf + SB_OFF + nn * SB_LD + kk + u;
#else
                            int bo = buf + SB_OFF + (kk + u) * SB_LD + nn;
#endif
                            acc[i][j][q] += float(SM_HALF(ao + u)) * float(SM_HALF(bo));
                        }
                    }
#else
            coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> fa[CM_TM];
            coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB> fb[CM_TN];
            [[unroll]] for (int i = 0; i < CM_TM; ++i)
                coopMatLoad(fa[i], smem_q, (buf + ((wm * CM_TM + i) * 16) * SA_LD + kk) >> 3, SA_LD / 8,
                            gl_CooperativeMatrixLayoutRowMajor);
            [[unroll]] for (int j = 0; j < CM_TN; ++j)
#if B_T
                coopMatLoad(fb[j], smem_q, (buf + SB_OFF + (wn * CM_TN + j) * 16 * SB_LD + kk) >> 3, SB_LD / 8,
                            gl_CooperativeMatrixLayoutColumnMajor);
#else
                coopMatLoad(fb[j], smem_q, (buf + SB_OFF + kk * SB_LD + (wn * CM_TN + j) * 16) >> 3, SB_LD / 8,
                            gl_CooperativeMatrixLayoutRowMajor);
#endif
            [[unroll]] for (int i = 0; i < CM_TM; ++i)
                [[unroll]] for (int j = 0; j < CM_TN; ++j) acc[i][j] = coopMatMulAdd(fa[i], fb[j], acc[i][j]);
#endif
        }
#if CM_STAGES == 2
        if (more) {
            buf = CM_STAGE - buf;
            cm_store_a(buf);
            cm_store_b(buf);
        }
#endif
        barrier();
    }
    LN_FINISH()
#if CM_KS > 1
    // Split-K across the workgroup's subgroups: every subgroup's tiles go to shared memory (the A/B bytes,
    // free after the loop's last barrier), and all invocations sum each output's CM_KS slices in order
    // and run `finish` on it.
    [[unroll]] for (int i = 0; i < CM_TM; ++i)
        [[unroll]] for (int j = 0; j < CM_TN; ++j) {
            int tile = (sg * CM_TM + i) * CM_TN + j;
#if CM_EMULATE
            for (int q = 0; q < 256 / CM_SG; ++q) SM_C(tile * 256 + lane + q * CM_SG) = floatBitsToUint(acc[i][j][q]);
#else
            coopMatStore(acc[i][j], smem_q, tile * 64, 4, gl_CooperativeMatrixLayoutRowMajor);
#endif
        }
    barrier();
    for (int e = int(gl_LocalInvocationIndex); e < BM * BN; e += NT) {
        int r = e / BN, c = e % BN;
        int twm = (r >> 4) / CM_TM, ti = (r >> 4) % CM_TM, twn = (c >> 4) / CM_TN, tj = (c >> 4) % CM_TN;
        int at = ((twm * CM_WN + twn) * CM_TM + ti) * CM_TN + tj;      // the tile of K slice 0
        int within = (r & 15) * 16 + (c & 15);
        float v = 0.0;
        for (int q = 0; q < CM_KS; ++q)
            v += uintBitsToFloat(SM_C((at + q * CM_WM * CM_WN * CM_TM * CM_TN) * 256 + within));
        finish(m0 + r, n0 + c, g, v);
    }
#else
    // Epilogue, one 16x16 accumulator tile at a time.  CM_DIRECT (no fake-quant; 16-byte aligned output
    // rows and operands, ops/gemm_coopmat.py direct_store): a tile inside the output gets its epilogue as
    // matrix operations (cm_epilogue: bias, residual and chain inputs loaded as matrices, the per-element
    // steps over each invocation's components) and is stored straight to out_.  Otherwise (and for edge
    // tiles) it is staged through shared memory (the A/B bytes, free after the loop's last barrier) and
    // `finish` runs the plain path's epilogue on each element.
    [[unroll]] for (int i = 0; i < CM_TM; ++i)
        [[unroll]] for (int j = 0; j < CM_TN; ++j) {
            int mt = m0 + (wm * CM_TM + i) * 16, nt = n0 + (wn * CM_TN + j) * 16;
#if CM_DIRECT
            if (mt + 16 <= GM && nt + 16 <= GN) {
                cm_epilogue(acc[i][j], mt, g * GN + nt, lane);
                continue;
            }
#endif
#if CM_EMULATE
            // each invocation holds its elements at known positions: no staging (and no barrier, which
            // the tiles that took the direct path above would not reach)
            for (int q = 0; q < 256 / CM_SG; ++q)
                finish(mt + (lane + q * CM_SG) / 16, nt + (lane + q * CM_SG) % 16, g, acc[i][j][q]);
#else
            coopMatStore(acc[i][j], smem_q, sg * 64, 4, gl_CooperativeMatrixLayoutRowMajor);
            subgroupMemoryBarrierShared();
            subgroupBarrier();
            for (int e = lane; e < 256; e += CM_SG) finish(mt + e / 16, nt + e % 16, g, uintBitsToFloat(SM_C(sg * 256 + e)));
            subgroupMemoryBarrierShared();
            subgroupBarrier();
#endif
        }
#endif  // CM_KS
}
#elif SV4
void main() {
    int wg = int(gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x);
    if (wg >= NWG) return;                       // whole workgroup: uniform
    int tm, g, tn;
    TILE_OF_WG(wg, tm, g, tn);
    int m0 = tm * BM, n0 = tn * BN;
    int tid = int(gl_LocalInvocationIndex);
    int tx = tid % BNT, ty = tid / BNT;

    float acc[TM][TN];
    [[unroll]] for (int i = 0; i < TM; ++i)
        [[unroll]] for (int j = 0; j < TN; ++j) acc[i][j] = 0.0;

    LN_INIT()
    init_a(m0, g);
    load_a(0);
    load_b(0, n0, g);
    store_a(0);
    store_b(0);
    barrier();
    int buf = 0;                                 // vec4 offset of the stage being multiplied
    for (int kb = 0; kb < GK; kb += BK) {
        bool more = kb + BK < GK;
        if (more) {                              // prefetch the next chunk while this one is used
            load_a(kb + BK);
            load_b(kb + BK, n0, g);
        }
        [[unroll]] for (int kk = 0; kk < BK; ++kk) {
            vec4 a[TM / 4], b[TN / 4];
            [[unroll]] for (int q = 0; q < TM / 4; ++q) a[q] = smem4[buf + kk * SA4 + q * BMT + ty];
            [[unroll]] for (int q = 0; q < TN / 4; ++q) b[q] = SV4_B4(buf, kk, q * BNT + tx);
            [[unroll]] for (int i = 0; i < TM; ++i)
                [[unroll]] for (int j = 0; j < TN; ++j) acc[i][j] += a[i >> 2][i & 3] * b[j >> 2][j & 3];
        }
        if (more) {
            buf = SV4_STAGE - buf;
            store_a(buf);
            store_b(buf);
        }
        barrier();
    }
    LN_FINISH()
    [[unroll]] for (int i = 0; i < TM; ++i)
        [[unroll]] for (int j = 0; j < TN; ++j)
            finish(m0 + (i >> 2) * 4 * BMT + ty * 4 + (i & 3), n0 + (j >> 2) * 4 * BNT + tx * 4 + (j & 3), g, acc[i][j]);
}
#else
void main() {
    int wg = int(gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x);
    if (wg >= NWG) return;                       // whole workgroup: uniform
    int tm, g, tn;
    TILE_OF_WG(wg, tm, g, tn);
    int m0 = tm * BM, n0 = tn * BN;
    int tid = int(gl_LocalInvocationIndex);
    int s = tid / (BMT * BNT);
    int r = tid % (BMT * BNT);
    int tx = r % BNT, ty = r / BNT;

    float acc[TM][TN];
    [[unroll]] for (int i = 0; i < TM; ++i)
        [[unroll]] for (int j = 0; j < TN; ++j) acc[i][j] = 0.0;

    LN_INIT()
    init_a(m0, g);
    load_a(0);
    load_b(0, n0, g);
    for (int kb = 0; kb < GK; kb += BKT) {
        store_a(0);
        store_b(0);
        barrier();
        if (kb + BKT < GK) {                     // prefetch the next chunk while this one is used
            load_a(kb + BKT);
            load_b(kb + BKT, n0, g);
        }
        [[unroll]] for (int kk = 0; kk < BK; ++kk) {
            int ka = s * SA_SLICE + kk * SA_STRIDE + ty;
            int kb2 = SB_OFF + s * SB_SLICE + kk * BN + tx;
            float a[TM], b[TN];
            [[unroll]] for (int i = 0; i < TM; ++i) a[i] = smem[ka + i * BMT];
            [[unroll]] for (int j = 0; j < TN; ++j) b[j] = smem[kb2 + j * BNT];
            [[unroll]] for (int i = 0; i < TM; ++i)
                [[unroll]] for (int j = 0; j < TN; ++j) acc[i][j] += a[i] * b[j];
        }
        barrier();
    }
    LN_FINISH()
#if KS > 1
    [[unroll]] for (int i = 0; i < TM; ++i)
        [[unroll]] for (int j = 0; j < TN; ++j) smem[s * (BM * BN) + (ty + i * BMT) * BN + tx + j * BNT] = acc[i][j];
    barrier();
    for (int e = tid; e < BM * BN; e += NT) {
        float v = 0.0;
        for (int q = 0; q < KS; ++q) v += smem[q * (BM * BN) + e];
        finish(m0 + e / BN, n0 + e % BN, g, v);
    }
#else
    [[unroll]] for (int i = 0; i < TM; ++i)
        [[unroll]] for (int j = 0; j < TN; ++j) finish(m0 + ty + i * BMT, n0 + tx + j * BNT, g, acc[i][j]);
#endif
}
#endif
