// Native int8 CONV_2D / DEPTHWISE_CONV_2D / FULLY_CONNECTED (compiler/ops/int8_conv.py), LiteRT's integer
// kernels: acc = sum w * (x - x_zp) (a window position outside the input adds nothing) + bias (int32), then
// requantized (int8_requant.glsl q8_rq<RQ_MODE>; DEPTHWISE with RQ_MODE 2: channels from RQ_SPLIT on q8_rq0) + OUT_ZP clamped to [ACT_MIN, ACT_MAX].
// x, w, out_: int8 lanes of 32-bit words; out_ NHWC [N, OH, OW, COUT], x NHWC [N, H, W, CIN];
// w: [COUT, KH, KW, CIN] (DEPTHWISE: [KH, KW, COUT], input channel oc / DM).  qp: int32 [3, COUT]
// (bias, multiplier, shift).  Each invocation computes one output word (4 elements).
// OC4 (with VEC4, COUT % 4 == 0): a word's 4 outputs are one pixel's 4 channels, computed together.
// VEC4 (CIN % 4 == 0, not DEPTHWISE): the channel loop reads whole words of x and w and a position outside
// the input reads the zero point's lanes (XZ_WORD); sum w * x_zp is folded in as -IN_OFF_W: qp[3 * COUT + oc]
// holds sum(w[oc]) and acc = sum w * x + IN_OFF * sum(w).  DOT4(a, b): the 4-lane signed dot product.
// Defines: OC4 N H W CIN OH OW COUT KH KW SH SW DH DW PT PL DM DEPTHWISE VEC4 IN_OFF OUT_ZP ACT_MIN ACT_MAX
//          RQ_MODE RQ_SPLIT NOUT XZ_WORD DOT_EXT (VEC4 only: DOT4 is the SPIR-V OpSDot of 4 x int8 lanes)
// BMM (BATCH_MATMUL, compiler/ops/int8_matmul.py; not DEPTHWISE): w is a runtime int8 activation, each
// weight read + W_OFF (minus its zero point), and batch n's weights start at n * W_BATCH (0: one RHS for every
// batch); x batch n's rows at n * X_BATCH (0: one LHS for every batch).  With VEC4 (K % 4 == 0; qp's weight sums
// 0) bmm_at / bmm_word4: whole words, sum (x + IN_OFF)(w + W_OFF) = sum x w + W_OFF sum x + IN_OFF sum w +
// K IN_OFF W_OFF, the sums as dot products with 4 ones (int32 wrapping: exact where the result fits).
// TCONV (TRANSPOSE_CONV, compiler/ops/int8_transpose_conv.py; SH = SW = DH = DW = 1, the filter flipped): the
// input dilated by LH x LW (its strides), only the taps on that lattice visited (TAP0, TAP_STEP; VEC4: qp holds
// the weight sums of each of the LH x LW sets of taps visited, Q8_WSUM); with RQ_MODE 2 the
// channels from RQ_SPLIT on q8_rq0 (as DEPTHWISE).
#if TCONV && VEC4
// the weight sums of the taps visited: qp row 3 + (ky0 * LW + kx0), ky0 / kx0 the first taps on the lattice
int q8_phase = 0;
#define Q8_WSUM(oc) qp[(3 + q8_phase) * COUT + (oc)]
#endif
// @include int8_requant.glsl
// @include int8_conv.glsl
#ifndef BMM
#define BMM 0
#endif
#ifndef TCONV
#define TCONV 0
#endif
#if TCONV
#define DILATED(i, l) ((i) >= 0 && (i) % (l) == 0 ? (i) / (l) : -1)
// the first tap on the lattice (o - P + k a multiple of l; o - P + l * K >= 0, as P < K) and the step to the next
#define TAP0(o, P, l, K) (((l) - ((o) - (P) + (l) * (K)) % (l)) % (l))
#define TAP_STEP(l) (l)
#else
#define DILATED(i, l) (i)
#define TAP0(o, P, l, K) 0
#define TAP_STEP(l) 1
#endif
#if BMM
#define W_AT(e) (ld8(uint(e), true) + W_OFF)
#else
#define W_AT(e) ld8(uint(e), true)
#endif
int ld8(uint e, bool isw) {
    uint v = isw ? w[e >> 2] : x[e >> 2];
    return q8_lane(v, int(e & 3u));
}

int conv_at(int e) {
    int oc = e % COUT;
    int p = e / COUT;
    int ox = p % OW;
    p /= OW;
    int oy = p % OH;
    int n = p / OH;
    int acc = 0;
#if TCONV && VEC4
    q8_phase = TAP0(oy, PT, LH, KH) * LW + TAP0(ox, PL, LW, KW);
#endif
    for (int ky = TAP0(oy, PT, LH, KH); ky < KH; ky += TAP_STEP(LH)) {
        int iy = DILATED(oy * SH - PT + ky * DH, LH);
#if !VEC4
        if (iy < 0 || iy >= H) continue;
#endif
        for (int kx = TAP0(ox, PL, LW, KW); kx < KW; kx += TAP_STEP(LW)) {
            int ix = DILATED(ox * SW - PL + kx * DW, LW);
#if VEC4
            bool inside = iy >= 0 && iy < H && ix >= 0 && ix < W;
            uint xb = uint(((n * H + iy) * W + ix) * CIN) >> 2;
            uint wb = uint(((oc * KH + ky) * KW + kx) * CIN) >> 2;
            for (int c = 0; c < CIN / 4; ++c) {
                uint xv = inside ? x[xb + uint(c)] : uint(XZ_WORD);
                acc += DOT4(xv, w[wb + uint(c)]);
            }
#else
            if (ix < 0 || ix >= W) continue;
#if BMM
            int base = n * X_BATCH + (iy * W + ix) * CIN;
#else
            int base = ((n * H + iy) * W + ix) * CIN;
#endif
#if DEPTHWISE
            acc += ld8(uint((ky * KW + kx) * COUT + oc), true) * (ld8(uint(base + oc / DM), false) + IN_OFF);
#else
            int wbase = ((oc * KH + ky) * KW + kx) * CIN;
#if BMM
            wbase += n * W_BATCH;
#endif
            for (int c = 0; c < CIN; ++c)
                acc += W_AT(wbase + c) * (ld8(uint(base + c), false) + IN_OFF);
#endif
#endif
        }
    }
    return q8_finish(acc, oc);
}

