// STABLEHLO_SCATTER (LiteRT's stablehlo_scatter.cc): the output starts as the operand; each update
// element u, in row-major order, targets the operand index full_start + full_window (start vector from
// the indices at u's scatter dims, scattered by SMAP; u's window dims at the operand's non-inserted
// dims) and combines into it: OP 0 replace, 1 add, 2 mul, 3 std::max, 4 std::min.  A target with a
// component outside its dim is skipped, as LiteRT 2.3 skips it (measured, negative ones included).
// Output element e replays every update in order, so repeated targets combine in LiteRT's order.
// CHUNKED (compiler/ops/step_chunks.py, many updates): the dispatch replays updates steps = [first, count],
// starting from the output the dispatch before wrote (out_ read-write): the same order.
// Defines: OR_ UR NIV NU OP FLOATS IDX64; arrays OPSHAPE OPSTR USHAPE ISWIN WOPDIM ISTR UBPOS SMAP; IVD;
// switch CHUNKED
#ifndef CHUNKED
#define CHUNKED 0
#endif
#if FLOATS
#define T float
#else
#define T int
#endif

int start_value(int off) {
#if IDX64
    int lo = int(idx[2 * off]), hi = int(idx[2 * off + 1]);
    if (hi > 0 || (hi == 0 && lo < 0)) return 2147483647;
    if (hi < -1 || (hi == -1 && lo >= 0)) return -2147483647 - 1;
    return lo;
#else
    return int(idx[off]);
#endif
}

// the flat target of update element u, or -1 (skipped)
int target(int u) {
    int ui[UR], rem = u;
    for (int d = UR - 1; d >= 0; --d) {
        ui[d] = rem % USHAPE[d];
        rem /= USHAPE[d];
    }
    int ioff = 0, b = 0;
    for (int d = 0; d < UR; ++d) {
        if (ISWIN[d] == 0) {
            ioff += ui[d] * ISTR[UBPOS[b]];
            b++;
        }
    }
    int res[OR_];
    for (int k = 0; k < OR_; ++k) res[k] = 0;
    for (int k = 0; k < NIV; ++k) res[SMAP[k]] = start_value(ioff + k * ISTR[IVD]);
    for (int d = 0; d < UR; ++d) {
        if (ISWIN[d] == 1) res[WOPDIM[d]] += ui[d];
    }
    int fl = 0;
    for (int k = 0; k < OR_; ++k) {
        if (res[k] < 0 || res[k] >= OPSHAPE[k]) return -1;
        fl += res[k] * OPSTR[k];
    }
    return fl;
}

T combine(T a, T b) {
#if OP == 0
    return b;
#elif OP == 1
    return a + b;
#elif OP == 2
    return a * b;
#elif OP == 3
    return a < b ? b : a;
#else
    return b < a ? b : a;
#endif
}

void main() {
    uint gid = gpuc_gid();
    if (gid >= TOTAL) return;
#if CHUNKED
    int first = steps[0], last = steps[0] + steps[1];
    T acc = first > 0 ? T(out_[gid]) : T(x[gid]);
#else
    int first = 0, last = NU;
    T acc = T(x[gid]);
#endif
    for (int u = first; u < last; ++u) {
        if (target(u) == int(gid)) acc = combine(acc, T(upd[u]));
    }
    out_[gid] = acc;
}
