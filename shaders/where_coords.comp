// WHERE with one input (LiteRT's where.cc): the coordinates of the nonzero elements in row-major
// order, an int64 [N, R] output written as (low, high) words through a word view; rows past the count
// hold -1 (the "rows" output length rule, runtime/output_sizes.py, trims them per run).
// One workgroup: invocation t counts the nonzero elements of its contiguous chunk, a shared prefix sum
// gives its first row, then it writes its rows in order.
// KIND 0: float32 (x != 0: NaN counts, -0 does not); 1: a 4-byte integer; 2: a 1-byte kind (bool /
// int8 / uint8, word view); 3: int64 (word view, 2 words per element).
// Defines: N R WG KIND STR (row-major strides of the input, R values)
shared uint cnt[WG];

bool nz(int e) {
#if KIND == 0
    return x[e] != 0.0;
#elif KIND == 1
    return uint(x[e]) != 0u;
#elif KIND == 2
    return ((uint(x[e >> 2]) >> (8 * (e & 3))) & 0xFFu) != 0u;
#else
    return (uint(x[2 * e]) | uint(x[2 * e + 1])) != 0u;
#endif
}

void main() {
    uint t = gl_LocalInvocationID.x;
    int chunk = (N + WG - 1) / WG;
    int lo = min(int(t) * chunk, N), hi = min(lo + chunk, N);
    uint c = 0u;
    for (int e = lo; e < hi; ++e) {
        if (nz(e)) c++;
    }
    cnt[t] = c;
    barrier();
    for (uint off = 1u; off < uint(WG); off <<= 1) {
        uint v = t >= off ? cnt[t - off] : 0u;
        barrier();
        cnt[t] += v;
        barrier();
    }
    uint row = cnt[t] - c;
    uint total = cnt[WG - 1];
    for (int e = lo; e < hi; ++e) {
        if (!nz(e)) continue;
        int rem = e;
        for (int k = 0; k < R; ++k) {
            int q = rem / STR[k];
            rem -= q * STR[k];
            out_[2u * (row * uint(R) + uint(k))] = uint(q);
            out_[2u * (row * uint(R) + uint(k)) + 1u] = 0u;
        }
        row++;
    }
    for (uint r = total + t; r < uint(N); r += uint(WG)) {
        for (int k = 0; k < R; ++k) {
            out_[2u * (r * uint(R) + uint(k))] = 0xFFFFFFFFu;
            out_[2u * (r * uint(R) + uint(k)) + 1u] = 0xFFFFFFFFu;
        }
    }
}
