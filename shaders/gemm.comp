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
// Defines: GM GN GK GROUPS LDA LDC BM BN BK TM TN KS TILES_M TILES_N NWG VEC_A B_T GNP
//          HAS_BIAS ACT RESIDUAL ACT2 EPI_CHAIN (epi_chain.glsl); IM2COL with H W OH OW KW CIG SH SW DH DW PT PL.
//
// COOPMAT=1 (the `coopmat` variant of --precision fp16, used where the device has
// VK_KHR_cooperative_matrix 16x16x16 fp16*fp16+fp32 at subgroup scope and subgroup size CM_SG): the
// same global loads (prefetched, bounds-checked), but A and B are staged in shared memory as float16
// (A as [BM][BK], B as [BK][BN], rows padded by 8 halves) and multiplied with cooperative matrices
// into fp32 accumulators.  CM_WM x CM_WN subgroups of CM_SG invocations; each owns CM_TM x CM_TN
// 16x16 accumulator tiles (BM = CM_WM*CM_TM*16, BN = CM_WN*CM_TN*16, KS = 1).  The epilogue stores
// one accumulator tile at a time to the subgroup's shared staging area and runs `finish` on it, so
// bias, activations, residual and fake-quant are exactly the plain path's.
// CM_EMULATE=1 (tests only, GPUC_TEST_COOPMAT_EMULATE): the same tiling, staging and epilogue with
// the cooperative-matrix operations done per invocation (CM_SG invocations stand for a subgroup, each
// owning 256 / CM_SG elements of a tile), so devices without the extension can check everything else.
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
#define NT (CM_WM * CM_WN * CM_SG)   // == local_size_x
#define SA_LD (BK + 8)
#define SB_LD (BN + 8)
shared float16_t smem_a[BM * SA_LD];
shared float16_t smem_b[BK * SB_LD];
shared float smem_c[CM_WM * CM_WN * 256];
#else
#define BMT (BM / TM)
#define BNT (BN / TN)
#define BKT (BK * KS)
#define NT (BMT * BNT * KS)          // == local_size_x
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
#endif

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
    for (int i = 0; i < A_PER; ++i) {
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
    for (int i = 0; i < A_PER; ++i) {
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
#else
#if VEC_A
            v = LD(x, (a_base[i] + k) >> 2);
#else
            v = LD(x, a_base[i] + k);
#endif
#endif
        }
        ra[i] = v;
    }
}

void store_a() {
    int tid = int(gl_LocalInvocationIndex);
    for (int i = 0; i < A_PER; ++i) {
        int e = tid + i * NT;
        if (e < A_N) {
            int row = e / A_W;
#if COOPMAT && VEC_A
            int o = row * SA_LD + (e % A_W) * 4;
            smem_a[o] = float16_t(ra[i].x);
            smem_a[o + 1] = float16_t(ra[i].y);
            smem_a[o + 2] = float16_t(ra[i].z);
            smem_a[o + 3] = float16_t(ra[i].w);
#elif COOPMAT
            smem_a[row * SA_LD + e % A_W] = float16_t(ra[i]);
#elif VEC_A
            int kr = (e % A_W) * 4;
            smem[SA_ROW(kr) + row] = ra[i].x;
            smem[SA_ROW(kr + 1) + row] = ra[i].y;
            smem[SA_ROW(kr + 2) + row] = ra[i].z;
            smem[SA_ROW(kr + 3) + row] = ra[i].w;
#else
            smem[SA_ROW(e % A_W) + row] = ra[i];
#endif
        }
    }
}

void load_b(int kb, int n0, int g) {
    int tid = int(gl_LocalInvocationIndex);
    for (int i = 0; i < B_PER; ++i) {
        int e = tid + i * NT;
#if B_T
        int k = kb + e % BKT;
        int n = n0 + e / BKT;
        float v = 0.0;
        if (e < B_N && k < GK && n < GN) v = LD(w, (g * GN + n) * GK + k);
#else
        int k = kb + e / B_W;
        int n = n0 + (e % B_W) * 4;
        vec4 v = vec4(0.0);
        if (e < B_N && k < GK && n < GNP) v = LD(w, ((g * GK + k) * GNP + n) >> 2);
#endif
        rb[i] = v;
    }
}

