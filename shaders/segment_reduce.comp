// SEGMENT_SUM and UNSORTED_SEGMENT_SUM / MAX / MIN / PROD, in LiteRT's order: output element
// e = (segment s, inner j) starts at the op's identity and folds in data[i * INNER + j] for every
// i in 0..NIDS-1 with ids[i] == s, in increasing i (the order of LiteRT's sequential loop, so float
// sums and products round as LiteRT's do).  Ids outside [0, NSEG) contribute nothing.
// OP: 0 sum, 1 max (std::max(acc, x): acc < x ? x : acc; identity lowest), 2 min (x < acc ? x : acc;
// identity highest), 3 prod (identity 1).  FLOATS: float32 data (else int32; int sums and products wrap).
// CHECK (invocation 0 scans the ids): SORTED 0: an id >= NSEG fails the run (LiteRT: max id <
// num_segments; negative ids are skipped); SORTED 1 (SEGMENT_SUM): ids[0] != 0 or a step other than
// 0 / +1 fails the run (LiteRT's segment_sum.cc checks).
// Defines: NSEG NIDS INNER OP FLOATS SORTED; CHECK CHECK_WORD STATUS_ROW ITEMS ITEM_OUT (compiler/status.py)
#ifndef CHECK
#define CHECK 0
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
    if (NIDS > 0 && ids[0] != 0) { gpuc_report(ids[0], 0); return; }
    for (int i = 1; i < NIDS; ++i) {
        int d = ids[i] - ids[i - 1];
        if (d != 0 && d != 1) { gpuc_report(ids[i], 0); return; }
    }
#else
    for (int i = 0; i < NIDS; ++i)
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
    for (int i = 0; i < NIDS; ++i) {
        if (ids[i] != s) continue;
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
