// @storage16
// CONV_3D, NDHWC input, filter [KD][KH][KW][CI][CO], one invocation per output element (consecutive
// invocations = consecutive output channels, so filter reads coalesce).  Taps outside the input are
// skipped (zero padding); PF / PT / PL are the leading pads of depth / height / width.
// Epilogue: + bias[co], fused activation (gpuc_act).
// VEC (CO % 4 == 0): each invocation computes 4 consecutive output channels; w, bias and out_ are
// vec4 arrays (CG = CO / 4 groups), so one input load feeds 4 multiply-adds.
// Defines: D H W CI OD OH OW CO CG KD KH KW SD SH SW DD DH DW PF PT PL HAS_BIAS ACT VEC
#if VEC
#define ACC vec4
#define NC CG
#else
#define ACC float
#define NC CO
#endif
void main() {
    uint gid = gpuc_gid();
    if (gid >= TOTAL) return;
    int t = int(gid);
    int co = t % NC;
    t /= NC;
    int ox = t % OW;
    t /= OW;
    int oy = t % OH;
    t /= OH;
    int oz = t % OD;
    int n = t / OD;
    ACC acc = ACC(0.0);
    for (int kd = 0; kd < KD; ++kd) {
        int iz = oz * SD - PF + kd * DD;
        if (iz < 0 || iz >= D) continue;
        for (int kh = 0; kh < KH; ++kh) {
            int iy = oy * SH - PT + kh * DH;
            if (iy < 0 || iy >= H) continue;
            for (int kw = 0; kw < KW; ++kw) {
                int ix = ox * SW - PL + kw * DW;
                if (ix < 0 || ix >= W) continue;
                int xb = (((n * D + iz) * H + iy) * W + ix) * CI;
                int wb = ((kd * KH + kh) * KW + kw) * CI * NC + co;
                for (int ci = 0; ci < CI; ++ci) acc += LD(x, xb + ci) * LD(w, wb + ci * NC);
            }
        }
    }
#if HAS_BIAS
    acc += LD(bias, co);
#endif
#if VEC
    ST(out_, gid, vec4(gpuc_act(acc.x), gpuc_act(acc.y), gpuc_act(acc.z), gpuc_act(acc.w)));
#else
    ST(out_, gid, gpuc_act(acc));
#endif
}
