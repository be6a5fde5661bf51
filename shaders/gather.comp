// GATHER / EMBEDDING_LOOKUP (ND 0) and GATHER_ND (ND 1) with indices read at run time (constant
// indices are bound the same way, checked at compile time).  An index outside [0, dim) (LiteRT fails
// the Invoke) reads nothing and yields 0; with CHECK the kernel reports it into the status words
// (compiler/status.py), so the run fails naming the op.
// ND 0: out[(bo * COORD + i) * INNER + j] = x[(bo * AXIS + idx[(bo / OUTER) * COORD + i]) * INNER + j]
// ND 1: out[n * INNER + j] = x[sum_k idx[n * K + k] * X_STRIDES[k] + j], 0 <= idx[..k] < X_DIMS[k]
// IDX64: the indices are int64, bound as (low, high) int pairs.
// Defines: INNER COORD OUTER AXIS (ND 0) [Q8 ROW_WORDS: binding xs] | K X_DIMS[] X_STRIDES[] (ND 1); ND IDX64; ELEM N (elem.glsl);
// CHECK CHECK_WORD STATUS_ROW ITEMS ITEM_OUT (compiler/status.py; binding `status`, read-write)
// @include elem.glsl
#ifndef CHECK
#define CHECK 0
#endif
#ifndef Q8
#define Q8 0
#endif
#if CHECK
// output element e met the bad index (lo, hi) at index component pos: count it in the row of e's batch
// item; the first to count writes the value and position
void gpuc_report(int e, int lo, int hi, int pos) {
    int row = ITEM_OUT > 0 ? min(e / max(ITEM_OUT, 1), ITEMS - 1) : 0;
    uint w = uint(row * STATUS_ROW + CHECK_WORD);
    if (atomicAdd(status[w], 1u) == 0u) {
        status[w + 1u] = uint(lo);
        status[w + 2u] = uint(hi);
        status[w + 3u] = uint(pos);
    }
}
#endif

// index k of the indices if it lies in [0, bound), else -1 (reported with CHECK: output element e,
// index component pos)
int gpuc_index(int k, int bound, int e, int pos) {
#if IDX64
    int lo = idx[2 * k], hi = idx[2 * k + 1];
    bool ok = hi == 0 && lo >= 0 && lo < bound;
#else
    int lo = idx[k], hi = lo < 0 ? -1 : 0;
    bool ok = lo >= 0 && lo < bound;
#endif
#if CHECK
    if (!ok) gpuc_report(e, lo, hi, pos);
#endif
    return ok ? lo : -1;
}

// the source element of output element e, or -1 (an index out of range)
int gather_src(int e) {
    int j = e % INNER, t = e / INNER;
#if ND
    int src = j;
    bool ok = true;
    for (int k = 0; k < K; ++k) {
        int c = gpuc_index(t * K + k, X_DIMS[k], e, k);
        ok = ok && c >= 0;
        src += c * X_STRIDES[k];
    }
#else
    int i = t % COORD, bo = t / COORD;
    int c = gpuc_index((bo / OUTER) * COORD + i, AXIS, e, 0);
    bool ok = c >= 0;
    int src = (bo * AXIS + c) * INNER + j;
#endif
    return ok ? src : -1;
}

#if Q8
// Q8: x is an int8 table of rows packed in ROW_WORDS words each (ops/gemm_q8.py packed_rows), xs its per-row
// float scales; output element e is float(q) * xs[row], the float product of LiteRT's hybrid kernel
float q8_value(int e) {
    int src = gather_src(e);
    if (src < 0) return 0.0;
    int j = src % INNER, row = src / INNER;
    int b = row * ROW_WORDS * 4 + j;
    int q = int(uint(x[b >> 2]) << (24 - 8 * (b & 3))) >> 24;      // (sign-extended byte)
    return float(q) * xs[row];
}
#endif

#if EL_PACKED
uint el_value(int e) {
    int src = gather_src(e);
    return src >= 0 ? EL_GET(x, src) : 0u;
}
#endif

void main() {
    uint gid = gpuc_gid();
    if (gid >= TOTAL) return;
#if Q8
    out_[gid] = q8_value(int(gid));
#elif EL_PACKED
    out_[gid] = el_word(int(gid) * EL_PER);
#else
    int src = gather_src(int(gid));
    out_[gid] = src >= 0 ? x[max(src, 0)] : 0;     // never read out of bounds
#endif
}
