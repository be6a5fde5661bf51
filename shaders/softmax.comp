// @storage16
// SOFTMAX over the last axis (D elements per row), out = exp((x - max) * BETA) / sum.
// ROW_PER_GROUP=0: one invocation per row (short rows).  ROW_PER_GROUP=1: one workgroup per row,
// invocations stride over the row and reduce max and sum through shared memory (long rows);
// SUBGROUP=1 (the `subgroup` variant): through subgroup arithmetic first.
#ifndef SUBGROUP
#define SUBGROUP 0
#endif
#if ROW_PER_GROUP
shared float red[gl_WorkGroupSize.x];

#if SUBGROUP
// `subgroup` variant (device with subgroup arithmetic): each subgroup reduces in registers, its first
// invocation posts the result, and every invocation combines the gl_NumSubgroups partials in the same
// order, so all see the same value; any subgroup size works (no device-specific workgroup size).
#extension GL_KHR_shader_subgroup_arithmetic : require
float wg_reduce(float v, bool is_max) {
    float s = is_max ? subgroupMax(v) : subgroupAdd(v);
    if (subgroupElect()) red[gl_SubgroupID] = s;
    barrier();
    float r = red[0];
    for (uint i = 1; i < gl_NumSubgroups; ++i) r = is_max ? max(r, red[i]) : r + red[i];
    barrier();
    return r;
}
#else
float wg_reduce(float v, bool is_max) {
    uint l = gl_LocalInvocationID.x;
    red[l] = v;
    barrier();
    for (uint s = gl_WorkGroupSize.x / 2; s > 0; s >>= 1) {
        if (l < s) red[l] = is_max ? max(red[l], red[l + s]) : red[l] + red[l + s];
        barrier();
    }
    float r = red[0];
    barrier();
    return r;
}
#endif

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
