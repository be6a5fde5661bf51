// @storage16
// DEPTHWISE_CONV_2D, NHWC, filter [1,KH,KW,CO] (already [KH][KW][CO]: channel-contiguous, so
// neighbouring invocations read neighbouring weights).  Output channel oc reads input channel
// oc / MULT.  One invocation = 4 consecutive output channels x PX consecutive output pixels of one
// row; the input columns they share are loaded once per kernel row.
// VEC=1 (CO % 4 == 0 and MULT == 1): x, w, bias, res and out_ are vec4 views; otherwise scalar
// loads/stores with the channel bounds-checked (CO % 4 != 0, depth multiplier > 1).
// Defines: N H W CI CO OH OW KH KW SH SW DH DW PT PL MULT PX CG (= ceil(CO/4)) OXB (= ceil(OW/PX))
//          VEC HAS_BIAS ACT RESIDUAL ACT2 EPI_CHAIN (a fused elementwise chain last: epi_chain.glsl).
#define SPAN ((PX - 1) * SW + (KW - 1) * DW + 1)
// @include epi_chain.glsl

vec4 act4(vec4 v) { return vec4(gpuc_act(v.x), gpuc_act(v.y), gpuc_act(v.z), gpuc_act(v.w)); }
vec4 act24(vec4 v) {
    return vec4(gpuc_apply(v.x, ACT2), gpuc_apply(v.y, ACT2), gpuc_apply(v.z, ACT2), gpuc_apply(v.w, ACT2));
}

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
