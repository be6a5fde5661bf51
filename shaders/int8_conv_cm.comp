// Native int8 CONV_2D / FULLY_CONNECTED as an implicit GEMM on s8 x s8 -> s32 cooperative matrices with big
// tiles (compiler/ops/int8_conv.py CM_PLANS: `measured` candidates beside int8_conv_tiled.comp, the device
// times them at first load).  out[m, oc] for the GM = N * OH * OW output pixels m and COUT channels, K =
// KH * KW * CIN reduced in KWORDS packed words of 4 int8 (CW = CIN / 4 per window position; the layer's
// geometry is data: int8_conv_geo.glsl).  A workgroup of SGM x SGN subgroups of 32 computes a BM x BN
// tile; subgroup (sm, sn) its WM = BM / SGM pixels by WN = BN / SGN channels as FM x FN 16 x 16 int32
// accumulators.  Each K step stages BK words of the BM pixels' im2col rows (a position outside the input
// reads the zero point's lanes, XZ_WORD) and of the BN channels' weights as BK / 8 blocks of 8-word rows,
// in two shared buffers: the next step's words are read into registers before this step's products and
// stored after them, one barrier a step.
// Epilogue: the staging buffers, free after the K loop, hold each subgroup's 16 x WN strip (a row of its
// accumulators at a time), and each lane finishes words of fixed channels (their parameters loaded once,
// q8_cols) for a pixel's WN / 4 contiguous words per WN / 4 lanes (int8_conv_geo.glsl q8_store_cols:
// LiteRT's requantization, a fused residual ADD through its tables).  Loops over fragments are unrolled
// (coopmat arrays indexed by constants) except under EMU.
// V4 (CW % 4 == 0: a 4-word chunk at a multiple of 4 stays in one window position): x and w are bound as
// uvec4 arrays and each invocation stages 16-byte chunks; else single words.
// EMU (tests on devices without cooperative matrices): the same staging and epilogue, the products by
// scalar DOT4 in logical subgroups of 32 invocations.
// Defines: BM BN BK SGM SGN V4 EMU RESIDUAL RQ_MODE (1) VEC4 (1) DEPTHWISE (0)
// @include int8_requant.glsl
#define NT (SGM * SGN * 32)
#define WM (BM / SGM)
#define WN (BN / SGN)
#define FM (WM / 16)
#define FN (WN / 16)
// K-chunked staging: each 8-word (32-int8) K slice of the tile is its own row-major block of rows 8 words
// apart (coopmat_int8's layout, int8_conv_tiled.comp), so every fragment load has a 32-byte stride (rows
// padded to BK + 4 words, as first planned, ran 1.5-3x slower than coopmat_int8 on the H100)
#define AIX(buf, row, k) ((buf) * BM * BK + ((k) / 8 * BM + (row)) * 8 + (k) % 8)
#define BIX(buf, row, k) (SB0 + (buf) * BN * BK + ((k) / 8 * BN + (row)) * 8 + (k) % 8)
#if V4
#define U 4                                  // words a staged unit
#define UT uvec4
#define LANE(v, j) (v)[j]
#else
#define U 1
#define UT uint
#define LANE(v, j) (v)
#endif
#define CH (BK / U)                          // units a staged row per K step
#define RP (NT / CH)                         // rows one pass of the workgroup stages
#define RA (BM / RP)                         // pixels each invocation stages per K step
#define RB (BN / RP)                         // channels each invocation stages per K step
#if BK % 8 != 0 || 128 % WN != 0 || NT % CH != 0 || BM % RP != 0 || BN % RP != 0 || WM % 16 != 0 || WN % 16 != 0
#error int8_conv_cm: a tile plan must split into 16 x 16 fragments, K steps of whole 32-int8 fragments and whole staging rounds
#endif
#if !EMU
// @include coopmat_int8.glsl
#endif
// one shared array: A's two buffers, then B's (SB0); after the K loop, each subgroup's 16 x WN strip of int32
// results for the epilogue (SC: sm's pixel rows fi * 16 .., sn's channels), then (RESIDUAL) the residual ADD's
// 512 table entries (LUT0): the kernel's only shared memory, 2 (BM + BN) BK words (int8_conv.py cm_smem)
#define SB0 (2 * BM * BK)
#define SC(sg) ((sg) * 16 * WN)
#define LUT0 (SGM * SGN * 16 * WN)
#if LUT0 + 512 * RESIDUAL > 2 * (BM + BN) * BK
#error int8_conv_cm: the epilogue strips (and the residual tables) must fit the staging buffers
#endif
shared uint sab[2 * (BM + BN) * BK];
#define Q8_LUT_GET(i) int(sab[LUT0 + (i)])
#define Q8_LUT_SET(i, v) sab[LUT0 + (i)] = uint(v)
// @include int8_conv_geo.glsl
#if EMU
#define UNROLL
#else
#extension GL_EXT_control_flow_attributes : require
#define UNROLL [[unroll]]
#endif

