// GATHER / EMBEDDING_LOOKUP (ND 0) and GATHER_ND (ND 1) with indices read at run time (constant
// indices are bound the same way).  An out-of-range index (LiteRT fails the Invoke) yields 0.
// ND 0: out[(bo * COORD + i) * INNER + j] = x[(bo * AXIS + idx[(bo / OUTER) * COORD + i]) * INNER + j]
// ND 1: out[n * INNER + j] = x[sum_k idx[n * K + k] * X_STRIDES[k] + j], 0 <= idx[..k] < X_DIMS[k]
// IDX64: the indices are int64, bound as (low, high) int pairs.
// Defines: INNER COORD OUTER AXIS (ND 0) | K X_DIMS[] X_STRIDES[] (ND 1); ND IDX64; ELEM N (elem.glsl)
// @include elem.glsl
int gpuc_index(int k, int bound) {
#if IDX64
    int lo = idx[2 * k], hi = idx[2 * k + 1];
    return (hi == 0 && lo >= 0 && lo < bound) ? lo : -1;
#else
    int v = idx[k];
    return (v >= 0 && v < bound) ? v : -1;
#endif
}

// the source element of output element e, or -1 (an index out of range)
int gather_src(int e) {
    int j = e % INNER, t = e / INNER;
#if ND
    int src = j;
    bool ok = true;
    for (int k = 0; k < K; ++k) {
        int c = gpuc_index(t * K + k, X_DIMS[k]);
        ok = ok && c >= 0;
        src += c * X_STRIDES[k];
    }
#else
    int i = t % COORD, bo = t / COORD;
    int c = gpuc_index((bo / OUTER) * COORD + i, AXIS);
    bool ok = c >= 0;
    int src = (bo * AXIS + c) * INNER + j;
#endif
    return ok ? src : -1;
}

#if EL_PACKED
uint el_value(int e) {
    int src = gather_src(e);
    return src >= 0 ? EL_GET(x, src) : 0u;
}
#endif

void main() {
    uint gid = gpuc_gid();
    if (gid >= TOTAL) return;
#if EL_PACKED
    out_[gid] = el_word(int(gid) * EL_PER);
#else
    int src = gather_src(int(gid));
    out_[gid] = src >= 0 ? x[max(src, 0)] : 0;     // never read out of bounds
#endif
}
