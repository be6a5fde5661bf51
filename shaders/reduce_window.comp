// REDUCE_WINDOW / STABLEHLO_REDUCE_WINDOW (LiteRT's stablehlo_reduce_window.cc): output element e
// folds init_v[0] and its window's elements in row-major window order.  A window position maps to
// the base-dilated, padded input: outside it, or on a dilation hole, it reads the init value.
// OP: 1 add, 2 mul, 3 min (a <= b ? a : b), 4 max (a >= b ? a : b), 5 all, 6 any (1 or 0).
// FLOATS: float32 (else int32: sums and products wrap).
// CHUNKED (compiler/ops/step_chunks.py, a long window): the dispatch folds window positions steps = [first,
// count], starting from the output the dispatch before wrote (out_ read-write): the same order.
// Defines: R OP FLOATS WSIZE; arrays OSTR WST STRIDE WDIL LO BASE DIL ISTR (R values each); switch CHUNKED
#ifndef CHUNKED
#define CHUNKED 0
#endif
#if FLOATS
#define T float
#else
#define T int
#endif

T combine(T a, T b) {
#if OP == 1
    return a + b;
#elif OP == 2
    return a * b;
#elif OP == 3
    return a <= b ? a : b;
#elif OP == 4
    return a >= b ? a : b;
#elif OP == 5
    return (a != T(0) && b != T(0)) ? T(1) : T(0);
#else
    return (a != T(0) || b != T(0)) ? T(1) : T(0);
#endif
}

void main() {
    uint gid = gpuc_gid();
    if (gid >= TOTAL) return;
    T init = T(init_v[0]);
#if CHUNKED
    int first = steps[0], last = steps[0] + steps[1];
    T acc = first > 0 ? T(out_[gid]) : init;
#else
    int first = 0, last = WSIZE;
    T acc = init;
#endif
    for (int w = first; w < last; ++w) {
        int rem = int(gid), wr = w, off = 0;
        bool inside = true;
        for (int k = 0; k < R; ++k) {
            int o = rem / OSTR[k];
            rem -= o * OSTR[k];
            int wk = wr / WST[k];
            wr -= wk * WST[k];
            int q = o * STRIDE[k] + wk * WDIL[k] - LO[k];
            if (q < 0 || q >= DIL[k] || q % BASE[k] != 0) inside = false;
            else off += (q / BASE[k]) * ISTR[k];
        }
        acc = combine(acc, inside ? T(x[off]) : init);
    }
    out_[gid] = acc;
}