int H, W, CW, KW, DH, DW, GM, KWORDS, m0, n0, kk, rows0;
uint xz;
int px_base[RA], px_y[RA], px_x[RA];
UT ra[RA], rb[RB];

// this invocation's units of K step k0: words kk .. kk + U - 1 of pixels / channels rows0 + r * RP
void fetch(int k0) {
    int k = k0 + kk;
    int c = k % CW, t = k / CW;
    int dy = t / KW * DH, dx = t % KW * DW;
    for (int r = 0; r < RA; ++r) {
        int iy = px_y[r] + dy, ix = px_x[r] + dx;
        bool inside = px_base[r] >= 0 && k < KWORDS && iy >= 0 && iy < H && ix >= 0 && ix < W;
        UT v = inside ? x[(((px_base[r] + iy) * W + ix) * CW + c) / U] : UT(xz);
        ra[r] = px_base[r] < 0 || k >= KWORDS ? UT(0u) : v;
    }
    for (int r = 0; r < RB; ++r) {
        int oc = n0 + rows0 + r * RP;
        rb[r] = oc < COUT && k < KWORDS ? w[(oc * KWORDS + k) / U] : UT(0u);
    }
}

void stash(int buf) {
    for (int r = 0; r < RA; ++r)
        for (int j = 0; j < U; ++j)
            sab[AIX(buf, rows0 + r * RP, kk + j)] = LANE(ra[r], j);
    for (int r = 0; r < RB; ++r)
        for (int j = 0; j < U; ++j)
            sab[BIX(buf, rows0 + r * RP, kk + j)] = LANE(rb[r], j);
}

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
    xz = uint(qp[G_XZ_WORD]);
    int tiles_n = (COUT + BN - 1) / BN;
    int wg = int(gl_WorkGroupID.x + gl_NumWorkGroups.x * gl_WorkGroupID.y);
    int tid = int(gl_LocalInvocationID.x);
    m0 = (wg / tiles_n) * BM;
    n0 = (wg % tiles_n) * BN;
#if EMU
    int sg = tid / 32, lane = tid % 32;
#else
    int sg = int(gl_SubgroupID), lane = int(gl_SubgroupInvocationID);
#endif
    int sm = sg / SGN, sn = sg % SGN;
    kk = tid % CH * U;
    rows0 = tid / CH;
    for (int r = 0; r < RA; ++r) {
        int m = m0 + rows0 + r * RP;
        int ox = m % qp[G_OW];
        int p = m / qp[G_OW];
        px_base[r] = m < GM ? p / qp[G_OH] * H : -1;
        px_y[r] = p % qp[G_OH] * qp[G_SH] - qp[G_PT];
        px_x[r] = ox * qp[G_SW] - qp[G_PL];
    }
#if EMU
    int ce[FM * FN * 8];
    for (int i = 0; i < FM * FN * 8; ++i) ce[i] = 0;
#else
    CM_C c[FM * FN];
    UNROLL for (int i = 0; i < FM * FN; ++i) c[i] = CM_C(0);
