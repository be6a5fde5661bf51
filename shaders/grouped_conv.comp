// @storage16
// A grouped convolution computed directly (ops/grouped_conv.py: a measured variant of its implicit-GEMM
// `gemm` dispatch, same bindings): one invocation = 4 consecutive output channels x PX consecutive
// output pixels of one row; output channel oc of group g = oc / GN reads input channels g * CIG ..
// g * CIG + CIG - 1; the weights are the gemm's [GROUPS][GK][GNP] (k = (ky, kx, ci)), read as 4 columns
// of one k.  Per tap and input channel the 4 weights are loaded once and applied to the PX pixels.
// Epilogue as gemm.comp's `finish` (gemm_epi.glsl, then EPI_CHAIN).  Sums in (ky, kx, ci)
// order, as the gemm's.
// Defines: N H W OH OW KW KH SH SW DH DW PT PL GN GK GROUPS CIG LDA LDC GNP PX OXB CG (= ceil(LDC / 4))
//          HAS_BIAS ACT RESIDUAL ACT2 EPI_CHAIN
// @include epi_chain.glsl

// @include gemm_epi.glsl

float grouped_epi(float v, int col, int o) {
    v = gemm_epi(v, BIAS_AT(col), RES_AT(o));
#if EPI_CHAIN
    v = epi_chain(o, v);                         // a fused elementwise chain (epi_chain.glsl)
#endif
    return v;
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
    int ox0 = ob * PX, oc0 = c4 * 4;
    int g[4], col[4], wb[4];
    for (int c = 0; c < 4; ++c) {
        int oc = min(oc0 + c, LDC - 1);           // (past the channels: a copy of the last, not stored)
        g[c] = oc / GN;
        col[c] = oc % GN;
        wb[c] = g[c] * GK * GNP + col[c];
    }
    vec4 acc[PX];
    for (int p = 0; p < PX; ++p) acc[p] = vec4(0.0);
    for (int ky = 0; ky < KH; ++ky) {
        int iy = oy * SH - PT + ky * DH;
        if (iy < 0 || iy >= H) continue;
        int rowb = (n * H + iy) * W;
        for (int kx = 0; kx < KW; ++kx) {
            for (int ci = 0; ci < CIG; ++ci) {
                int k = (ky * KW + kx) * CIG + ci;
                vec4 wv = vec4(LD(w, wb[0] + k * GNP), LD(w, wb[1] + k * GNP), LD(w, wb[2] + k * GNP),
                               LD(w, wb[3] + k * GNP));
                for (int p = 0; p < PX; ++p) {
                    int ix = (ox0 + p) * SW - PL + kx * DW;
                    if (ix < 0 || ix >= W) continue;
                    int xb = (rowb + ix) * LDA + ci;
#if GN % 4 == 0                                  // the 4 channels are one group's: one input value
                    vec4 xv = vec4(LD(x, xb + g[0] * CIG));
#else
                    vec4 xv = vec4(LD(x, xb + g[0] * CIG), LD(x, xb + g[1] * CIG), LD(x, xb + g[2] * CIG),
                                   LD(x, xb + g[3] * CIG));
#endif
                    acc[p] += xv * wv;
                }
            }
        }
    }
    for (int p = 0; p < PX; ++p) {
        int ox = ox0 + p;
        if (ox >= OW) break;
        int pix = (n * OH + oy) * OW + ox;
        for (int c = 0; c < 4; ++c) {
            int oc = oc0 + c;
            if (oc >= LDC) break;
            int o = pix * LDC + oc;
            ST(out_, o, grouped_epi(acc[p][c], oc, o));
        }
    }
}
