// @storage16
// RMSNorm over the last D elements of each row (ops/rms_norm.py: an odml.rms_norm composite), in the
// decomposition's order, fp32 sums:
//   ms = sum(x * x) / D;  r = rsqrt(ms + EPS);  out = (x * r) * w
// One workgroup per row, reducing through wg_reduce.glsl (SUBGROUP=1, the `subgroup` variant: subgroup
// arithmetic first).  Defines: D EPS
#ifndef SUBGROUP
#define SUBGROUP 0
#endif
// @include ew_math.glsl
shared float red[gl_WorkGroupSize.x];
// @include wg_reduce.glsl

void main() {
    uint row = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
    if (row * gl_WorkGroupSize.x >= TOTAL) return;      // whole workgroup leaves together
    int b = int(row) * D;
    int l = int(gl_LocalInvocationID.x), n = int(gl_WorkGroupSize.x);
    float s = 0.0;
    for (int i = l; i < D; i += n) { float v = LD(x, b + i); s += v * v; }
    float r = ew_rsqrt(wg_reduce(s, false) / float(D) + EPS);
    for (int i = l; i < D; i += n) ST(out_, b + i, (LD(x, b + i) * r) * LD(w, i));
}
