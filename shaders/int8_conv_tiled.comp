// Native int8 CONV_2D / FULLY_CONNECTED as an implicit GEMM (compiler/ops/int8_conv.py, where CIN and COUT
// are multiples of 4 and the output is large enough): out[m, oc] for the GM = N * OH * OW output pixels m
// and COUT channels, K = KH * KW * CIN reduced in KWORDS packed words of 4 int8 (CW = CIN / 4 per window
// position).  A workgroup of (BM / 4) * (BN / 4) invocations computes a BM x BN tile (TILES_N tiles
// along COUT); each K step stages BK words of the BM pixels' im2col rows (a position outside the input
// reads the zero point's lanes, XZ_WORD) and of the BN channels' weights in shared memory, and each
// invocation accumulates a 4 x 4 register block (pixels ty + i * BM / 4, channels 4 tx + j) with DOT4; each
// step's words are loaded into registers two steps ahead (two register sets), so their global-load latency
// overlaps two steps' barriers and products
// (int8_conv.glsl: OpSDot under DOT_EXT).  Then LiteRT's exact requantization with the 4 channels' parameters
// loaded once (q8_cols) and one packed word per pixel and 4 channels (16 invocations: 64 contiguous bytes).
// The layer's geometry is data, not defines (int8_conv_geo.glsl, with the epilogue and its fused residual
// ADD): one module serves every layer of a model (bundle size).
// Defines: BM BN BK (NT = BM * BN / 16 must be a multiple of BK) RQ_MODE (1) VEC4 (1) DEPTHWISE (0) DOT_EXT COOPMAT
// EMU RESIDUAL
// @include int8_requant.glsl
// @include int8_conv_geo.glsl
#define NT ((BM / 4) * (BN / 4))
#ifndef EMU
#define EMU 0
#endif
#define RA (BM * BK / NT)                    // pixels each invocation stages per K step
#define RB (BN * BK / NT)                    // channels each invocation stages per K step
#if COOPMAT
// the variant for devices with s8 x s8 -> s32 16 x 16 x 32 cooperative matrices and subgroups of 32 (BM = BN
// = 64, BK a multiple of 8 words = 32 int8 (int8_conv.py: 16), 256 invocations: 8 subgroups, subgroup s
// computing pixels 16 (s / 2) .. + 16 by channels 32 (s % 2) .. + 32): the tiles are staged as BK / 8
// row-major blocks (a pixel's / a channel's 8 words of a K slice contiguous: fragment loads of a 32-byte
// stride), the products accumulate in int32 cooperative matrices, stored to shared memory for the same
// epilogue
#if BM != 64 || BN != 64 || BK % 8 != 0
#error the cooperative-matrix form is laid out for 64 x 64 tiles of K steps of whole 8-word slices
#endif
// EMU (tests on devices without cooperative matrices): the same staging, products by scalar DOT4 in
// logical subgroups of 32 invocations, the same epilogue
#if !EMU
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_shader_explicit_arithmetic_types_int8 : require
#extension GL_EXT_control_flow_attributes : require
#endif
#define SA(kk, mm) (((kk) / 8 * BM + (mm)) * 8 + (kk) % 8)
#define SB(kk, nn) (((kk) / 8 * BN + (nn)) * 8 + (kk) % 8)
shared int sc[BM * BN];
#else
#define SA(kk, mm) ((kk) * BM + (mm))
#define SB(kk, nn) ((kk) * BN + (nn))
#endif
shared uint sa[BK * BM];
shared uint sb[BK * BN];

int H, W, CW, KW, DH, DW, GM, KWORDS, n0, kk, row0, tx, ty;
uint xz;
int px_base[RA], px_y[RA], px_x[RA];
ivec4 acc[4];                                // [pixel i][channel j] (the plain form's products)

