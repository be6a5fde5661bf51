// Native int8 ADD / MEAN / SOFTMAX (compiler/ops/int8_eltwise.py), as LiteRT's builtin integer kernels
// compute them.  a, b, out_: int8 lanes of 32-bit words; each invocation computes one output word.
// OP 0 ADD: v_i = q8_rq0((x_i + OFF_i) << 20, M_i, S_i) (gemmlowp rounding), then
//      q8_rq0(v_a + v_b, MO, SO) + OUT_ZP clamped to [ACT_MIN, ACT_MAX]; SUB 1: v_a - v_b, 2: v_b - v_a (SUB).  B_MOD: b's element
//      index is e % B_MOD (b broadcast along the leading dims; B_MOD = NOUT for equal shapes).
// OP 1 MEAN over the middle of [OUTER, R, INNER]: q8_rq0(sum - IN_ZP * R, MO, SO) + OUT_ZP clamped;
//      MEAN_OPT (LiteRT's optimized Mean, IN_ZP 0, OUT_ZP its bias): inner index < BLK rounded by q8_rq2.
// OP 2 SOFTMAX over rows of L: LiteRT's table path: t = lut[255 - max + x] (lut: float exp table),
//      s = sum of t in order, inv = 1 / (s * OUT_SCALE), q = round_half_away(t * inv) + OUT_ZP clamped.
// OP 3 AVERAGE_POOL_2D / OP 4 MAX_POOL_2D (NHWC [N, H, W, C] -> [N, OH, OW, C], input and output on one grid):
//      the window's cells inside the input; average: sum rounded half away from zero over their count
//      (LiteRT's integer division), both clamped to [ACT_MIN, ACT_MAX].
// OP 5 RELU / RELU6 / RELU_N1_TO_1: q8_rq0(x - IN_ZP, MO, SO) + OUT_ZP clamped to [ACT_MIN, ACT_MAX].
// OP 6 MUL: q8_rq0((x_a + OFF_A) * (x_b + OFF_B), MO, SO) + OUT_ZP clamped (b broadcast as ADD's, B_MOD).
// BCAST (OP 0, 6, 10, 11, 15, 16, 18): both inputs broadcast as numpy does, through OD*, AS*, BS* (bc_index).
// OP 7 LOGISTIC / TANH: lut[x + 128] (a 256-entry int table made at compile time).
// OP 10 / 11 MAXIMUM / MINIMUM: the raw bytes' max / min (broadcast as OP 0 and 6).
// OP 12 RESIZE_BILINEAR / RESIZE_NEAREST_NEIGHBOR (NHWC [N, H, W, C] -> [N, OH, OW, C], compiler/ops/int8_resize.py):
//      lut: lo, hi, weight of hi (of 2^10) per output row (3 x OH), then per output column (3 x OW); the four
//      taps' products (weights 2^10 - w and w along each axis) summed, +-2^19 by the sum's sign, / 2^20
//      truncating (ResizeBilinearInteger; nearest: lo == hi, weight 0).
// OP 13 / 14 REDUCE_MAX / REDUCE_MIN (compiler/ops/int8_reduce.py): the largest / smallest raw byte over R
//      elements; output e's first element through the kept dims' runs (KD* sizes, KS* input strides), the
//      reduced ones through RD* / RS*.
// OP 15 SQUARED_DIFFERENCE (compiler/ops/int8_binary.py): v_i = q8_rq0((x_i + OFF_i) << 7, M_i, S_i),
//      q8_rq0((v_a - v_b)^2, MO, SO) + OUT_ZP clamped (broadcast as OP 0).
// OP 16 PRELU: v = x_a + OFF_A; q8_rq0(v, MO, SO) where v >= 0, else q8_rq0(v * (x_b + OFF_B), M_A, S_A);
//      + OUT_ZP clamped (b: alpha, broadcast as OP 0).
// OP 17 LOG_SOFTMAX over rows of L (compiler/ops/int8_normalize.py): LiteRT's float table path: s = the sum in
//      order of lut[255 - max + x], pre = (SI * max + logf(s)) * 16 (ls_logf: glibc's logf), q = rint(SC * x - pre)
//      + 127 clamped (SI_BITS, SC_BITS: float32 bits).
// OP 19 L2_NORMALIZATION over rows of L (compiler/ops/int8_normalize.py): LiteRT's integer kernel: acc = the
//      sum of (x - IN_ZP)^2, its inverse square root by l2_inv_sqrt, q8_rq0(x - IN_ZP, m, shift + 7) clamped.
// OP 18 DIV (compiler/ops/int8_div.py): lut (int8 bytes, 4 a word) at (x_a + 128) * 256 + x_b + 128 (broadcast as OP 0).
// OP 9 LEAKY_RELU: v = x - IN_ZP; q8_rq0(v, MO, SO) where v >= 0, else q8_rq0(v, M_A, S_A); + OUT_ZP clamped.
// Defines: OP NOUT OFF_A OFF_B M_A S_A M_B S_B MO SO OUT_ZP ACT_MIN ACT_MAX B_MOD OUTER R INNER MEAN_OPT BLK IN_ZP L OUT_SCALE
//          H W C OH OW KH KW SH SW PT PL
// Row statistics (OP 2 / 17 / 19 over long rows, compiler/ops/int8_eltwise.py with_row_stats): STATS dispatches
// compute each row's max (PHASE 0) and its in-order table sum or sum of squares (PHASE 1) once, an invocation a
// row, into rs ([rows][2] words; CHUNKED: steps = [first, count] of the row, resuming from rs), and the
// element dispatch reads them (ROWSTATS) instead of every invocation walking its row again.
// @include int8_requant.glsl
int ld_a(int e) { return q8_lane(a[e >> 2], e & 3); }
#ifndef STATS
#define STATS 0
#endif
#ifndef ROWSTATS
#define ROWSTATS 0
#endif
#ifndef CHUNKED
#define CHUNKED 0
#endif
// Long reductions (OP 1 MEAN over more than PARTIAL_FROM elements, OP 3 / 4 pools over larger windows:
// with_partials): a PSUM dispatch sums (pools: sums and counts, or maxima) parts of RP reduced rows (window rows)
// into ps, an invocation a part of an output; the element dispatch (PARTS) combines an output's PARTS partials.
// Integer sums and maxima: exact in any order.
#ifndef PSUM
#define PSUM 0
#endif
#ifndef PARTS
#define PARTS 0
#endif

