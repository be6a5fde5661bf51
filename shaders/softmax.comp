// @storage16
// SOFTMAX over one axis (D elements per row, INNER apart: 1 for the last axis; a row is an (outer,
// inner) pair, its elements at outer * D * INNER + inner + i * INNER), out = exp((x - max) * BETA) / sum.
// ROW_PER_GROUP=0: one invocation per row (short rows).  ROW_PER_GROUP=1: one workgroup per row,
// invocations stride over the row and reduce max and sum through shared memory (long rows);
// SUBGROUP=1 (the `subgroup` variant): through subgroup arithmetic first (wg_reduce.glsl).
#ifndef SUBGROUP
#define SUBGROUP 0
#endif
#ifndef INNER
#define INNER 1
#endif
int row_base(uint row) {
    return int(row / uint(INNER)) * D * INNER + int(row % uint(INNER));
}
#if ROW_PER_GROUP
shared float red[gl_WorkGroupSize.x];
// @include wg_reduce.glsl

void main() {
    uint row = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
    if (row * gl_WorkGroupSize.x >= TOTAL) return;      // whole workgroup leaves together
    int b = row_base(row);
    int l = int(gl_LocalInvocationID.x), n = int(gl_WorkGroupSize.x);
    float m = -1.0 / 0.0;
    for (int i = l; i < D; i += n) m = max(m, LD(x, b + i * INNER));
    m = wg_reduce(m, true);
    float s = 0.0;
    for (int i = l; i < D; i += n) s += exp((LD(x, b + i * INNER) - m) * BETA);
    float inv = 1.0 / wg_reduce(s, false);
    for (int i = l; i < D; i += n) ST(out_, b + i * INNER, exp((LD(x, b + i * INNER) - m) * BETA) * inv);
}
#else
void main() {
    uint gid = gpuc_gid();
    if (gid >= TOTAL) return;
    int b = row_base(gid);
    float m = LD(x, b);
    for (int i = 1; i < D; ++i) m = max(m, LD(x, b + i * INNER));
    float s = 0.0;
    for (int i = 0; i < D; ++i) s += exp((LD(x, b + i * INNER) - m) * BETA);
    float inv = 1.0 / s;
    for (int i = 0; i < D; ++i) ST(out_, b + i * INNER, exp((LD(x, b + i * INNER) - m) * BETA) * inv);
}
#endif
