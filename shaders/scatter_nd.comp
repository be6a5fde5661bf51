// SCATTER_ND (MODE 0) and SPARSE_TO_DENSE (MODE 1) as LiteRT computes them, one invocation per output
// element e = (slice, j) (INNER elements per indexed slice):
//   MODE 0: out = 0 + src[n * INNER + j] (the updates) for every index row n that addresses the slice, in increasing
//     n (LiteRT's sequential loop: float sums round as LiteRT's do; duplicates accumulate);
//   MODE 1: out = dflt[0], replaced by src[n] (the values; src[0] with VSCALAR) for every index row n that
//     addresses it: the last such n wins, as LiteRT's loop overwrites.
// Index row n is idx[n * K .. n * K + K-1] (IDX64: int64 as (low, high) pairs), component k in
// [0, DIMS[k]); a row with a component out of range addresses nothing and, with CHECK, fails the run
// (invocation 0 scans every row and reports the first bad component: compiler/status.py).
// Defines: FLOATS (float32 data, else int32) MODE NIDX K DIMS[] STR[] (slice strides) INNER IDX64 VSCALAR; CHECK CHECK_WORD STATUS_ROW
// ITEMS ITEM_OUT; switch CHUNKED (compiler/ops/step_chunks.py, many index rows: the dispatch takes rows
// steps = [first, count], starting from the output the dispatch before wrote, out_ read-write: the same order)
#ifndef CHECK
#define CHECK 0
#endif
#ifndef CHUNKED
#define CHUNKED 0
#endif
#if CHUNKED
#define FIRST steps[0]
#define LAST (steps[0] + steps[1])
#else
#define FIRST 0
#define LAST NIDX
#endif
#if FLOATS
#define T float
#else
#define T int
#endif

bool comp(int n, int k, out int c, out int lo, out int hi) {
#if IDX64
    lo = idx[2 * (n * K + k)];
    hi = idx[2 * (n * K + k) + 1];
    c = lo;
    return hi == 0 && lo >= 0 && lo < DIMS[k];
#else
    lo = idx[n * K + k];
    hi = lo < 0 ? -1 : 0;
    c = lo;
    return lo >= 0 && lo < DIMS[k];
#endif
}

// the slice index row n addresses, or -1
int slice_of(int n) {
    int f = 0;
    for (int k = 0; k < K; ++k) {
        int c, lo, hi;
        if (!comp(n, k, c, lo, hi)) return -1;
        f += c * STR[k];
    }
    return f;
}

#if CHECK
void scan_indices() {
    for (int n = FIRST; n < LAST; ++n)
        for (int k = 0; k < K; ++k) {
            int c, lo, hi;
            if (!comp(n, k, c, lo, hi)) {
                uint w = uint(CHECK_WORD);
                if (atomicAdd(status[w], 1u) == 0u) {
                    status[w + 1u] = uint(lo);
                    status[w + 2u] = uint(hi);
                    status[w + 3u] = uint(k);
                }
                return;
            }
        }
}
#endif

void main() {
    uint gid = gpuc_gid();
#if CHECK
    if (gid == 0u) scan_indices();
#endif
    if (gid >= TOTAL) return;
    int s = int(gid) / INNER, j = int(gid) % INNER;
#if MODE == 0
    T acc = T(0);
#if CHUNKED
    if (FIRST > 0) acc = out_[gid];
#endif
    for (int n = FIRST; n < LAST; ++n)
        if (slice_of(n) == s) {
            precise T a = acc + src[n * INNER + j];
            acc = a;
        }
    out_[gid] = acc;
#else
    T v = dflt[0];
#if CHUNKED
    if (FIRST > 0) v = out_[gid];
#endif
    for (int n = FIRST; n < LAST; ++n)
        if (slice_of(n) == s) v = src[VSCALAR != 0 ? 0 : n];
    out_[gid] = v;
#endif
}