#ifndef SUB
#define SUB 0
#endif
#ifndef BCAST
#define BCAST 0
#endif
#if BCAST
// numpy broadcasting: output index e -> (a's element, b's element) through OD* (output dims) and AS* / BS*
// (strides, 0 along a broadcast dim)
const int OD[6] = int[6](OD0, OD1, OD2, OD3, OD4, OD5);
const int AS[6] = int[6](AS0, AS1, AS2, AS3, AS4, AS5);
const int BS[6] = int[6](BS0, BS1, BS2, BS3, BS4, BS5);
ivec2 bc_index(int e) {
    ivec2 ix = ivec2(0);
    for (int k = 5; k >= 0; --k) {
        int c = e % OD[k];
        e /= OD[k];
        ix += c * ivec2(AS[k], BS[k]);
    }
    return ix;
}
#define A_AT(e) bc_index(e).x
#define B_AT(e) bc_index(e).y
#else
#define A_AT(e) (e)
#define B_AT(e) ((e) % B_MOD)
#endif
#if OP == 0
int ld_b(int e) { return q8_lane(b[e >> 2], e & 3); }
int value_at(int e) {
    int va = q8_rq0((ld_a(A_AT(e)) + OFF_A) << 20, M_A, S_A);
    int vb = q8_rq0((ld_b(B_AT(e)) + OFF_B) << 20, M_B, S_B);
    return clamp(q8_rq0(SUB == 0 ? va + vb : SUB == 1 ? va - vb : vb - va, MO, SO) + OUT_ZP, ACT_MIN, ACT_MAX);
}
#elif OP == 1
int value_at(int e) {
    int o = e / INNER, i = e % INNER;
    int s = 0;
#if PARTS && !PSUM
    for (int p = 0; p < PARTS; ++p) s += ps[e * PARTS + p];
#else
    for (int r = 0; r < R; ++r) s += ld_a((o * R + r) * INNER + i);
#endif
#if MEAN_OPT
    return clamp((i < BLK ? q8_rq2(s, MO, SO) : q8_rq0(s, MO, SO)) + OUT_ZP, -128, 127);
#endif
    return clamp(q8_rq0(s - IN_ZP * R, MO, SO) + OUT_ZP, -128, 127);
}
#elif OP == 3 || OP == 4
// output element e's window rows [ky0, ky1): its sum (OP 3) or max (OP 4), and the cells inside the input
ivec2 window_part(int e, int ky0, int ky1) {
    int c = e % C;
    int p = e / C;
    int ox = p % OW;
    p /= OW;
    int oy = p % OH;
    int n = p / OH;
    int acc = OP == 3 ? 0 : -128;
    int count = 0;
    for (int ky = ky0; ky < ky1; ++ky) {
        int iy = oy * SH - PT + ky;
        if (iy < 0 || iy >= H) continue;
        for (int kx = 0; kx < KW; ++kx) {
            int ix = ox * SW - PL + kx;
            if (ix < 0 || ix >= W) continue;
            int v = ld_a(((n * H + iy) * W + ix) * C + c);
            acc = OP == 3 ? acc + v : max(acc, v);
            count += 1;
        }
    }
    return ivec2(acc, count);
}

