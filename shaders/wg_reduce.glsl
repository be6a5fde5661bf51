// Max / sum of one float per invocation over a segment of RED_SEG consecutive invocations (default: the
// whole workgroup); every invocation of the segment gets the result (included by templates that reduce
// a row per workgroup or per segment: softmax.comp, row_norm.comp, pool2d.comp, layer_norm.comp; needs
// `shared float red[gl_WorkGroupSize.x]`; called in uniform control flow: it has barriers).
// `pos`: the invocation's place, numbered as the segments are (wg_reduce: gl_LocalInvocationID.x).
// SUBGROUP=1 (the `subgroup` kernel variant, devices with subgroup arithmetic), when subgroups are no
// larger than a segment or the segment is the workgroup: each subgroup reduces in registers, its first invocation posts the result, and
// every invocation combines its segment's partials in the same order (then `pos` must number the
// invocations through their subgroups, gl_SubgroupID * gl_SubgroupSize + gl_SubgroupInvocationID, so a
// subgroup lies inside one segment); one module serves any subgroup size.  Else a shared-memory tree
// per segment (RED_SEG a power of two).
#ifndef RED_SEG
#define RED_SEG gl_WorkGroupSize.x
#endif
#if SUBGROUP
#extension GL_KHR_shader_subgroup_arithmetic : require
#endif
float seg_reduce(float v, bool is_max, uint pos) {
    uint seg = pos / RED_SEG;
#if SUBGROUP
    // uniform (the same for every invocation); a whole-workgroup segment takes any subgroup size
    if (gl_SubgroupSize <= RED_SEG || RED_SEG == gl_WorkGroupSize.x) {
        float s = is_max ? subgroupMax(v) : subgroupAdd(v);
        if (subgroupElect()) red[gl_SubgroupID] = s;
        barrier();
        uint per = max(RED_SEG / gl_SubgroupSize, 1u), first = seg * per;
        float r = red[first];
        for (uint i = 1; i < per; ++i) r = is_max ? max(r, red[first + i]) : r + red[first + i];
        barrier();
        return r;
    }
#endif
    red[pos] = v;
    barrier();
    for (uint s = RED_SEG / 2; s > 0; s >>= 1) {
        if (pos % RED_SEG < s) red[pos] = is_max ? max(red[pos], red[pos + s]) : red[pos] + red[pos + s];
        barrier();
    }
    float r = red[seg * RED_SEG];
    barrier();
    return r;
}

float wg_reduce(float v, bool is_max) { return seg_reduce(v, is_max, gl_LocalInvocationID.x); }
