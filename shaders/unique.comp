// UNIQUE (LiteRT's unique.cc): y = the distinct values of the 1-D input x in first-occurrence order,
// idx[i] = the position in y of x[i].  One workgroup:
//   1. scr[i] = the first j with x[j] == x[i] (std::map's equivalence: -0 == 0);
//   2. a prefix count over the first occurrences numbers them: scr[i] = -(u + 1) for the u-th first
//      occurrence, scr[N + u] = i;
//   3. idx[i] = the number of x[i]'s first occurrence; y's words from scr[N + u] (zero past the count).
// FLOATS: a NaN (which LiteRT's std::map places inconsistently) sets every idx to -1 (the runtime
// fails the run on it).  ES: bytes per element (1, 2: word view; 4; 8: word view, 2 words each).
// Defines: N WG ES FLOATS
shared uint cnt[WG];
shared uint bad;

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

void main() {
    uint t = gl_LocalInvocationID.x;
    if (t == 0u) bad = 0u;
    barrier();
    for (int i = int(t); i < N; i += WG) {
        int f = i;
        for (int j = 0; j < i; ++j) {
            if (eq(j, i)) { f = j; break; }
        }
#if FLOATS
        if (isnan(x[i])) bad = 1u;
#endif
        scr[i] = f;
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
