// @storage16
#extension GL_EXT_control_flow_attributes : enable
// LayerNorm over the last D elements of each row (passes/layer_norm.py, ops/layer_norm.py), as the
// unfused chain computes it, statistics in fp32 (two passes over the row):
//   mean = sum(x) / D;  var = sum((x - mean)^2) / D;  inv = rsqrt(var + EPS);
//   out = ((x - mean) * inv) * gamma + beta          (HAS_GAMMA / HAS_BETA: per-element [D] constants)
// A NaN or Inf in a row makes the whole row NaN, like the chain.
// ROW_PER_GROUP=0: one invocation per row (short rows).  ROW_PER_GROUP=1: one workgroup per row,
// reducing through shared memory; SUBGROUP=1 (the `subgroup` variant): subgroup arithmetic first.
// ROW_PER_GROUP=2: SEG invocations per row, gl_WorkGroupSize.x / SEG rows per workgroup (rows of a
// few hundred elements: one workgroup per row left most of its invocations idle); wg_reduce.glsl's
// segmented reductions (under SUBGROUP=1 an invocation's place is numbered through its subgroup).
// SEG_PER (ROW_PER_GROUP=2, rows of at most SEG * SEG_PER elements): each invocation reads its elements
// once into registers instead of once per pass.
// Defines: D EPS HAS_GAMMA HAS_BETA ROW_PER_GROUP; ROWS SEG SEG_PER (ROW_PER_GROUP=2)
#ifndef SUBGROUP
#define SUBGROUP 0
#endif
// @include ew_math.glsl

float ln_out(float v, float mean, float inv, int c) {
    float r = (v - mean) * inv;
#if HAS_GAMMA
    r = r * LD(gamma, c);
#endif
#if HAS_BETA
    r = r + LD(beta, c);
#endif
    return r;
}

#ifndef SEG_PER
#define SEG_PER 0
#endif
#if ROW_PER_GROUP == 2
shared float red[gl_WorkGroupSize.x];
#define RED_SEG SEG
// @include wg_reduce.glsl

void main() {
    uint wg = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
    if (wg * gl_WorkGroupSize.x >= TOTAL) return;      // whole workgroup leaves together
#if SUBGROUP
    uint pos = gl_SubgroupID * gl_SubgroupSize + gl_SubgroupInvocationID;
#else
    uint pos = gl_LocalInvocationID.x;
#endif
    int row = int(wg * (gl_WorkGroupSize.x / SEG) + pos / SEG), l = int(pos % SEG);
    bool live = row < ROWS;                      // (a last workgroup's spare segments still reduce)
    int b = row * D;
    float s = 0.0;
#if SEG_PER
    // the row's elements of this invocation (i = l + j*SEG) read once and kept in registers: the same
    // sums in the same order as the loops below
    float v[SEG_PER];
    [[unroll]] for (int j = 0; j < SEG_PER; ++j) {
        int i = l + j * SEG;
        v[j] = live && i < D ? LD(x, b + i) : 0.0;
        if (i < D) s += v[j];
    }
    float mean = seg_reduce(s, false, pos) / float(D);
    float q = 0.0;
    [[unroll]] for (int j = 0; j < SEG_PER; ++j)
        if (l + j * SEG < D) { float d = v[j] - mean; q += d * d; }
    float inv = ew_rsqrt(seg_reduce(q, false, pos) / float(D) + EPS);
    if (live)
        [[unroll]] for (int j = 0; j < SEG_PER; ++j)
            if (l + j * SEG < D) ST(out_, b + l + j * SEG, ln_out(v[j], mean, inv, l + j * SEG));
#else
    if (live)
        for (int i = l; i < D; i += SEG) s += LD(x, b + i);
    float mean = seg_reduce(s, false, pos) / float(D);
    float q = 0.0;
    if (live)
        for (int i = l; i < D; i += SEG) { float d = LD(x, b + i) - mean; q += d * d; }
    float inv = ew_rsqrt(seg_reduce(q, false, pos) / float(D) + EPS);
    if (live)
        for (int i = l; i < D; i += SEG) ST(out_, b + i, ln_out(LD(x, b + i), mean, inv, i));
#endif
}
#elif ROW_PER_GROUP
shared float red[gl_WorkGroupSize.x];
// @include wg_reduce.glsl

void main() {
    uint row = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
    if (row * gl_WorkGroupSize.x >= TOTAL) return;      // whole workgroup leaves together
    int b = int(row) * D;
    int l = int(gl_LocalInvocationID.x), n = int(gl_WorkGroupSize.x);
    float s = 0.0;
    for (int i = l; i < D; i += n) s += LD(x, b + i);
    float mean = wg_reduce(s, false) / float(D);
    float q = 0.0;
    for (int i = l; i < D; i += n) { float d = LD(x, b + i) - mean; q += d * d; }
    float inv = ew_rsqrt(wg_reduce(q, false) / float(D) + EPS);
    for (int i = l; i < D; i += n) ST(out_, b + i, ln_out(LD(x, b + i), mean, inv, i));
}
#else
void main() {
    uint gid = gpuc_gid();
    if (gid >= TOTAL) return;
    int b = int(gid) * D;
    float s = 0.0;
    for (int i = 0; i < D; ++i) s += LD(x, b + i);
    float mean = s / float(D);
    float q = 0.0;
    for (int i = 0; i < D; ++i) { float d = LD(x, b + i) - mean; q += d * d; }
    float inv = ew_rsqrt(q / float(D) + EPS);
    for (int i = 0; i < D; ++i) ST(out_, b + i, ln_out(LD(x, b + i), mean, inv, i));
}
#endif
