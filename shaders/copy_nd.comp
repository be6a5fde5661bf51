// @storage16
// Strided N-d copy of a region: out[DST_OFFSET + c.DST_STRIDES] = act(x[SRC_OFFSET + c.SRC_STRIDES])
// for every coordinate c in SHAPE.  Serves RESHAPE, CONCATENATION (one dispatch per input),
// and any transpose/slice that is an affine index map.  Defines: RANK SHAPE[] SRC_STRIDES[]
// DST_STRIDES[] SRC_OFFSET DST_OFFSET CONTIGUOUS ACT; ELEM (elem.glsl).  Packed elements (ELEM 1, 2):
// COPY_WORDS 1: the region is the run DST_OFFSET .. DST_OFFSET + N of out_ (DST_STRIDES row-major),
// one invocation per word it touches (edge words shared with other regions: lane by lane, atomically);
// COPY_WORDS 0: any region, one invocation per element, written atomically.
// VEC 1 (float; compiler/ops/elements.py copy_vector): out_ and x are vec4 views and SHAPE, the strides and
// the offsets count vec4s: 4 elements contiguous on both sides per invocation, one index walk for them.
// @include elem.glsl
#ifndef VEC
#define VEC 0
#endif

// source and destination element of region element i
void copy_index(int i, out int si, out int di) {
#if CONTIGUOUS
    si = SRC_OFFSET + i;
    di = DST_OFFSET + i;
#else
    int t = i;
    si = SRC_OFFSET;
    di = DST_OFFSET;
    for (int d = RANK - 1; d >= 0; --d) {
        int c = t % SHAPE[d];
        t /= SHAPE[d];
        si += c * SRC_STRIDES[d];
        di += c * DST_STRIDES[d];
    }
#endif
}

#if EL_PACKED
// Lane `lane` of out_[word] = v, leaving the word's other lanes as they are (atomically: other
// invocations, or other dispatches, own them).
void el_put_lane(int word, int lane, uint v) {
    uint sh = uint(EL_BITS * lane);
    atomicAnd(out_[word], ~(EL_MASK << sh));
    atomicOr(out_[word], v << sh);
}

uint el_value(int i) {
    int si, di;
    copy_index(i, si, di);
    return EL_GET(x, si);
}

void main() {
    uint gid = gpuc_gid();
    if (gid >= TOTAL) return;
#if COPY_WORDS
    int word = DST_OFFSET / EL_PER + int(gid);
    int first = word * EL_PER - DST_OFFSET;          // region element in the word's lane 0
    if (first >= 0 && first + EL_PER <= N) {
        out_[word] = el_word(first);
    } else {
        for (int j = 0; j < EL_PER; ++j)
            if (first + j >= 0 && first + j < N) el_put_lane(word, j, el_value(first + j));
    }
#else
    int si, di;
    copy_index(int(gid), si, di);
    el_put_lane(di / EL_PER, di % EL_PER, EL_GET(x, si));
#endif
}
#else
void main() {
    uint gid = gpuc_gid();
    if (gid >= TOTAL) return;
    int si, di;
    copy_index(int(gid), si, di);
#if VEC && (ACT || FQ)
    vec4 v = vec4(LD(x, si));
    ST(out_, di, vec4(gpuc_act(v.x), gpuc_act(v.y), gpuc_act(v.z), gpuc_act(v.w)));
#elif ACT || FQ
    ST(out_, di, gpuc_act(LD(x, si)));
#else
    ST(out_, di, LD(x, si));
#endif
}
#endif
