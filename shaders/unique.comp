// UNIQUE (LiteRT's unique.cc): y = the distinct values of the 1-D input x in first-occurrence order,
// idx[i] = the position in y of x[i].  One workgroup:
//   1. scr[i] = the first j with x[j] == x[i] (std::map's equivalence: -0 == 0);
//   2. a prefix count over the first occurrences numbers them: scr[i] = -(u + 1) for the u-th first
//      occurrence, scr[N + u] = i;
//   3. idx[i] = the number of x[i]'s first occurrence; y's words from scr[N + u] (zero past the count).
// FLOATS: a NaN (which LiteRT's std::map places inconsistently) sets every idx to -1 (the runtime
// fails the run on it).  ES: bytes per element (1, 2: word view; 4; 8: word view, 2 words each).
// MODE 0: all of that.  Long inputs (ops/unique.py BLOCKS_FROM) find step 1's first occurrences in two dispatches
// of N invocations first: MODE 1 sorts each block of S elements by (value, index) into ord (any total order
// of the values that groups equal ones: raw bits for integers), MODE 2 takes the least index of x[i]'s value
// in each sorted block by a binary search (NB blocks: O(S + NB log S) work an element, against O(N)); MODE 3
// is then the workgroup's steps 2-3 on those (and the NaN check).
// Defines: N WG ES FLOATS MODE (MODE 1 / 2: S NB)
#ifndef MODE
#define MODE 0
#endif
#if MODE == 0 || MODE == 3
shared uint cnt[WG];
shared uint bad;
#endif

#if ES == 1
uint raw(int e) { return (uint(x[e >> 2]) >> (8 * (e & 3))) & 0xFFu; }
#elif ES == 2
uint raw(int e) { return (uint(x[e >> 1]) >> (16 * (e & 1))) & 0xFFFFu; }
#elif ES == 4 && !FLOATS
uint raw(int e) { return uint(x[e]); }
#endif

bool eq(int a, int b) {
#if FLOATS
    return x[a] == x[b];
#elif ES == 8
    return x[2 * a] == x[2 * b] && x[2 * a + 1] == x[2 * b + 1];
#else
    return raw(a) == raw(b);
#endif
}

#if MODE == 1 || MODE == 2
// x[a] < x[b] in an order that groups equal values (std::map's: -0 == 0)
bool less(int a, int b) {
#if FLOATS
    return x[a] < x[b];
#elif ES == 8
    uint ah = uint(x[2 * a + 1]), bh = uint(x[2 * b + 1]);
    return ah < bh || (ah == bh && uint(x[2 * a]) < uint(x[2 * b]));
#else
    return raw(a) < raw(b);
#endif
}
#endif

#if MODE == 1
void main() {
    uint e = gpuc_gid();
    if (e >= TOTAL) return;
    int i = int(e), b0 = i / S * S, b1 = min(b0 + S, N), rank = 0;
    for (int j = b0; j < b1; ++j)
        if (less(j, i) || (j < i && eq(j, i))) rank++;
    ord[b0 + min(rank, b1 - b0 - 1)] = i;
}
#elif MODE == 2
void main() {
    uint e = gpuc_gid();
    if (e >= TOTAL) return;
    int i = int(e), f = i;
    for (int b = 0; b < NB; ++b) {      // block b's first element not below x[i]: its least index of x[i]'s value
        int b0 = b * S, lo = 0, hi = min(S, N - b0);
        while (lo < hi) {
            int mid = (lo + hi) >> 1;
            if (less(clamp(ord[b0 + mid], 0, N - 1), i)) lo = mid + 1;
            else hi = mid;
        }
        if (lo < min(S, N - b0)) {
            int j = clamp(ord[b0 + lo], 0, N - 1);
            if (eq(j, i)) f = min(f, j);
        }
    }
    scr[i] = f;
}
#else
void main() {
    uint t = gl_LocalInvocationID.x;
    if (t == 0u) bad = 0u;
    barrier();
    for (int i = int(t); i < N; i += WG) {
#if MODE == 0
        int f = i;
        for (int j = 0; j < i; ++j) {
            if (eq(j, i)) { f = j; break; }
        }
        scr[i] = f;
#endif
#if FLOATS
        if (isnan(x[i])) bad = 1u;
#endif
    }
    memoryBarrierBuffer();
    barrier();
    int chunk = (N + WG - 1) / WG;
    int lo = min(int(t) * chunk, N), hi = min(lo + chunk, N);
    uint c = 0u;
    for (int i = lo; i < hi; ++i) {
        if (scr[i] == i) c++;
    }
    cnt[t] = c;
    barrier();
    for (uint off = 1u; off < uint(WG); off <<= 1) {
        uint v = t >= off ? cnt[t - off] : 0u;
        barrier();
        cnt[t] += v;
        barrier();
    }
    int u = int(cnt[t] - c);
    int total = int(cnt[WG - 1]);
    for (int i = lo; i < hi; ++i) {
        if (scr[i] == i) {
            scr[N + u] = i;
            scr[i] = -(u + 1);
            u++;
        }
    }
    memoryBarrierBuffer();
    barrier();
    for (int i = int(t); i < N; i += WG) {
        int s = scr[i];
        int k = s < 0 ? -s - 1 : -scr[s] - 1;
        if (bad != 0u) k = -1;
#if OUT64
        ST(idx, 2 * i, k);
        ST(idx, 2 * i + 1, k < 0 ? -1 : 0);
#else
        ST(idx, i, k);
#endif
    }
#if ES == 8
    for (int w = int(t); w < 2 * N; w += WG) {
        int v = w >> 1;
        ST(out_, w, v < total ? uint(x[2 * scr[N + v] + (w & 1)]) : 0u);
    }
#elif ES == 4
    for (int w = int(t); w < N; w += WG) {
        if (w < total) out_[w] = x[scr[N + w]];
        else ST(out_, w, 0);
    }
#else
    const int per = 4 / ES;
    for (int w = int(t); w < (N + per - 1) / per; w += WG) {
        uint word = 0u;
        for (int k = 0; k < per; ++k) {
            int v = w * per + k;
            if (v < total) word |= raw(scr[N + v]) << (8 * ES * k);
        }
        ST(out_, w, word);
    }
#endif
}
#endif
