// @storage16
// DEPTHWISE_CONV_2D, NHWC, filter [1,KH,KW,CO] (already [KH][KW][CO]: channel-contiguous, so
// neighbouring invocations read neighbouring weights).  Output channel oc reads input channel
// oc / MULT.  Two paths (compiler/ops/depthwise_plan.py picks one per shape):
// TILE=0: one invocation = 4 consecutive output channels x PX consecutive output pixels of one
//   row; the input columns they share are loaded once per kernel row.
//   VEC=1 (CO % 4 == 0 and MULT == 1): x, w, bias, res and out_ are vec4 views; otherwise scalar
//   loads/stores with the channel bounds-checked (CO % 4 != 0, depth multiplier > 1).
// TILE=1: one invocation = 1 output channel (VEC=1: 4, as vec4) x an RY x PX tile of output pixels
//   (RY rows, PX columns); the tile's input rows are swept once, top to bottom (each loaded input row
//   of SPAN columns feeds every tile row that uses it), so an input element is loaded
//   ~(SPAN/PX)*(IR/RY) times instead of KH*SPAN/PX.  WREG=1 holds the KH*KW taps in registers
//   (else they are loaded per use, from L1).  Neighbouring invocations are neighbouring channels.
//   Sums run in the same order as TILE=0 (ky, then kx).
// TILE=1 unrolls every loop (the tile, taps and row live in registers: constant indices only).
// Defines: N H W CI CO OH OW KH KW SH SW DH DW PT PL MULT PX CG (= ceil(CO/4)) OXB (= ceil(OW/PX))
//          VEC HAS_BIAS ACT RESIDUAL ACT2 EPI_CHAIN (a fused elementwise chain last: epi_chain.glsl);
//          TILE RY OYB (= ceil(OH/RY)) WREG (TILE=1 only).
#ifndef TILE
#define TILE 0
#endif
#define SPAN ((PX - 1) * SW + (KW - 1) * DW + 1)
// @include epi_chain.glsl

vec4 act4(vec4 v) { return vec4(gpuc_act(v.x), gpuc_act(v.y), gpuc_act(v.z), gpuc_act(v.w)); }
vec4 act24(vec4 v) {
    return vec4(gpuc_apply(v.x, ACT2), gpuc_apply(v.y, ACT2), gpuc_apply(v.z, ACT2), gpuc_apply(v.w, ACT2));
}

#if TILE
#extension GL_EXT_control_flow_attributes : enable
#define IR ((RY - 1) * SH + (KH - 1) * DH + 1)
#if VEC                 // 4 channels per invocation (vec4 views)
#define TV vec4
#define NCH CG
#define WIDX(tap) ((tap) * CG + c)
#define XIDX(pix) ((pix) * CG + c)
#else                   // 1 channel per invocation
#define TV float
#define NCH CO
#define WIDX(tap) ((tap) * CO + c)
#define XIDX(pix) ((pix) * CI + c / MULT)
#endif

// whether tile row rr uses input row r of the tile's window (kernel row (r - rr*SH) / DH)
bool uses(int r, int rr) {
    int d = r - rr * SH;
    return d >= 0 && d % DH == 0 && d / DH < KH;
}

#if EPI_CHAIN
float chain1(int o, float v) { return epi_chain(o, v); }
vec4 chain1(int o, vec4 v) {
    return vec4(epi_chain(o, v.x), epi_chain(o + 1, v.y), epi_chain(o + 2, v.z), epi_chain(o + 3, v.w));
}
#endif
float act1(float v) { return gpuc_act(v); }
vec4 act1(vec4 v) { return act4(v); }
float act21(float v) { return gpuc_apply(v, ACT2); }
vec4 act21(vec4 v) { return act24(v); }