int value_at(int e) {
#if PARTS && !PSUM
    int acc = OP == 3 ? 0 : -128, count = 0;
    for (int p = 0; p < PARTS; ++p) {
        int a = ps[2 * (e * PARTS + p)];
        acc = OP == 3 ? acc + a : max(acc, a);
        count += ps[2 * (e * PARTS + p) + 1];
    }
#else
    ivec2 w = window_part(e, 0, KH);
    int acc = w.x, count = w.y;
#endif
#if OP == 3
    if (count > 0)
        acc = acc > 0 ? (acc + count / 2) / count : (acc - count / 2) / count;
#endif
    return clamp(acc, ACT_MIN, ACT_MAX);
}
#elif OP == 5
int value_at(int e) { return clamp(q8_rq0(ld_a(e) - IN_ZP, MO, SO) + OUT_ZP, ACT_MIN, ACT_MAX); }
#elif OP == 6
int ld_b(int e) { return q8_lane(b[e >> 2], e & 3); }
int value_at(int e) {
    return clamp(q8_rq0((ld_a(A_AT(e)) + OFF_A) * (ld_b(B_AT(e)) + OFF_B), MO, SO) + OUT_ZP, ACT_MIN, ACT_MAX);
}
#elif OP == 7
int value_at(int e) { return lut[ld_a(e) + 128]; }
#elif OP == 10 || OP == 11
int ld_b(int e) { return q8_lane(b[e >> 2], e & 3); }
int value_at(int e) { return OP == 10 ? max(ld_a(A_AT(e)), ld_b(B_AT(e))) : min(ld_a(A_AT(e)), ld_b(B_AT(e))); }
#elif OP == 12
int value_at(int e) {
    int c = e % C;
    int p = e / C;
    int ox = p % OW;
    p /= OW;
    int oy = p % OH;
    int n = p / OH;
    int y0 = lut[oy], y1 = lut[OH + oy], wy = lut[2 * OH + oy];
    int x0 = lut[3 * OH + ox], x1 = lut[3 * OH + OW + ox], wx = lut[3 * OH + 2 * OW + ox];
    int r0 = (n * H + y0) * W, r1 = (n * H + y1) * W;
    int s = ld_a((r0 + x0) * C + c) * (1024 - wy) * (1024 - wx) + ld_a((r1 + x0) * C + c) * wy * (1024 - wx)
          + ld_a((r0 + x1) * C + c) * (1024 - wy) * wx + ld_a((r1 + x1) * C + c) * wy * wx;
    return s > 0 ? (s + (1 << 19)) >> 20 : -((-s + (1 << 19)) >> 20);
}
#elif OP == 13 || OP == 14
const int KD[6] = int[6](KD0, KD1, KD2, KD3, KD4, KD5);
const int KS[6] = int[6](KS0, KS1, KS2, KS3, KS4, KS5);
const int RD[6] = int[6](RD0, RD1, RD2, RD3, RD4, RD5);
const int RS[6] = int[6](RS0, RS1, RS2, RS3, RS4, RS5);
int value_at(int e) {
    int base = 0;
    for (int k = 5; k >= 0; --k) {
        base += (e % KD[k]) * KS[k];
        e /= KD[k];
    }
    int acc = OP == 13 ? -128 : 127;
    for (int r = 0; r < R; ++r) {
        int t = r, off = base;
        for (int k = 5; k >= 0; --k) {
            off += (t % RD[k]) * RS[k];
            t /= RD[k];
        }
        acc = OP == 13 ? max(acc, ld_a(off)) : min(acc, ld_a(off));
    }
    return acc;
}
#elif OP == 15
int ld_b(int e) { return q8_lane(b[e >> 2], e & 3); }
int value_at(int e) {
    int va = q8_rq0((ld_a(A_AT(e)) + OFF_A) << 7, M_A, S_A);
    int vb = q8_rq0((ld_b(B_AT(e)) + OFF_B) << 7, M_B, S_B);
    return clamp(q8_rq0((va - vb) * (va - vb), MO, SO) + OUT_ZP, -128, 127);
}
#elif OP == 16
int ld_b(int e) { return q8_lane(b[e >> 2], e & 3); }
int value_at(int e) {
    int v = ld_a(A_AT(e)) + OFF_A;
    int r = v >= 0 ? q8_rq0(v, MO, SO) : q8_rq0(v * (ld_b(B_AT(e)) + OFF_B), M_A, S_A);
    return clamp(r + OUT_ZP, -128, 127);
}
#elif OP == 19
// gemmlowp's SaturatingRoundingDoublingHighMul (any signs) and RoundingDivideByPOT
int l2_srdhm(int a, int b) { return (a == b && a == int(0x80000000u)) ? 0x7fffffff : q8_high_away(a, b); }
int l2_rdbp(int x, int e) {
    int mask = int((1u << uint(e)) - 1u);
    return (x >> e) + ((x & mask) > (mask >> 1) + (x < 0 ? 1 : 0) ? 1 : 0);
}
int l2_sat_shl(int x, int e) {
    int thr = (1 << (31 - e)) - 1;
    return x > thr ? 0x7fffffff : x < -thr ? int(0x80000000u) : x << e;
}
// GetInvSqrtQuantizedMultiplierExp(acc, -1): (multiplier, shift), Newton-Raphson in Q3.28
ivec2 l2_inv_sqrt(int acc) {
    if (acc <= 1) return ivec2(0x7fffffff, 0);
    int shift = 11;
    while (acc >= (1 << 29)) {
        acc /= 4;
        ++shift;
    }
    int pairs = (findMSB(acc) ^ 31) - 1;                      // (clz(acc) - 1, acc > 1)
    pairs = pairs / 2 - 1;
    shift -= pairs;
    acc <<= 2 * pairs;
    int half_in = l2_rdbp(acc >> 1, 1);
    int x = 1 << 28;
    for (int i = 0; i < 5; ++i) {
        int x3 = l2_sat_shl(l2_srdhm(l2_srdhm(x, x), x), 6);
        x = l2_sat_shl(l2_srdhm((1 << 28) + (1 << 27), x) - l2_srdhm(half_in, x3), 3);
    }
    x = l2_srdhm(x, 1518500250);
    if (shift < 0) {
        x <<= -shift;
        shift = 0;
    }
    return ivec2(x, -shift);
}
int row_cached = -1;
ivec2 row_inv = ivec2(0);
int value_at(int e) {
    int row = e / L;
    if (row != row_cached) {
        row_cached = row;
#if ROWSTATS
        int acc = rs[2 * row + 1];
#else
        int acc = 0;
        for (int j = 0; j < L; ++j) {
            int v = ld_a(row * L + j) - IN_ZP;
            acc += v * v;
        }
#endif
        row_inv = l2_inv_sqrt(acc);
    }
    return clamp(q8_rq0(ld_a(e) - IN_ZP, row_inv.x, row_inv.y + 7), -128, 127);
}
#elif OP == 18
int ld_b(int e) { return q8_lane(b[e >> 2], e & 3); }
int value_at(int e) {
    int i = (ld_a(A_AT(e)) + 128) * 256 + ld_b(B_AT(e)) + 128;
    return q8_lane(lut[i >> 2], i & 3);
}
#elif OP == 17
// glibc's logf (e_logf.c: s = 2^k z, log(s) = log1p(z / c - 1) + log(c) + k ln 2 in double) of a float s >= 1, in
// float-float: r = z / c - 1 exactly as a sum of products (1 / c as three floats: lut[256 + 3 i ..]), the
// polynomial p = (A0 r^2 + A1 r + A2) r^2 in float-float (lut[304 ..]), y0 = logc + k ln 2 (the double glibc
// rounds it to, three floats: lut[310 + 48 k + 3 i ..]); the float nearest y0 + r + p, checked against the exact
// remainder of the sum (compiler/ops/int8_normalize.py).
vec2 ls_two_sum(float a, float b) {
    precise float s = a + b;
    precise float bb = s - a;
    precise float e = (a - (s - bb)) + (b - bb);
    return vec2(s, e);
}
vec2 ls_fast_two_sum(float a, float b) {
    precise float s = a + b;
    precise float e = b - (s - a);
    return vec2(s, e);
}
vec2 ls_split(float a) {
    precise float c = 4097.0 * a;
    precise float hi = c - (c - a);
    precise float lo = a - hi;
    return vec2(hi, lo);
}
vec2 ls_two_prod(float a, float b) {
    precise float p = a * b;
    vec2 x = ls_split(a), y = ls_split(b);
    precise float e = ((x.x * y.x - p) + x.x * y.y + x.y * y.x) + x.y * y.y;
    return vec2(p, e);
}
vec2 ls_dd_add(vec2 a, vec2 b) {
    vec2 s = ls_two_sum(a.x, b.x);
    precise float e = s.y + (a.y + b.y);
    return ls_fast_two_sum(s.x, e);
}
vec2 ls_dd_mul(vec2 a, vec2 b) {
    vec2 p = ls_two_prod(a.x, b.x);
    precise float e = p.y + (a.x * b.y + a.y * b.x);
    return ls_fast_two_sum(p.x, e);
}
float ls_logf(float s) {
    uint ix = floatBitsToUint(s);
    if (ix == 0x3f800000u) return 0.0;
    uint tmp = ix - 0x3f330000u;
    int i = int((tmp >> 19) & 15u);
    int k = min(int(tmp) >> 23, KMAX - 1);
    float z = uintBitsToFloat(ix - (tmp & 0xff800000u));
    vec2 p1 = ls_two_prod(z, lut[256 + 3 * i]), p2 = ls_two_prod(z, lut[257 + 3 * i]);
    vec2 p3 = ls_two_prod(z, lut[258 + 3 * i]);
    precise float q = p1.x - 1.0;                                        // (exact: p1 in [0.5, 2])
    vec2 r = ls_two_sum(q, p2.x);
    precise float rl = r.y + ((p1.y + p2.y) + (p3.x + p3.y));
    r = ls_fast_two_sum(r.x, rl);
    vec2 r2 = ls_dd_mul(r, r);
    vec2 y = ls_dd_add(ls_dd_mul(vec2(lut[306], lut[307]), r), vec2(lut[308], lut[309]));
    y = ls_dd_add(ls_dd_mul(vec2(lut[304], lut[305]), r2), y);
    vec2 pp = ls_dd_mul(y, r2);
    int o = 310 + 48 * k + 3 * i;
    float terms[11] = float[11](lut[o], q, pp.x, p2.x, p1.y, lut[o + 1], pp.y, p2.y, p3.x, lut[o + 2], p3.y);
    precise float acc = 0.0, err = 0.0;
    for (int j = 0; j < 11; ++j) {
        vec2 t = ls_two_sum(acc, terms[j]);
        acc = t.x;
        err += t.y;
    }
    precise float f = acc + err;
    acc = -f;
    err = 0.0;
    for (int j = 0; j < 11; ++j) {
        vec2 t = ls_two_sum(acc, terms[j]);
        acc = t.x;
        err += t.y;
    }
    precise float rest = acc + err;                                     // (y - f, to about 2^-30 of f's ulp)
    float up = uintBitsToFloat(floatBitsToUint(f) + 1u), dn = uintBitsToFloat(floatBitsToUint(f) - 1u);
    precise float hu = (up - f) * 0.5;
    precise float hd = (f - dn) * 0.5;
    return rest > hu ? up : -rest > hd ? dn : f;
}
int row_cached = -1;
float row_pre = 0.0;
int value_at(int e) {
    int row = e / L;
    if (row != row_cached) {
        row_cached = row;
#if ROWSTATS
        int mx = rs[2 * row];
        precise float s = intBitsToFloat(rs[2 * row + 1]);
#else
        int mx = -128;
        for (int j = 0; j < L; ++j) mx = max(mx, ld_a(row * L + j));
        precise float s = 0.0;
        for (int j = 0; j < L; ++j) s += lut[255 - mx + ld_a(row * L + j)];
#endif
        precise float t = uintBitsToFloat(SI_BITS) * float(mx);
        precise float u = t + ls_logf(s);
        row_pre = u * 16.0;                                              // (/ (1/16): exact)
    }
    precise float lp = uintBitsToFloat(SC_BITS) * float(ld_a(e)) - row_pre;
    return int(clamp(roundEven(lp) + 127.0, -128.0, 127.0));
}
#elif OP == 9
int value_at(int e) {
    int v = ld_a(e) - IN_ZP;
    return clamp((v >= 0 ? q8_rq0(v, MO, SO) : q8_rq0(v, M_A, S_A)) + OUT_ZP, -128, 127);
}
#else
int row_cached = -1;
int row_max = 0;
float row_inv = 0.0;
int value_at(int e) {
    int row = e / L;
    if (row != row_cached) {
        row_cached = row;
#if ROWSTATS
        int mx = rs[2 * row];
        precise float s = intBitsToFloat(rs[2 * row + 1]);
#else
        int mx = -128;
        for (int j = 0; j < L; ++j) mx = max(mx, ld_a(row * L + j));
        precise float s = 0.0;
        for (int j = 0; j < L; ++j) s += lut[255 - mx + ld_a(row * L + j)];
#endif
        precise float d = s * OUT_SCALE;
        row_max = mx;
        row_inv = 1.0 / d;
    }
    precise float p = lut[255 - row_max + ld_a(e)] * row_inv;
    int q = int(sign(p) * floor(abs(p) + 0.5));
    return clamp(q + OUT_ZP, -128, 127);
}
#endif