#endif
    fetch(0);
    stash(0);
    barrier();
    int steps = (KWORDS + BK - 1) / BK;
    for (int s = 0; s < steps; ++s) {
        int buf = s & 1;
        bool more = s + 1 < steps;
        if (more) fetch((s + 1) * BK);
        UNROLL for (int ks = 0; ks < BK; ks += 8) {
#if EMU
            for (int fi = 0; fi < FM; ++fi)
                for (int fj = 0; fj < FN; ++fj)
                    for (int t = 0; t < 8; ++t) {
                        int e = lane + 32 * t;
                        int ar = AIX(buf, sm * WM + fi * 16 + e / 16, ks), br = BIX(buf, sn * WN + fj * 16 + e % 16, ks);
                        int sum = 0;
                        for (int q = 0; q < 8; ++q) sum += DOT4(sab[ar + q], sab[br + q]);
                        ce[(fi * FN + fj) * 8 + t] += sum;
                    }
#else
            CM_A fa[FM];
            CM_B fb[FN];
            UNROLL for (int fi = 0; fi < FM; ++fi)
                coopMatLoad(fa[fi], sab, AIX(buf, sm * WM + fi * 16, ks), 8, gl_CooperativeMatrixLayoutRowMajor);
            UNROLL for (int fj = 0; fj < FN; ++fj)
                coopMatLoad(fb[fj], sab, BIX(buf, sn * WN + fj * 16, ks), 8, gl_CooperativeMatrixLayoutColumnMajor);
            UNROLL for (int fi = 0; fi < FM; ++fi)
                UNROLL for (int fj = 0; fj < FN; ++fj)
                    c[fi * FN + fj] = coopMatMulAdd(fa[fi], fb[fj], c[fi * FN + fj]);
#endif
        }
        if (more) stash(buf ^ 1);
        barrier();
    }
    // epilogue, a pixel row of fragments at a time: the subgroup's FN accumulators into its 16 x WN strip, then
    // each lane finishes words of that strip: always channels cw * 4 .. + 3 (parameters loaded once), rows
    // lane / (WN / 4) + r * (128 / WN); a pixel's WN channels are WN / 4 lanes' contiguous words
    int cw = lane % (WN / 4), oc0 = n0 + sn * WN + cw * 4;
    Q8Cols cols = q8_cols(min(oc0, COUT - 4));
#if RESIDUAL
    uint rw[FM * WN / 8];                    // (the residual words this lane finishes, read before its writes)
    for (int fi = 0; fi < FM; ++fi)
        for (int row = lane / (WN / 4), r = 0; row < 16; row += 128 / WN, ++r) {
            int m = m0 + sm * WM + fi * 16 + row;
            rw[fi * (WN / 8) + r] = m < GM && oc0 < COUT ? res[(m * COUT + oc0) >> 2] : 0u;
        }
    q8_residual_init(tid, NT);               // (into sab past the strips: the K loop's last barrier freed it)
    barrier();
#endif
    for (int fi = 0; fi < FM; ++fi) {
#if EMU
        for (int fj = 0; fj < FN; ++fj)
            for (int t = 0; t < 8; ++t) {
                int e = lane + 32 * t;
                sab[SC(sg) + e / 16 * WN + fj * 16 + e % 16] = uint(ce[(fi * FN + fj) * 8 + t]);
            }
        barrier();
#else
        UNROLL for (int fj = 0; fj < FN; ++fj)
            coopMatStore(c[fi * FN + fj], sab, SC(sg) + fj * 16, WN, gl_CooperativeMatrixLayoutRowMajor);
        subgroupMemoryBarrierShared();
        subgroupBarrier();
#endif
        for (int row = lane / (WN / 4), r = 0; row < 16; row += 128 / WN, ++r) {
            int m = m0 + sm * WM + fi * 16 + row, e = SC(sg) + row * WN + cw * 4;
            if (m < GM && oc0 < COUT)
                q8_store_cols(ivec4(sab[e], sab[e + 1], sab[e + 2], sab[e + 3]), cols, (m * COUT + oc0) >> 2
                              Q8_RES(rw[fi * (WN / 8) + r]));
        }
#if EMU
        barrier();
#else
        subgroupMemoryBarrierShared();
        subgroupBarrier();
#endif
    }
}