void main() {
    uint gid = gpuc_gid();
    if (gid >= TOTAL) return;
    int c = int(gid % NCH);                      // the channel (VEC: the channel group)
    int t = int(gid / NCH);
    int ob = t % OXB;
    t /= OXB;
    int yb = t % OYB;
    int n = t / OYB;
    int ox0 = ob * PX;
    int oy0 = yb * RY;
#if WREG
    TV wk[KH * KW];                              // the taps in registers
    [[unroll]] for (int i = 0; i < KH * KW; ++i) wk[i] = LD(w, WIDX(i));
#define TAP(i) wk[i]
#else
#define TAP(i) LD(w, WIDX(i))                    // (L1 hits: neighbouring invocations share them)
#endif
    TV acc[RY * PX];
    [[unroll]] for (int i = 0; i < RY * PX; ++i) acc[i] = TV(0.0);
    int iy0 = oy0 * SH - PT;
    int ix0 = ox0 * SW - PL;
    [[unroll]] for (int r = 0; r < IR; ++r) {
        bool used = false;                       // (constant once unrolled: rows between dilated taps)
        [[unroll]] for (int rr = 0; rr < RY; ++rr) used = used || uses(r, rr);
        int iy = iy0 + r;
        if (!used || iy < 0 || iy >= H) continue;
        TV xr[SPAN];
        int rowb = (n * H + iy) * W;
        [[unroll]] for (int j = 0; j < SPAN; ++j) {
            int ix = ix0 + j;
            xr[j] = ix >= 0 && ix < W ? LD(x, XIDX(rowb + ix)) : TV(0.0);
        }
        [[unroll]] for (int rr = 0; rr < RY; ++rr) {
            if (!uses(r, rr)) continue;
            int ky = (r - rr * SH) / DH;
            [[unroll]] for (int kx = 0; kx < KW; ++kx) {
                TV wv = TAP(ky * KW + kx);
                [[unroll]] for (int p = 0; p < PX; ++p) {
                    int ix = ix0 + p * SW + kx * DW;
                    if (ix >= 0 && ix < W) acc[rr * PX + p] += xr[p * SW + kx * DW] * wv;
                }
            }
        }
    }
    [[unroll]] for (int rr = 0; rr < RY; ++rr) {
        int oy = oy0 + rr;
        if (oy >= OH) break;
        [[unroll]] for (int p = 0; p < PX; ++p) {
            int ox = ox0 + p;
            if (ox >= OW) break;
            int pix = (n * OH + oy) * OW + ox;
            TV s = acc[rr * PX + p];
#if HAS_BIAS
            s += LD(bias, c);
#endif
            s = act1(s);
#if RESIDUAL
            s = act21(s + LD(res, pix * NCH + c));
#endif
#if EPI_CHAIN
            s = chain1((pix * NCH + c) * (VEC * 3 + 1), s);     // a fused elementwise chain (epi_chain.glsl)
#endif
            ST(out_, pix * NCH + c, s);
        }
    }
}
#else

void main() {
    uint gid = gpuc_gid();
    if (gid >= TOTAL) return;
    int c4 = int(gid % CG);
    int t = int(gid / CG);
    int ob = t % OXB;
    t /= OXB;
    int oy = t % OH;
    int n = t / OH;
    int ox0 = ob * PX;
    int oc0 = c4 * 4;
    vec4 acc[PX];
    for (int p = 0; p < PX; ++p) acc[p] = vec4(0.0);
    int iy0 = oy * SH - PT;
    int ix0 = ox0 * SW - PL;
    for (int ky = 0; ky < KH; ++ky) {
        int iy = iy0 + ky * DH;
        if (iy < 0 || iy >= H) continue;
        vec4 wr[KW];
        for (int kx = 0; kx < KW; ++kx) {
#if VEC
            wr[kx] = LD(w, (ky * KW + kx) * CG + c4);
#else
            int wb = (ky * KW + kx) * CO + oc0;
            wr[kx] = vec4(LD(w, wb),
                          oc0 + 1 < CO ? LD(w, wb + 1) : 0.0,
                          oc0 + 2 < CO ? LD(w, wb + 2) : 0.0,
                          oc0 + 3 < CO ? LD(w, wb + 3) : 0.0);
#endif
        }
        int rowb = (n * H + iy) * W;
        for (int j = 0; j < SPAN; ++j) {
            int ix = ix0 + j;
            if (ix < 0 || ix >= W) continue;
#if VEC
            vec4 xv = LD(x, (rowb + ix) * CG + c4);
#else
            int xb = (rowb + ix) * CI;
            vec4 xv = vec4(LD(x, xb + oc0 / MULT),
                           oc0 + 1 < CO ? LD(x, xb + (oc0 + 1) / MULT) : 0.0,
                           oc0 + 2 < CO ? LD(x, xb + (oc0 + 2) / MULT) : 0.0,
                           oc0 + 3 < CO ? LD(x, xb + (oc0 + 3) / MULT) : 0.0);
#endif
            for (int p = 0; p < PX; ++p) {
                int d = j - p * SW;
                if (d >= 0 && d % DW == 0 && d / DW < KW) acc[p] += xv * wr[d / DW];
            }
        }
    }
    for (int p = 0; p < PX; ++p) {
        int ox = ox0 + p;
        if (ox >= OW) break;
        int pix = (n * OH + oy) * OW + ox;
        vec4 v = acc[p];
#if VEC
#if HAS_BIAS
        v += LD(bias, c4);
#endif
        v = act4(v);
#if RESIDUAL
        v = act24(v + LD(res, pix * CG + c4));
#endif
#if EPI_CHAIN
        int o4 = (pix * CG + c4) * 4;            // a fused elementwise chain (epi_chain.glsl)
        v = vec4(epi_chain(o4, v.x), epi_chain(o4 + 1, v.y), epi_chain(o4 + 2, v.z), epi_chain(o4 + 3, v.w));
#endif
        ST(out_, pix * CG + c4, v);
#else
        for (int c = 0; c < 4; ++c) {
            int oc = oc0 + c;
            if (oc >= CO) break;
            float s = v[c];
#if HAS_BIAS
            s += LD(bias, oc);
#endif
            s = gpuc_act(s);
#if RESIDUAL
            s = gpuc_apply(s + LD(res, pix * CO + oc), ACT2);
#endif
#if EPI_CHAIN
            s = epi_chain(pix * CO + oc, s);     // a fused elementwise chain (epi_chain.glsl)
#endif
            ST(out_, pix * CO + oc, s);
        }
#endif
    }
}
#endif
