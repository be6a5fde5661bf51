// TOPK_V2 along the last axis (ROWS rows of N), LiteRT's order: value descending, equal values by the
// lower index (topk_v2.cc compare_fun; -0.0 equals 0.0).  Outputs are [ROWS, KCAP], each row's first k
// (k = kk[0], clamped to [0, KCAP]; KCAP = k for a constant k) written, the rest of a row 0.
// MODE 0: invocation e = (row, i) counts the row's elements before it in that order (its rank) and,
//   when rank < k, writes its index (and, for 4- and 8-byte kinds, its value) at (row, rank).
// MODE 1 (1-byte kinds): invocation w writes output word w of the values (4 elements) from the indices.
// Long rows (ops/topk.py blocks): MODE 2 sorts each block of S elements (NB blocks a row, the last may be
//   shorter): invocation (row, i) counts the elements of its block before it and writes i at that position of
//   the block in ord ([ROWS, N] indices). MODE 3 ranks invocation (row, i) in the whole row by a binary search
//   of every sorted block for the number of its elements before it (O(S + NB log S) work an element, against
//   MODE 0's O(N)) and writes like MODE 0.
// KIND: 0 float32, 1 int32, 2 uint8, 3 int8, 4 int64 (read and written as (low, high) word pairs).
// x is the input (a word view for KIND 2 / 3 / 4), vals the values output (int32 pairs for KIND 4,
// words for KIND 2 / 3), idx the indices.
// Defines: MODE ROWS N KCAP KIND (MODE 2 / 3: S NB)
#if KIND == 4
#define T ivec2
#elif KIND == 0
#define T float
#else
#define T int
#endif

T elem(uint r, uint i) {
    uint e = r * uint(N) + i;
#if KIND == 0
    return x[e];
#elif KIND == 1
    return int(x[e]);
#elif KIND == 2
    return int((uint(x[e >> 2]) >> (8u * (e & 3u))) & 0xFFu);
#elif KIND == 3
    return bitfieldExtract(int(uint(x[e >> 2])), int(8u * (e & 3u)), 8);
#else
    return ivec2(int(x[2u * e]), int(x[2u * e + 1u]));      // (low, high)
#endif
}

#if KIND == 4
bool greater(T a, T b) { return a.y > b.y || (a.y == b.y && uint(a.x) > uint(b.x)); }
bool same(T a, T b) { return a == b; }
#else
bool greater(T a, T b) { return a > b; }
bool same(T a, T b) { return a == b; }
#endif

#if MODE != 2
int k_run() { return clamp(kk[0], 0, KCAP); }
#endif

// element (u, j) of a row comes before (v, i) in LiteRT's order
bool before(T u, uint j, T v, uint i) { return greater(u, v) || (j < i && same(u, v)); }

#if MODE == 2
void main() {
    uint e = gpuc_gid();
    if (e >= TOTAL) return;
    uint r = e / uint(N), i = e % uint(N);
    uint b0 = i / uint(S) * uint(S), b1 = min(b0 + uint(S), uint(N));
    T v = elem(r, i);
    uint rank = 0u;
    for (uint j = b0; j < b1; ++j)
        if (before(elem(r, j), j, v, i)) rank++;
    ord[r * uint(N) + b0 + min(rank, b1 - b0 - 1u)] = int(i);
}
#elif MODE == 0 || MODE == 3
void main() {
    uint e = gpuc_gid();
    if (e >= TOTAL) return;
    uint r = e / uint(N), i = e % uint(N);
    T v = elem(r, i);
    uint rank = 0u;
#if MODE == 0
    for (uint j = 0u; j < uint(N); ++j)
        if (before(elem(r, j), j, v, i)) rank++;
#else
    for (uint b = 0u; b < uint(NB); ++b) {      // the count of block b's elements before (v, i): a prefix of its order
        uint b0 = r * uint(N) + b * uint(S), lo = 0u, hi = min(uint(S), uint(N) - b * uint(S));
        while (lo < hi) {
            uint mid = (lo + hi) >> 1, j = min(uint(ord[b0 + mid]), uint(N) - 1u);
            if (before(elem(r, j), j, v, i)) lo = mid + 1u;
            else hi = mid;
        }
        rank += lo;
    }
#endif
    int k = k_run();
    if (rank < uint(k)) {
        uint o = r * uint(KCAP) + rank;
        idx[o] = int(i);
#if KIND == 4
        vals[2u * o] = v.x;
        vals[2u * o + 1u] = v.y;
#elif KIND == 0 || KIND == 1
        vals[o] = v;
#endif
    }
    if (i < uint(KCAP) && i >= uint(k)) {         // a run-time k below KCAP: the rest of the row is 0
        uint o = r * uint(KCAP) + i;
        idx[o] = 0;
#if KIND == 4
        vals[2u * o] = 0;
        vals[2u * o + 1u] = 0;
#elif KIND == 0 || KIND == 1
        vals[o] = T(0);
#endif
    }
}
#else   // MODE 1
void main() {
    uint w = gpuc_gid();
    if (w >= TOTAL) return;
    int k = k_run();
    uint word = 0u;
    for (uint b = 0u; b < 4u; ++b) {
        uint f = 4u * w + b;
        if (f >= uint(ROWS * KCAP)) break;
        uint r = f / uint(KCAP), c = f % uint(KCAP);
        if (c < uint(k)) word |= (uint(elem(r, uint(idx[f]))) & 0xFFu) << (8u * b);
    }
    vals[w] = word;
}
#endif