void store_b() {
    int tid = int(gl_LocalInvocationIndex);
    for (int i = 0; i < B_PER; ++i) {
        int e = tid + i * NT;
        if (e < B_N) {
#if COOPMAT && B_T
            smem_b[(e % BKT) * SB_LD + e / BKT] = float16_t(rb[i]);
#elif COOPMAT
            int o = (e / B_W) * SB_LD + (e % B_W) * 4;
            smem_b[o] = float16_t(rb[i].x);
            smem_b[o + 1] = float16_t(rb[i].y);
            smem_b[o + 2] = float16_t(rb[i].z);
            smem_b[o + 3] = float16_t(rb[i].w);
#elif B_T
            smem[SB_ROW(e % BKT) + e / BKT] = rb[i];
#else
            int o = SB_ROW(e / B_W) + (e % B_W) * 4;
            smem[o] = rb[i].x;
            smem[o + 1] = rb[i].y;
            smem[o + 2] = rb[i].z;
            smem[o + 3] = rb[i].w;
#endif
        }
    }
}

// @include epi_chain.glsl
void finish(int m, int n, int g, float v) {
    if (m < GM && n < GN) {
        int col = g * GN + n;
#if HAS_BIAS
        v += LD(bias, col);
#endif
        v = gpuc_act(v);
        int o = m * LDC + col;
#if RESIDUAL
        v = gpuc_apply(v + LD(res, o), ACT2);
#endif
#if EPI_CHAIN
        v = epi_chain(o, v);                     // a fused elementwise chain (epi_chain.glsl)
#endif
        ST(out_, o, v);
    }
}

