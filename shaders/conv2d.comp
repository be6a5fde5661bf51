// CONV_2D (grouped when CIG < CI) and DEPTHWISE_CONV_2D (DEPTHWISE=1), NHWC, filter [CO,KH,KW,CIG]
// (depthwise: [1,KH,KW,CO]).  One invocation = one output element.  Bias and activation fused.
// Defines: N H W CI OH OW CO KH KW SH SW DH DW PT PL CIG COG HAS_BIAS ACT DEPTHWISE MULT
// RESIDUAL: out = act2(act(conv) + res[same index]) (a fused residual ADD).
void main() {
    uint gid = gpuc_gid();
    if (gid >= TOTAL) return;
    int oc = int(gid % CO);
    int t = int(gid / CO);
    int ox = t % OW; t /= OW;
    int oy = t % OH;
    int n = t / OH;
    float acc = 0.0;
    int iy0 = oy * SH - PT;
    int ix0 = ox * SW - PL;
#if DEPTHWISE
    int ic = oc / MULT;
    for (int ky = 0; ky < KH; ++ky) {
        int iy = iy0 + ky * DH;
        if (iy < 0 || iy >= H) continue;
        for (int kx = 0; kx < KW; ++kx) {
            int ix = ix0 + kx * DW;
            if (ix < 0 || ix >= W) continue;
            acc += x[((n * H + iy) * W + ix) * CI + ic] * w[(ky * KW + kx) * CO + oc];
        }
    }
#else
    int c0 = (oc / COG) * CIG;
    for (int ky = 0; ky < KH; ++ky) {
        int iy = iy0 + ky * DH;
        if (iy < 0 || iy >= H) continue;
        for (int kx = 0; kx < KW; ++kx) {
            int ix = ix0 + kx * DW;
            if (ix < 0 || ix >= W) continue;
            int xb = ((n * H + iy) * W + ix) * CI + c0;
            int wb = ((oc * KH + ky) * KW + kx) * CIG;
            for (int c = 0; c < CIG; ++c) acc += x[xb + c] * w[wb + c];
        }
    }
#endif
#if HAS_BIAS
    acc += bias[oc];
#endif
    float v = gpuc_act(acc);
#if RESIDUAL
    v = gpuc_apply(v + res[gid], ACT2);
#endif
    out_[gid] = v;
}