#if BMM && VEC4
const uint ONES = 0x01010101u;
int bmm_at(int e) {
    int oc = e % COUT;
    int p = e / COUT;
    int oy = p % OH;
    int n = p / OH;
    uint xb = uint(n * X_BATCH + oy * CIN) >> 2;
    uint wb = uint(n * W_BATCH + oc * CIN) >> 2;
    int acc = 0, sx = 0, sw = 0;
    for (int c = 0; c < CIN / 4; ++c) {
        uint xv = x[xb + uint(c)], wv = w[wb + uint(c)];
        acc += DOT4(xv, wv);
        sx += DOT4(xv, ONES);
        sw += DOT4(ONES, wv);
    }
    return q8_finish(acc + W_OFF * sx + IN_OFF * sw + CIN * IN_OFF * W_OFF, oc);
}

#if OC4
int bmm_word4(int e0) {
    int oc0 = e0 % COUT;
    int p = e0 / COUT;
    int oy = p % OH;
    int n = p / OH;
    uint xb = uint(n * X_BATCH + oy * CIN) >> 2;
    uint wb = uint(n * W_BATCH + oc0 * CIN) >> 2;
    const uint ws = uint(CIN) >> 2;
    ivec4 acc = ivec4(0), sw = ivec4(0);
    int sx = 0;
    for (int c = 0; c < CIN / 4; ++c) {
        uint xv = x[xb + uint(c)];
        uint wi = wb + uint(c);
        uvec4 wv = uvec4(w[wi], w[wi + ws], w[wi + 2u * ws], w[wi + 3u * ws]);
        sx += DOT4(xv, ONES);
        acc += ivec4(DOT4(xv, wv.x), DOT4(xv, wv.y), DOT4(xv, wv.z), DOT4(xv, wv.w));
        sw += ivec4(DOT4(ONES, wv.x), DOT4(ONES, wv.y), DOT4(ONES, wv.z), DOT4(ONES, wv.w));
    }
    acc += W_OFF * sx + IN_OFF * sw + CIN * IN_OFF * W_OFF;
    uint word = 0u;
    for (int j = 0; j < 4; ++j)
        word |= (uint(q8_finish(acc[j], oc0 + j)) & 0xFFu) << (8 * j);
    return int(word);
}
#endif
#endif

#if VEC4 && OC4 && !BMM
// 4 consecutive output channels of one pixel (COUT % 4 == 0): each input word is read once for the 4
int q8_word4(int e0) {
    int oc0 = e0 % COUT;
    int p = e0 / COUT;
    int ox = p % OW;
    p /= OW;
    int oy = p % OH;
    int n = p / OH;
    ivec4 acc = ivec4(0);
    const uint ws = uint(KH * KW * CIN) >> 2;         // words per output channel's filter
#if TCONV
    q8_phase = TAP0(oy, PT, LH, KH) * LW + TAP0(ox, PL, LW, KW);
#endif
    for (int ky = TAP0(oy, PT, LH, KH); ky < KH; ky += TAP_STEP(LH)) {
        int iy = DILATED(oy * SH - PT + ky * DH, LH);
        for (int kx = TAP0(ox, PL, LW, KW); kx < KW; kx += TAP_STEP(LW)) {
            int ix = DILATED(ox * SW - PL + kx * DW, LW);
            bool inside = iy >= 0 && iy < H && ix >= 0 && ix < W;
            uint xb = uint(((n * H + iy) * W + ix) * CIN) >> 2;
            uint wb = uint(((oc0 * KH + ky) * KW + kx) * CIN) >> 2;
            for (int c = 0; c < CIN / 4; ++c) {
                uint xv = inside ? x[xb + uint(c)] : uint(XZ_WORD);
                uint wi = wb + uint(c);
                acc += ivec4(DOT4(xv, w[wi]), DOT4(xv, w[wi + ws]), DOT4(xv, w[wi + 2u * ws]), DOT4(xv, w[wi + 3u * ws]));
            }
        }
    }
    uint word = 0u;
    for (int j = 0; j < 4; ++j)
        word |= (uint(q8_finish(acc[j], oc0 + j)) & 0xFFu) << (8 * j);
    return int(word);
}
#endif

void main() {
    uint gid = gpuc_gid();
    if (gid >= TOTAL) return;
#if VEC4 && OC4 && BMM
    out_[gid] = uint(bmm_word4(int(gid) * 4));
#elif VEC4 && OC4
    out_[gid] = uint(q8_word4(int(gid) * 4));
#else
    uint word = 0u;
    for (int j = 0; j < 4; ++j) {
        int e = int(gid) * 4 + j;
        if (e >= NOUT) break;
#if BMM && VEC4
        word |= (uint(bmm_at(e)) & 0xFFu) << (8 * j);
#else
        word |= (uint(conv_at(e)) & 0xFFu) << (8 * j);
#endif
    }
    out_[gid] = word;
#endif
}
