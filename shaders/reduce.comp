// @storage16
// Reduction over a set of axes.  OP: 0 mean, 1 sum, 2 max, 3 min, 4 prod.
// Defines: NK K_SHAPE[] K_STRIDES[] (kept axes), NR R_SHAPE[] R_STRIDES[] (reduced axes), RCOUNT.
// WG_PER_OUT=0: one invocation per output element.  WG_PER_OUT=1 (long reductions): one workgroup per
// output element, invocations stride over the reduced elements and combine through shared memory;
// SUBGROUP=1 (the `subgroup` variant, devices with subgroup arithmetic): each subgroup combines in
// registers first and every invocation sums the gl_NumSubgroups partials in one order (any subgroup size).
// PROLOGUE=1 (passes/ew_fusion.py fuse_reduce_prologue, op FUSED_REDUCE): the reduced tensor is not
// read but computed per element by a fused elementwise expression (EW_BODY / EW_RESULT over inputs
// x0..x<NIN-1>, as ew_fused.comp); IK_STRIDES[k*NK+d] / IR_STRIDES[k*NR+d]: input k's element strides
// along kept axis d / reduced axis d (0 where it broadcasts).
#ifndef WG_PER_OUT
#define WG_PER_OUT 0
#endif
#ifndef PROLOGUE
#define PROLOGUE 0
#endif
#ifndef SUBGROUP
#define SUBGROUP 0
#endif
#ifndef COLS
#define COLS 0
#endif
#ifndef COLS4
#define COLS4 0
#endif
// PARTS > 1 (WG_PER_OUT, ops/reduce.py _in_parts): PARTS workgroups an output, workgroup p of output o reducing the
// elements [p * PART, (p + 1) * PART) of it into out_[o * PARTS + p] (no mean's division: the second dispatch
// divides).  DIVISOR: what a mean divides by (default RCOUNT; the second dispatch: the whole count).
#ifndef PARTS
#define PARTS 1
#endif
#ifndef PART
#define PART RCOUNT
#endif
#ifndef DIVISOR
#define DIVISOR RCOUNT
#endif
// OP 2 / 3 as LiteRT's REDUCE_MAX / REDUCE_MIN: its kernels fold the elements in order, a new element
// replacing the running value unless it is strictly worse, so a NaN survives only as the last element
// and all before the last NaN is dropped (R_FOLD).  In parallel (WG_PER_OUT): L, the last NaN's
// position, is found beside the max of the non-NaN elements; the result is NaN when L is the last
// element, else the max (min) of the elements after L (a second pass, only when there is a NaN).
#define R_NANFOLD (OP == 2 || OP == 3)
#define R_FOLD(acc, v) ((isnan(v) || isnan(acc)) ? (v) : R_OP(acc, v))
#if OP == 2
#define R_INIT (-1.0 / 0.0)
#define R_OP(a, b) max(a, b)
#define R_SUBGROUP subgroupMax
#elif OP == 3
#define R_INIT (1.0 / 0.0)
#define R_OP(a, b) min(a, b)
#define R_SUBGROUP subgroupMin
#elif OP == 4
#define R_INIT 1.0
#define R_OP(a, b) ((a) * (b))
#define R_SUBGROUP subgroupMul
#else
#define R_INIT 0.0
#define R_OP(a, b) ((a) + (b))
#define R_SUBGROUP subgroupAdd
#endif

int base_of(int t) {
    int base = 0;
    for (int d = NK - 1; d >= 0; --d) {
        base += (t % K_SHAPE[d]) * K_STRIDES[d];
        t /= K_SHAPE[d];
    }
    return base;
}

#if PROLOGUE
// @include ew_math.glsl
int pb[NIN];                        // each input's offset of the current output's kept coordinates
void prologue_bases(int t) {
    for (int k = 0; k < NIN; ++k) pb[k] = 0;
    for (int d = NK - 1; d >= 0; --d) {
        int c = t % K_SHAPE[d];
        t /= K_SHAPE[d];
        for (int k = 0; k < NIN; ++k) pb[k] += c * IK_STRIDES[k * NK + d];
    }
}

