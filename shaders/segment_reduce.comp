// SEGMENT_SUM and UNSORTED_SEGMENT_SUM / MAX / MIN / PROD, in LiteRT's order: output element
// e = (segment s, inner j) starts at the op's identity and folds in data[i * INNER + j] for every
// i in 0..NIDS-1 with ids[i] == s, in increasing i (the order of LiteRT's sequential loop, so float
// sums and products round as LiteRT's do).  Ids outside [0, NSEG) contribute nothing.
// OP: 0 sum, 1 max (std::max(acc, x): acc < x ? x : acc; identity lowest), 2 min (x < acc ? x : acc;
// identity highest), 3 prod (identity 1).  FLOATS: float32 data (else int32; int sums and products wrap).
// SEGMENT_SUM (SORTED) finds its segment's run of ids by a binary search instead.
// CHECK (invocation 0 scans the ids): SORTED 0: an id >= NSEG fails the run (LiteRT: max id <
// num_segments; negative ids are skipped); SORTED 1 (SEGMENT_SUM): ids[0] != 0 or a step other than
// 0 / +1 fails the run (LiteRT's segment_sum.cc checks).
// CHUNKED (compiler/ops/step_chunks.py, many ids): the dispatch folds (and checks) ids steps = [first, count],
// starting from the output the dispatch before wrote (out_ read-write): the same fold in the same order.
// Defines: NSEG NIDS INNER OP FLOATS SORTED; CHECK CHECK_WORD STATUS_ROW ITEMS ITEM_OUT (compiler/status.py);
// switch CHUNKED
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
#define LAST NIDS
#endif
#if FLOATS
#define T float
#define LOWEST (-3.4028234663852886e38)
#define HIGHEST 3.4028234663852886e38
#else
#define T int
#define LOWEST (-2147483647 - 1)
#define HIGHEST 2147483647
#endif

#if CHECK
void gpuc_report(int lo, int pos) {
    uint w = uint(CHECK_WORD);
    if (atomicAdd(status[w], 1u) == 0u) {
        status[w + 1u] = uint(lo);
        status[w + 2u] = uint(lo < 0 ? -1 : 0);
        status[w + 3u] = uint(pos);
    }
}

void scan_ids() {
#if SORTED
    if (FIRST == 0 && NIDS > 0 && ids[0] != 0) { gpuc_report(ids[0], 0); return; }
    for (int i = max(FIRST, 1); i < LAST; ++i) {
        int d = ids[i] - ids[i - 1];
        if (d != 0 && d != 1) { gpuc_report(ids[i], 0); return; }
    }
#else
    for (int i = FIRST; i < LAST; ++i)
        if (ids[i] >= NSEG) { gpuc_report(ids[i], 0); return; }
#endif
}
#endif

void main() {
    uint gid = gpuc_gid();
#if CHECK
    if (gid == 0u) scan_ids();
#endif
    if (gid >= TOTAL) return;
    int s = int(gid) / INNER, j = int(gid) % INNER;
#if OP == 1
    T acc = T(LOWEST);
#elif OP == 2
    T acc = T(HIGHEST);
#elif OP == 3
    T acc = T(1);
#else
    T acc = T(0);
#endif
#if CHUNKED
    if (FIRST > 0) acc = out_[gid];
#endif
#if SORTED
    // sorted ids (a run with others fails on the check): segment s is a run, found by a binary search
    int i = FIRST, hi = LAST;
    while (i < hi) {
        int mid = (i + hi) >> 1;
        if (ids[mid] < s) i = mid + 1;
        else hi = mid;
    }
    for (; i < LAST && ids[i] == s; ++i) {
#else
    for (int i = FIRST; i < LAST; ++i) {
        if (ids[i] != s) continue;
#endif
        T x = data[i * INNER + j];
#if OP == 1
        acc = acc < x ? x : acc;
#elif OP == 2
        acc = x < acc ? x : acc;
#elif OP == 3
        precise T p = acc * x;
        acc = p;
#else
        precise T p = acc + x;
        acc = p;
#endif
    }
    out_[gid] = acc;
}