#if PSUM
void main() {
    int g = int(gpuc_gid());
    if (g >= int(TOTAL)) return;
    int part = g % PARTS, e = g / PARTS, r0 = part * RP;
#if OP == 1
    int o = e / INNER, i = e % INNER, s = 0;
    for (int r = r0; r < min(R, r0 + RP); ++r) s += ld_a((o * R + r) * INNER + i);
    ps[g] = s;
#else
    ivec2 w = window_part(e, r0, min(KH, r0 + RP));
    ps[2 * g] = w.x;
    ps[2 * g + 1] = w.y;
#endif
}
#elif STATS
void main() {
    int r = int(gpuc_gid());
    if (r >= int(TOTAL)) return;
#if CHUNKED
    int first = steps[0], last = steps[0] + steps[1];
#else
    int first = 0, last = L;
#endif
    int base = r * L;
#if PHASE == 0
    int mx = first > 0 ? rs[2 * r] : -128;
    for (int j = first; j < last; ++j) mx = max(mx, ld_a(base + j));
    rs[2 * r] = mx;
#elif OP == 19
    int acc = first > 0 ? rs[2 * r + 1] : 0;
    for (int j = first; j < last; ++j) {
        int v = ld_a(base + j) - IN_ZP;
        acc += v * v;
    }
    rs[2 * r + 1] = acc;
#else
    int mx = rs[2 * r];
    precise float s = first > 0 ? intBitsToFloat(rs[2 * r + 1]) : 0.0;
    for (int j = first; j < last; ++j) s += lut[255 - mx + ld_a(base + j)];
    rs[2 * r + 1] = floatBitsToInt(s);
#endif
}
#else
void main() {
    uint gid = gpuc_gid();
    if (gid >= TOTAL) return;
    uint word = 0u;
    for (int j = 0; j < 4; ++j) {
        int e = int(gid) * 4 + j;
        if (e >= NOUT) break;
        word |= (uint(value_at(e)) & 0xFFu) << (8 * j);
    }
    out_[gid] = word;
}
#endif