float element(int base, int r) {
    int ix[NIN];
    for (int k = 0; k < NIN; ++k) ix[k] = pb[k];
    int u = r;
    for (int d = NR - 1; d >= 0; --d) {
        int c = u % R_SHAPE[d];
        u /= R_SHAPE[d];
        for (int k = 0; k < NIN; ++k) ix[k] += c * IR_STRIDES[k * NR + d];
    }
    float v0 = LD(x0, ix[0]);
#if NIN > 1
    float v1 = LD(x1, ix[1]);
#endif
#if NIN > 2
    float v2 = LD(x2, ix[2]);
#endif
#if NIN > 3
    float v3 = LD(x3, ix[3]);
#endif
#if NIN > 4
    float v4 = LD(x4, ix[4]);
#endif
#if NIN > 5
    float v5 = LD(x5, ix[5]);
#endif
#if NIN > 6
    float v6 = LD(x6, ix[6]);
#endif
    EW_BODY
#ifdef GPUC_TEST_BROKEN
    return ew_keep(EW_RESULT) + 0.5;    // test hook only (GPUC_TEST_BREAK_OP)
#else
    return ew_keep(EW_RESULT);      // (no multiply-add contracted into the accumulation)
#endif
}
#else
// The element offset in x of reduced element r of the output whose kept coordinates are at `base`.
int r_offset(int base, int r) {
    int u = r, off = base;
    for (int d = NR - 1; d >= 0; --d) {
        off += (u % R_SHAPE[d]) * R_STRIDES[d];
        u /= R_SHAPE[d];
    }
    return off;
}
#if !COLS4
float element(int base, int r) { return LD(x, r_offset(base, r)); }
#endif
#endif

#if COLS4
// COLS4=1 (the `cols4` variant, OP 0 / 1: COLS's case with the innermost kept axis a multiple of 4 long and x
// read as 4-vectors, no prologue): invocation group g of a workgroup (C4_GROUPS of them, gl_WorkGroupSize.x /
// C4_GROUPS slices each) sums 4 consecutive outputs at once over slices of the reduced elements, one 4-vector
// load an element; the slices' partial sums are combined in shared memory in slice order.
shared vec4 red4[gl_WorkGroupSize.x];
void main() {
    uint wg = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
    int lid = int(gl_LocalInvocationID.x);
    int grp = lid % C4_GROUPS, slice = lid / C4_GROUPS, slices = int(gl_WorkGroupSize.x) / C4_GROUPS;
    int o = (int(wg) * C4_GROUPS + grp) * 4;    // the first of the group's 4 outputs (OUTPUTS % 4 == 0)
    vec4 acc = vec4(R_INIT);
    if (o < OUTPUTS) {
        int base = base_of(o);
        for (int r = slice; r < RCOUNT; r += slices) acc = R_OP(acc, LD(x, r_offset(base, r) >> 2));
    }
    red4[lid] = acc;
    barrier();
    if (slice != 0 || o >= OUTPUTS) return;
    for (int s = 1; s < slices; ++s) acc = R_OP(acc, red4[s * C4_GROUPS + grp]);
#if OP == 0
    acc /= float(DIVISOR);
#endif
    for (int c = 0; c < 4; ++c) ST(out_, o + c, acc[c]);
}
#elif COLS
// COLS=1 (OP 0 / 1; the innermost kept axis is x's innermost: a spatial mean of NHWC): a workgroup takes COLS_W
// consecutive outputs, its invocations as COLS_W columns by gl_WorkGroupSize.x / COLS_W slices of the reduced
// elements, so that a subgroup's loads are consecutive elements (one output per element each as WG_PER_OUT
// strides C apart); the slices' partial sums are combined in shared memory in slice order.
shared float red_c[gl_WorkGroupSize.x];
void main() {
    uint wg = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
    int lid = int(gl_LocalInvocationID.x);
    int col = lid % COLS_W, slice = lid / COLS_W, slices = int(gl_WorkGroupSize.x) / COLS_W;
    int o = int(wg) * COLS_W + col;
    float acc = R_INIT;
    if (o < OUTPUTS) {
        int base = base_of(o);
#if PROLOGUE
        prologue_bases(o);
#endif
        for (int r = slice; r < RCOUNT; r += slices) acc = R_OP(acc, element(base, r));
    }
    red_c[lid] = acc;
    barrier();
    if (slice != 0 || o >= OUTPUTS) return;
    for (int s = 1; s < slices; ++s) acc = R_OP(acc, red_c[s * COLS_W + col]);
#if OP == 0
    acc /= float(DIVISOR);
#endif
    ST(out_, o, acc);
}
#elif WG_PER_OUT
shared float red[gl_WorkGroupSize.x];
shared int r_last;
#if SUBGROUP
#extension GL_KHR_shader_subgroup_arithmetic : require
float wg_reduce(float v) {
    float s = R_SUBGROUP(v);
    if (subgroupElect()) red[gl_SubgroupID] = s;
    barrier();
    float r = red[0];
    for (uint i = 1; i < gl_NumSubgroups; ++i) r = R_OP(r, red[i]);
    return r;
}
#else
float wg_reduce(float v) {
    uint l = gl_LocalInvocationID.x;
    red[l] = v;
    barrier();
    for (uint s = gl_WorkGroupSize.x / 2; s > 0; s >>= 1) {
        if (l < s) red[l] = R_OP(red[l], red[l + s]);
        barrier();
    }
    return red[0];
}
#endif

