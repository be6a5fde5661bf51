// Workgroup-wide max / sum of one float per invocation, every invocation gets the result (included by
// templates that reduce a row per workgroup: softmax.comp, row_norm.comp; needs `shared float
// red[gl_WorkGroupSize.x]`).  SUBGROUP=1 (the `subgroup` kernel variant, devices with subgroup
// arithmetic): each subgroup reduces in registers, its first invocation posts the result, and every
// invocation combines the gl_NumSubgroups partials in the same order; one module serves any subgroup
// size.  SUBGROUP=0: a shared-memory tree (the workgroup size is a power of two).
#if SUBGROUP
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
