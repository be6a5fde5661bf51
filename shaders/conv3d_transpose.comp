// CONV_3D_TRANSPOSE, NDHWC, as LiteRT's float kernel in gather form: output element (n, d, h, w, co)
// sums x[n, id, ih, iw, ci] * f[kd, kh, kw, co, ci] over the taps with d = id * SD - PF + kd * DD (and
// likewise for h, w), then the bias and the fused activation.
// Defines: N D H W CI (input) OD OH OW CO (output) KD KH KW SD SH SW DD DH DW PF PT PL HAS_BIAS ACT
#ifndef HAS_BIAS
#define HAS_BIAS 0
#endif
void main() {
    uint gid = gpuc_gid();
    if (gid >= TOTAL) return;
    int co = int(gid % CO);
    int t = int(gid / CO);
    int ow = t % OW; t /= OW;
    int oh = t % OH; t /= OH;
    int od = t % OD;
    int n = t / OD;
    float acc = 0.0;
    for (int kd = 0; kd < KD; ++kd) {
        int td = od + PF - kd * DD;
        if (td < 0 || td % SD != 0 || td / SD >= D) continue;
        for (int kh = 0; kh < KH; ++kh) {
            int th = oh + PT - kh * DH;
            if (th < 0 || th % SH != 0 || th / SH >= H) continue;
            for (int kw = 0; kw < KW; ++kw) {
                int tw = ow + PL - kw * DW;
                if (tw < 0 || tw % SW != 0 || tw / SW >= W) continue;
                int xi = (((n * D + td / SD) * H + th / SH) * W + tw / SW) * CI;
                int fi = (((kd * KH + kh) * KW + kw) * CO + co) * CI;
                for (int ci = 0; ci < CI; ++ci) acc += x[xi + ci] * f[fi + ci];
            }
        }
    }
#if HAS_BIAS
    acc += bias[co];
#endif
    out_[gid] = gpuc_act(acc);
}
