// @storage16
// AVERAGE_POOL_2D (OP 0; averages only the cells inside the input) and MAX_POOL_2D (OP 1), NHWC.
// Defines: N H W C OH OW KH KW SH SW PT PL OP ACT (OUTPUTS: output elements, with WG_PER_OUT)
// FOLDED_PAD 1 (a PAD folded into the pooling, passes/fusion.py fold_pad_pool): the input had an
// explicit padding of EPT EPB EPL EPR cells holding PAD_VALUE (PT/PL include EPT/EPL); those cells
// take part as the padded tensor's did: the maximum sees PAD_VALUE, the average counts them (as
// zeros: the pass folds only zero padding into AVERAGE_POOL_2D).  Implicit SAME padding is ignored.
// WG_PER_OUT 1 (large windows, e.g. a global average pool): one workgroup per output element; its
// invocations stride over the window's cells and combine through wg_reduce (SUBGROUP: the `subgroup`
// variant), so a 128x128 window is not summed by one invocation.
// VEC 1 (C % 4 == 0, small windows): x and out_ are vec4 views and an invocation computes 4 consecutive
// channels of one output pixel (TOTAL counts invocations), each as the scalar form does (the same bits).
#ifndef FOLDED_PAD
#define FOLDED_PAD 0
#endif
#ifndef WG_PER_OUT
#define WG_PER_OUT 0
#endif
#ifndef VEC
#define VEC 0
#endif
#if VEC
#define CV (C / 4)
#define PV vec4
vec4 pool_max(vec4 a, vec4 v) {
    return vec4(gpuc_max_skip(a.x, v.x), gpuc_max_skip(a.y, v.y), gpuc_max_skip(a.z, v.z), gpuc_max_skip(a.w, v.w));
}
vec4 pool_act(vec4 v) { return vec4(gpuc_act(v.x), gpuc_act(v.y), gpuc_act(v.z), gpuc_act(v.w)); }
#else
#define CV C
#define PV float
float pool_max(float a, float v) { return gpuc_max_skip(a, v); }
float pool_act(float v) { return gpuc_act(v); }
#endif
#if WG_PER_OUT
shared float red[gl_WorkGroupSize.x];
// @include wg_reduce.glsl
#endif
void main() {
#if WG_PER_OUT
    uint gid = gpuc_gid() / gl_WorkGroupSize.x;      // the workgroup's output element (whole groups leave)
    if (gid >= uint(OUTPUTS)) return;
#else
    uint gid = gpuc_gid();
    if (gid >= TOTAL) return;
#endif
    int c = int(gid % CV);
    int t = int(gid / CV);
    int ox = t % OW; t /= OW;
    int oy = t % OH;
    int n = t / OH;
    int y0 = max(oy * SH - PT, 0), y1 = min(oy * SH - PT + KH, H);
    int x0 = max(ox * SW - PL, 0), x1 = min(ox * SW - PL + KW, W);
#if FOLDED_PAD
    int cy0 = max(oy * SH - PT, -EPT), cy1 = min(oy * SH - PT + KH, H + EPB);
    int cx0 = max(ox * SW - PL, -EPL), cx1 = min(ox * SW - PL + KW, W + EPR);
    int counted = (cy1 - cy0) * (cx1 - cx0);
#endif
#if OP == 1
    PV acc = PV(-1.0 / 0.0);
#else
    PV acc = PV(0.0);
#endif
#if WG_PER_OUT
    int ww = max(x1 - x0, 0), cells = max(y1 - y0, 0) * ww;
    for (int i = int(gl_LocalInvocationID.x); i < cells; i += int(gl_WorkGroupSize.x)) {
        float v = LD(x, ((n * H + y0 + i / ww) * W + x0 + i % ww) * C + c);
#if OP == 1
        acc = gpuc_max_skip(acc, v);
#else
        acc += v;
#endif
    }
    acc = wg_reduce(acc, OP == 1);
    if (gl_LocalInvocationID.x != 0) return;
#else
    for (int iy = y0; iy < y1; ++iy)
        for (int ix = x0; ix < x1; ++ix) {
            PV v = LD(x, ((n * H + iy) * W + ix) * CV + c);
#if OP == 1
            acc = pool_max(acc, v);
#else
            acc += v;
#endif
        }
#endif
#if OP == 0 && FOLDED_PAD
    acc /= float(max(counted, 1));
#elif OP == 0
    acc /= float(max((y1 - y0) * (x1 - x0), 1));
#elif FOLDED_PAD
    if (counted > max(y1 - y0, 0) * max(x1 - x0, 0)) acc = pool_max(acc, PV(PAD_VALUE));
#endif
    ST(out_, gid, pool_act(acc));
}