#if COOPMAT
#ifndef CM_EMULATE
#define CM_EMULATE 0
#endif
#define CM_ACC coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>
void main() {
    int wg = int(gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x);
    if (wg >= NWG) return;                       // whole workgroup: uniform
    int tn = wg % TILES_N;
    int t = wg / TILES_N;
    int tm = t % TILES_M;
    int g = t / TILES_M;
    int m0 = tm * BM, n0 = tn * BN;
#if CM_EMULATE
    int sg = int(gl_LocalInvocationIndex) / CM_SG, lane = int(gl_LocalInvocationIndex) % CM_SG;
    float acc[CM_TM][CM_TN][256 / CM_SG];
    for (int i = 0; i < CM_TM; ++i)
        for (int j = 0; j < CM_TN; ++j)
            for (int q = 0; q < 256 / CM_SG; ++q) acc[i][j][q] = 0.0;
#else
    int sg = int(gl_SubgroupID), lane = int(gl_SubgroupInvocationID);
    CM_ACC acc[CM_TM][CM_TN];
    for (int i = 0; i < CM_TM; ++i)
        for (int j = 0; j < CM_TN; ++j) acc[i][j] = CM_ACC(0.0);
#endif
    int wm = sg / CM_WN, wn = sg % CM_WN;

    init_a(m0, g);
    load_a(0);
    load_b(0, n0, g);
    for (int kb = 0; kb < GK; kb += BKT) {
        store_a();
        store_b();
        barrier();
        if (kb + BKT < GK) {                     // prefetch the next chunk while this one is used
            load_a(kb + BKT);
            load_b(kb + BKT, n0, g);
        }
        for (int kk = 0; kk < BK; kk += 16) {
#if CM_EMULATE
            for (int i = 0; i < CM_TM; ++i)
                for (int j = 0; j < CM_TN; ++j)
                    for (int q = 0; q < 256 / CM_SG; ++q) {
                        int e = lane + q * CM_SG;
                        int ao = ((wm * CM_TM + i) * 16 + e / 16) * SA_LD + kk;
                        int bo = kk * SB_LD + (wn * CM_TN + j) * 16 + e % 16;
                        for (int u = 0; u < 16; ++u)
                            acc[i][j][q] += float(smem_a[ao + u]) * float(smem_b[bo + u * SB_LD]);
                    }
#else
            coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> fa[CM_TM];
            coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB> fb[CM_TN];
            for (int i = 0; i < CM_TM; ++i)
                coopMatLoad(fa[i], smem_a, ((wm * CM_TM + i) * 16) * SA_LD + kk, SA_LD,
                            gl_CooperativeMatrixLayoutRowMajor);
            for (int j = 0; j < CM_TN; ++j)
                coopMatLoad(fb[j], smem_b, kk * SB_LD + (wn * CM_TN + j) * 16, SB_LD,
                            gl_CooperativeMatrixLayoutRowMajor);
            for (int i = 0; i < CM_TM; ++i)
                for (int j = 0; j < CM_TN; ++j) acc[i][j] = coopMatMulAdd(fa[i], fb[j], acc[i][j]);
#endif
        }
        barrier();
    }
    for (int i = 0; i < CM_TM; ++i)
        for (int j = 0; j < CM_TN; ++j) {
#if CM_EMULATE
            for (int q = 0; q < 256 / CM_SG; ++q) smem_c[sg * 256 + lane + q * CM_SG] = acc[i][j][q];
            barrier();
#else
            coopMatStore(acc[i][j], smem_c, sg * 256, 16, gl_CooperativeMatrixLayoutRowMajor);
            subgroupMemoryBarrierShared();
            subgroupBarrier();
#endif
            int mt = m0 + (wm * CM_TM + i) * 16, nt = n0 + (wn * CM_TN + j) * 16;
            for (int e = lane; e < 256; e += CM_SG) finish(mt + e / 16, nt + e % 16, g, smem_c[sg * 256 + e]);
#if CM_EMULATE
            barrier();
#else
            subgroupMemoryBarrierShared();
            subgroupBarrier();
#endif
        }
}
#else
void main() {
    int wg = int(gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x);
    if (wg >= NWG) return;                       // whole workgroup: uniform
    int tn = wg % TILES_N;
    int t = wg / TILES_N;
    int tm = t % TILES_M;
    int g = t / TILES_M;
    int m0 = tm * BM, n0 = tn * BN;
    int tid = int(gl_LocalInvocationIndex);
    int s = tid / (BMT * BNT);
    int r = tid % (BMT * BNT);
    int tx = r % BNT, ty = r / BNT;

    float acc[TM][TN];
    for (int i = 0; i < TM; ++i)
        for (int j = 0; j < TN; ++j) acc[i][j] = 0.0;

    init_a(m0, g);
    load_a(0);
    load_b(0, n0, g);
    for (int kb = 0; kb < GK; kb += BKT) {
        store_a();
        store_b();
        barrier();
        if (kb + BKT < GK) {                     // prefetch the next chunk while this one is used
            load_a(kb + BKT);
            load_b(kb + BKT, n0, g);
        }
        for (int kk = 0; kk < BK; ++kk) {
            int ka = s * SA_SLICE + kk * SA_STRIDE + ty;
            int kb2 = SB_OFF + s * SB_SLICE + kk * BN + tx;
            float a[TM], b[TN];
            for (int i = 0; i < TM; ++i) a[i] = smem[ka + i * BMT];
            for (int j = 0; j < TN; ++j) b[j] = smem[kb2 + j * BNT];
            for (int i = 0; i < TM; ++i)
                for (int j = 0; j < TN; ++j) acc[i][j] += a[i] * b[j];
        }
        barrier();
    }
#if KS > 1
    for (int i = 0; i < TM; ++i)
        for (int j = 0; j < TN; ++j) smem[s * (BM * BN) + (ty + i * BMT) * BN + tx + j * BNT] = acc[i][j];
    barrier();
    for (int e = tid; e < BM * BN; e += NT) {
        float v = 0.0;
        for (int q = 0; q < KS; ++q) v += smem[q * (BM * BN) + e];
        finish(m0 + e / BN, n0 + e % BN, g, v);
    }
#else
    for (int i = 0; i < TM; ++i)
        for (int j = 0; j < TN; ++j) finish(m0 + ty + i * BMT, n0 + tx + j * BNT, g, acc[i][j]);
#endif
}
#endif
