// @storage16
// SOFTMAX over the last axis (D elements per row), out = exp((x - max) * BETA) / sum.
// ROW_PER_GROUP=0: one invocation per row (short rows).  ROW_PER_GROUP=1: one workgroup per row,
// invocations stride over the row and reduce max and sum through shared memory (long rows);
// SUBGROUP=1 (the `subgroup` variant): through subgroup arithmetic first (wg_reduce.glsl).
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
    float m = -1.0 / 0.0;
    for (int i = l; i < D; i += n) m = max(m, LD(x, b + i));
    m = wg_reduce(m, true);
    float s = 0.0;
    for (int i = l; i < D; i += n) s += exp((LD(x, b + i) - m) * BETA);
    float inv = 1.0 / wg_reduce(s, false);
    for (int i = l; i < D; i += n) ST(out_, b + i, exp((LD(x, b + i) - m) * BETA) * inv);
}
#else
void main() {
    uint gid = gpuc_gid();
    if (gid >= TOTAL) return;
    int b = int(gid) * D;
    float m = LD(x, b);
    for (int i = 1; i < D; ++i) m = max(m, LD(x, b + i));
    float s = 0.0;
    for (int i = 0; i < D; ++i) s += exp((LD(x, b + i) - m) * BETA);
    float inv = 1.0 / s;
    for (int i = 0; i < D; ++i) ST(out_, b + i, exp((LD(x, b + i) - m) * BETA) * inv);
}
#endif