void main() {
    uint w = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
    if (w * gl_WorkGroupSize.x >= TOTAL) return;          // whole workgroup leaves together
    uint o = w / PARTS;
    int r0 = int(w % PARTS) * PART, r1 = min(RCOUNT, r0 + PART);
    int base = base_of(int(o));
#if PROLOGUE
    prologue_bases(int(o));
#endif
    float acc = R_INIT;
#if R_NANFOLD
    int last = -1;
    for (int r = int(gl_LocalInvocationID.x); r < RCOUNT; r += int(gl_WorkGroupSize.x)) {
        float v = element(base, r);
        if (isnan(v)) last = r; else acc = R_OP(acc, v);
    }
    if (gl_LocalInvocationID.x == 0) r_last = -1;
    barrier();
    if (last >= 0) atomicMax(r_last, last);
    barrier();
    int L = r_last;                                       // uniform over the workgroup
    if (L >= 0) {
        acc = R_INIT;
        for (int r = L + 1 + int(gl_LocalInvocationID.x); r < RCOUNT; r += int(gl_WorkGroupSize.x))
            acc = R_OP(acc, element(base, r));
    }
    acc = wg_reduce(acc);
    if (L == RCOUNT - 1) acc = uintBitsToFloat(0x7fc00000u);
#else
    for (int r = r0 + int(gl_LocalInvocationID.x); r < r1; r += int(gl_WorkGroupSize.x)) acc = R_OP(acc, element(base, r));
    acc = wg_reduce(acc);
#endif
#if OP == 0 && PARTS == 1
    acc /= float(DIVISOR);
#endif
    if (gl_LocalInvocationID.x == 0) ST(out_, w, acc);
}
#else
void main() {
    uint gid = gpuc_gid();
    if (gid >= TOTAL) return;
    int base = base_of(int(gid));
#if PROLOGUE
    prologue_bases(int(gid));
#endif
    float acc = R_INIT;
#if R_NANFOLD
    for (int r = 0; r < RCOUNT; ++r) acc = R_FOLD(acc, element(base, r));
#else
    for (int r = 0; r < RCOUNT; ++r) acc = R_OP(acc, element(base, r));
#endif
#if OP == 0
    acc /= float(DIVISOR);
#endif
    ST(out_, gid, acc);
}
#endif
