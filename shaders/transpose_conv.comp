// @storage16
// TRANSPOSE_CONV / Convolution2DTransposeBias, NHWC, weights [CO,KH,KW,CI].  TFLite scatters
// x[n,iy,ix,:] onto out[n, iy*SH - PT + ky, ix*SW - PL + kx, :]; here one invocation gathers one
// output element: ky must satisfy (oy + PT - ky) % SH == 0, so only every SH-th tap is visited.
// Defines: N H W CI OH OW CO KH KW SH SW PT PL HAS_BIAS ACT RESIDUAL ACT2
void main() {
    uint gid = gpuc_gid();
    if (gid >= TOTAL) return;
    int oc = int(gid % CO);
    int t = int(gid / CO);
    int ox = t % OW; t /= OW;
    int oy = t % OH;
    int n = t / OH;
    int ty = oy + PT, tx = ox + PL;      // = iy * SH + ky, ix * SW + kx
    float acc = 0.0;
    for (int ky = ty % SH; ky < KH && ky <= ty; ky += SH) {
        int iy = (ty - ky) / SH;
        if (iy >= H) continue;
        for (int kx = tx % SW; kx < KW && kx <= tx; kx += SW) {
            int ix = (tx - kx) / SW;
            if (ix >= W) continue;
            int xb = ((n * H + iy) * W + ix) * CI;
            int wb = ((oc * KH + ky) * KW + kx) * CI;
            for (int c = 0; c < CI; ++c) acc += LD(x, xb + c) * LD(w, wb + c);
        }
    }
#if HAS_BIAS
    acc += LD(bias, oc);
#endif
    float v = gpuc_act(acc);
#if RESIDUAL
    v = gpuc_apply(v + LD(res, gid), ACT2);
#endif
    ST(out_, gid, v);
}