// this invocation's words of K step k0 (word kk of pixels / channels row0 + r * NT / BK; past K: zeros)
void fetch(int k0, out uint a[RA], out uint b[RB]) {
    int k = k0 + kk;
    int c = k % CW, t = k / CW;
    int dy = t / KW * DH, dx = t % KW * DW;
    for (int r = 0; r < RA; ++r) {
        int iy = px_y[r] + dy, ix = px_x[r] + dx;
        bool inside = px_base[r] >= 0 && k < KWORDS && iy >= 0 && iy < H && ix >= 0 && ix < W;
        uint v = inside ? x[((px_base[r] + iy) * W + ix) * CW + c] : xz;
        a[r] = px_base[r] < 0 || k >= KWORDS ? 0u : v;
    }
    for (int r = 0; r < RB; ++r) {
        int oc = n0 + row0 + r * (NT / BK);
        b[r] = oc < COUT && k < KWORDS ? w[oc * KWORDS + k] : 0u;
    }
}

void stage(uint a[RA], uint b[RB]) {
    for (int r = 0; r < RA; ++r)
        sa[SA(kk, row0 + r * (NT / BK))] = a[r];
    for (int r = 0; r < RB; ++r)
        sb[SB(kk, row0 + r * (NT / BK))] = b[r];
}

// one K step's products from the staged tiles
#if COOPMAT && EMU
int ce[16];                                  // (c0's 8 elements e = lane + 32 t, then c1's)
void products() {
    int tid = int(gl_LocalInvocationID.x), sg = tid / 32, lane = tid % 32;
    for (int ks = 0; ks < BK; ks += 8)
        for (int t = 0; t < 16; ++t) {
            int e = lane + 32 * (t % 8);
            int mm = (sg / 2) * 16 + e / 16, nn = (sg % 2) * 32 + (t / 8) * 16 + e % 16;
            for (int q = 0; q < 8; ++q)
                ce[t] += DOT4(sa[SA(ks + q, mm)], sb[SB(ks + q, nn)]);
        }
}
#define PRODUCTS products();
#elif COOPMAT
#define CM_ACC coopmat<int, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>
// (a block in main, not a function: no cooperative matrices as function parameters)
#define PRODUCTS [[unroll]] for (int ks = 0; ks < BK; ks += 8) { \
    coopmat<int8_t, gl_ScopeSubgroup, 16, 32, gl_MatrixUseA> fa; \
    coopmat<int8_t, gl_ScopeSubgroup, 32, 16, gl_MatrixUseB> fb0; \
    coopmat<int8_t, gl_ScopeSubgroup, 32, 16, gl_MatrixUseB> fb1; \
    coopMatLoad(fa, sa, SA(ks, (sg / 2) * 16), 8, gl_CooperativeMatrixLayoutRowMajor); \
    coopMatLoad(fb0, sb, SB(ks, (sg % 2) * 32), 8, gl_CooperativeMatrixLayoutColumnMajor); \
    coopMatLoad(fb1, sb, SB(ks, (sg % 2) * 32 + 16), 8, gl_CooperativeMatrixLayoutColumnMajor); \
    c0 = coopMatMulAdd(fa, fb0, c0); \
    c1 = coopMatMulAdd(fa, fb1, c1); \
}
#else
void products() {
    for (int q = 0; q < BK; ++q) {
        int ab = q * BM + ty, bb = q * BN + tx * 4;
        uvec4 b = uvec4(sb[bb], sb[bb + 1], sb[bb + 2], sb[bb + 3]);
        for (int i = 0; i < 4; ++i) {
            uint a = sa[ab + i * (BM / 4)];
            acc[i] += ivec4(DOT4(a, b.x), DOT4(a, b.y), DOT4(a, b.z), DOT4(a, b.w));
        }
    }
}
#define PRODUCTS products();
#endif

