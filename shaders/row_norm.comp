// @storage16
// Normalisation over the last axis (D elements per row), LiteRT's float kernels:
// OP 0 LOG_SOFTMAX: out = (x - max) - log(sum(exp(x - max)));
// OP 1 L2_NORMALIZATION: out = x / max(sqrt(sum(x * x)), EPS).
// ROW_PER_GROUP=0: one invocation per row (short rows).  ROW_PER_GROUP=1: one workgroup per row;
// invocations stride over the row and reduce through shared memory (long rows);
// SUBGROUP=1 (the `subgroup` variant): through subgroup arithmetic first (wg_reduce.glsl).
// Defines: D OP EPS ROW_PER_GROUP
#ifndef SUBGROUP
#define SUBGROUP 0
#endif
#if ROW_PER_GROUP
shared float red[gl_WorkGroupSize.x];
// @include wg_reduce.glsl

void main() {
    uint row = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
    if (row * gl_WorkGroupSize.x >= TOTAL) return;      // whole workgroup leaves together
    int b = int(row) * D;
    int l = int(gl_LocalInvocationID.x), n = int(gl_WorkGroupSize.x);
#if OP == 0
    float m = -1.0 / 0.0;
    for (int i = l; i < D; i += n) m = max(m, LD(x, b + i));
    m = wg_reduce(m, true);
    float s = 0.0;
    for (int i = l; i < D; i += n) s += exp(LD(x, b + i) - m);
    float ls = log(wg_reduce(s, false));
    for (int i = l; i < D; i += n) ST(out_, b + i, (LD(x, b + i) - m) - ls);
#else
    float s = 0.0;
    for (int i = l; i < D; i += n) s += LD(x, b + i) * LD(x, b + i);
    float nrm = gpuc_max(sqrt(wg_reduce(s, false)), EPS);
    for (int i = l; i < D; i += n) ST(out_, b + i, LD(x, b + i) / nrm);
#endif
}
#else
void main() {
    uint gid = gpuc_gid();
    if (gid >= TOTAL) return;
    int b = int(gid) * D;
#if OP == 0
    float m = LD(x, b);
    for (int i = 1; i < D; ++i) m = max(m, LD(x, b + i));
    float s = 0.0;
    for (int i = 0; i < D; ++i) s += exp(LD(x, b + i) - m);
    float ls = log(s);
    for (int i = 0; i < D; ++i) ST(out_, b + i, (LD(x, b + i) - m) - ls);
#else
    float s = 0.0;
    for (int i = 0; i < D; ++i) s += LD(x, b + i) * LD(x, b + i);
    float nrm = gpuc_max(sqrt(s), EPS);
    for (int i = 0; i < D; ++i) ST(out_, b + i, LD(x, b + i) / nrm);
#endif
}
#endif
