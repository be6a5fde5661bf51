// @storage16
// ARG_MAX / ARG_MIN along one axis: the input viewed as [OUTER][AXIS][INNER].  As LiteRT: the first
// best value wins ties (the running best is replaced only by a strictly greater value; IS_MIN:
// less) and NaNs are skipped (an all-NaN line gives 0).  (LiteRT's own answer for a NaN in the
// *first* position depends on which of its vector paths runs; gpuc skips it like any other NaN.)
// ROW_PER_GROUP=0: one invocation per output element (outer, inner) loops over the axis.
// ROW_PER_GROUP=1 (long axes): one workgroup per output element; invocations scan strided parts of
// the axis, then reduce (value, index) pairs through shared memory keeping the lower index on ties.
// ROW_PER_GROUP=2 / 3 (very long axes, e.g. an LLM's vocabulary: one workgroup would read it alone):
// pass 2 splits each line into PARTS parts of CHUNK elements, a workgroup each, writing one (value
// bits, index) int pair per part to out_ (index -1: only NaNs); pass 3 (x: those pairs) combines
// the PARTS pairs of each output with the same rule.  Parts hold increasing index ranges, so the
// first index still wins ties.
// IS_INT 0: float32 input; 1: int32; 2: uint8 / bool and 3: int8, read from a 32-bit word view
// (4 elements per word).  OUT64: int64 output written as (low, high) int32 words (out_ is an int32
// view of twice the length; indices are non-negative, so the high word is 0).
// Defines: AXIS INNER IS_MIN IS_INT OUT64 ROW_PER_GROUP CHUNK PARTS
#if IS_INT
#define XT int
#else
#define XT float
#endif
#if IS_INT == 2
XT elem(int e) { return int((uint(LD(x, e >> 2)) >> (8 * (e & 3))) & 0xFFu); }
#elif IS_INT == 3
XT elem(int e) { return bitfieldExtract(int(uint(LD(x, e >> 2))), 8 * (e & 3), 8); }
#else
XT elem(int e) { return XT(LD(x, e)); }
#endif
#if IS_MIN
#define BETTER(v, b) ((v) < (b))
#else
#define BETTER(v, b) ((v) > (b))
#endif
#if IS_INT
#define SKIP(v) false
#else
#define SKIP(v) isnan(v)
#endif

void put(uint o, int bi) {
#if OUT64
    ST(out_, 2 * o, bi);
    ST(out_, 2 * o + 1, 0);
#else
    ST(out_, o, bi);
#endif
}

#if ROW_PER_GROUP
shared XT red_v[gl_WorkGroupSize.x];
shared int red_i[gl_WorkGroupSize.x];         // -1: this invocation saw no (non-NaN) value

// (value, index) pairs of the workgroup into red_v[0] / red_i[0]: the better value, the lower index on ties
void reduce_pairs(XT best, int bi) {
    uint l = gl_LocalInvocationID.x;
    red_v[l] = best;
    red_i[l] = bi;
    barrier();
    for (uint s = gl_WorkGroupSize.x / 2; s > 0; s >>= 1) {
        if (l < s) {
            XT v = red_v[l + s];
            int i = red_i[l + s];
            if (i >= 0 && (red_i[l] < 0 || BETTER(v, red_v[l]) || (v == red_v[l] && i < red_i[l]))) {
                red_v[l] = v;
                red_i[l] = i;
            }
        }
        barrier();
    }
}

#if ROW_PER_GROUP == 3
// the combine pass: x holds PARTS (value bits, index) int pairs per output (index -1: no value)
#if IS_INT
XT unpack(int w) { return w; }
#else
XT unpack(int w) { return intBitsToFloat(w); }
#endif
void main() {
    uint o = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
    if (o * gl_WorkGroupSize.x >= TOTAL) return;      // whole workgroup leaves together
    uint l = gl_LocalInvocationID.x;
    XT best = XT(0);
    int bi = -1;
    for (int p = int(l); p < PARTS; p += int(gl_WorkGroupSize.x)) {
        int at = 2 * (int(o) * PARTS + p);
        int i = int(LD(x, at + 1));
        if (i < 0) continue;
        XT v = unpack(int(LD(x, at)));
        if (bi < 0 || BETTER(v, best) || (v == best && i < bi)) {
            best = v;
            bi = i;
        }
    }
    reduce_pairs(best, bi);
    if (l == 0) put(o, max(red_i[0], 0));
}
#else
// ROW_PER_GROUP 1: a workgroup per output scans the whole axis; 2 (the split pass): workgroup g scans
// part g % PARTS (CHUNK elements) of output g / PARTS and writes its (value bits, index) pair
void main() {
    uint g = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
    if (g * gl_WorkGroupSize.x >= TOTAL) return;      // whole workgroup leaves together
#if ROW_PER_GROUP == 2
    int o = int(g) / PARTS, lo = (int(g) % PARTS) * CHUNK, hi = min(lo + CHUNK, AXIS);
#else
    int o = int(g), lo = 0, hi = AXIS;
#endif
    int base = (o / INNER) * AXIS * INNER + o % INNER;
    uint l = gl_LocalInvocationID.x;
    XT best = XT(0);
    int bi = -1;
    for (int a = lo + int(l); a < hi; a += int(gl_WorkGroupSize.x)) {
        XT v = elem(base + a * INNER);
        if (SKIP(v)) continue;
        if (bi < 0 || BETTER(v, best)) {
            best = v;
            bi = a;
        }
    }
    reduce_pairs(best, bi);
    if (l != 0) return;
#if ROW_PER_GROUP == 2
#if IS_INT
    ST(out_, 2 * g, red_v[0]);
#else
    ST(out_, 2 * g, floatBitsToInt(red_v[0]));
#endif
    ST(out_, 2 * g + 1, red_i[0]);
#else
    put(g, max(red_i[0], 0));
#endif
}
#endif
#else
void main() {
    uint gid = gpuc_gid();
    if (gid >= TOTAL) return;
    int o = int(gid) / INNER, i = int(gid) % INNER;
    int base = o * AXIS * INNER + i;
    XT best = elem(base);
    int bi = 0;
    bool none = SKIP(best);                    // no non-NaN value seen yet
    for (int a = 1; a < AXIS; ++a) {
        XT v = elem(base + a * INNER);
        if (SKIP(v)) continue;
        if (none || BETTER(v, best)) {
            best = v;
            bi = a;
            none = false;
        }
    }
    put(gid, bi);
}
#endif