void main() {
    q8_load_layer();
    H = qp[G_H];
    W = qp[G_W];
    CW = qp[G_CW];
    KW = qp[G_KW];
    DH = qp[G_DH];
    DW = qp[G_DW];
    GM = qp[G_GM];
    KWORDS = qp[G_KWORDS];
    int TILES_N = qp[G_TILES_N];
    xz = uint(qp[G_XZ_WORD]);
    int wg = int(gl_WorkGroupID.x + gl_NumWorkGroups.x * gl_WorkGroupID.y);
    int tid = int(gl_LocalInvocationID.x);
    int m0 = (wg / TILES_N) * BM;
    n0 = (wg % TILES_N) * BN;
    tx = tid % (BN / 4);
    ty = tid / (BN / 4);
    kk = tid % BK;
    row0 = tid / BK;
    for (int r = 0; r < RA; ++r) {
        int m = m0 + row0 + r * (NT / BK);
        int ox = m % qp[G_OW];
        int p = m / qp[G_OW];
        px_base[r] = m < GM ? p / qp[G_OH] * H : -1;
        px_y[r] = p % qp[G_OH] * qp[G_SH] - qp[G_PT];
        px_x[r] = ox * qp[G_SW] - qp[G_PL];
    }
    int oc0 = n0 + tx * 4;
#if RESIDUAL
    q8_residual_init(tid, NT);               // (the K loop's barriers publish it)
    uint rw[4];                              // (the residual words this invocation finishes, read up front)
    for (int i = 0; i < 4; ++i) {
        int m = m0 + ty + i * (BM / 4);
        rw[i] = m < GM && oc0 < COUT ? res[(m * COUT + oc0) >> 2] : 0u;
    }
#endif
    for (int i = 0; i < 4; ++i) acc[i] = ivec4(0);
#if COOPMAT && EMU
    int sg = tid / 32;
    for (int t = 0; t < 16; ++t) ce[t] = 0;
#elif COOPMAT
    int sg = int(gl_SubgroupID);
    CM_ACC c0 = CM_ACC(0);
    CM_ACC c1 = c0;
#endif
    // two register sets: step s + 2's words are loaded while steps s and s + 1 are staged and multiplied
    uint ra0[RA], rb0[RB], ra1[RA], rb1[RB];
    fetch(0, ra0, rb0);
    fetch(BK, ra1, rb1);
    for (int k0 = 0; ; k0 += 2 * BK) {
        stage(ra0, rb0);
        barrier();
        if (k0 + 2 * BK < KWORDS)
            fetch(k0 + 2 * BK, ra0, rb0);
        PRODUCTS
        barrier();
        if (k0 + BK >= KWORDS)
            break;
        stage(ra1, rb1);
        barrier();
        if (k0 + 3 * BK < KWORDS)
            fetch(k0 + 3 * BK, ra1, rb1);
        PRODUCTS
        barrier();
        if (k0 + 2 * BK >= KWORDS)
            break;
    }
#if COOPMAT
#if EMU
    for (int t = 0; t < 16; ++t) {
        int e = tid % 32 + 32 * (t % 8);
        sc[((sg / 2) * 16 + e / 16) * BN + (sg % 2) * 32 + (t / 8) * 16 + e % 16] = ce[t];
    }
#else
    coopMatStore(c0, sc, (sg / 2) * 16 * BN + (sg % 2) * 32, BN, gl_CooperativeMatrixLayoutRowMajor);
    coopMatStore(c1, sc, (sg / 2) * 16 * BN + (sg % 2) * 32 + 16, BN, gl_CooperativeMatrixLayoutRowMajor);
#endif
    barrier();
    for (int i = 0; i < 4; ++i) {
        int e = (ty + i * (BM / 4)) * BN + tx * 4;
        acc[i] = ivec4(sc[e], sc[e + 1], sc[e + 2], sc[e + 3]);
    }
#endif
    if (oc0 >= COUT) return;
    Q8Cols cols = q8_cols(oc0);              // (this invocation's 4 channels, for its 4 pixels)
    for (int i = 0; i < 4; ++i) {
        int m = m0 + ty + i * (BM / 4);
        if (m < GM)
            q8_store_cols(acc[i], cols, (m * COUT + oc0) >> 2 Q8_RES(rw[i]));
    }
}
