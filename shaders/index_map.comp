// @storage16
// Data movement where output element e copies one element of x, one of d, or the padding value
// (compiler/ops/index_map.py), by MODE:
//   0 REVERSE_SEQUENCE: the SEQ_N positions along the sequence axis (stride SEQ_STRIDE) below the
//     batch's length lens[b] (b: the coordinate along the batch axis, BATCH_N / BATCH_STRIDE) reversed
//     (a length past SEQ_N is reported with CHECK, as LiteRT fails on it, and copies); others copied
//   1 MATRIX_DIAG: out [..., MN, MN] from x [..., MN]: the diagonal from x, 0 elsewhere
//   2 MATRIX_SET_DIAG: out [..., MR, MC]: the diagonal from d [..., min(MR, MC)], x elsewhere
//   3 DILATE: out dims OUT_SHAPE; coordinate c takes x at c / DIL (IN_STRIDES) where every c % DIL is
//     0, else the padding value pv[0]
// ELEM: 4 one typed element per invocation (LD/ST); 8 int64 as (low, high) word pairs, one word per
// invocation; 1 / 2 packed words (elem.glsl), one word per invocation.  N: output elements.
// IDX64: lens is int64, bound as (low, high) word pairs.
// @include elem.glsl
#ifndef IDX64
#define IDX64 0
#endif
#ifndef CHECK
#define CHECK 0
#endif
#ifndef HAS_PV
#define HAS_PV 0
#endif

#if CHECK
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

// the source of output element e: its index in x (from 0), in d (from 1), or the padding (from 2)
int src_of(int e, out int from) {
    from = 0;
#if MODE == 0
    int s = (e / SEQ_STRIDE) % SEQ_N, b = (e / BATCH_STRIDE) % BATCH_N;
#if IDX64
    int lo = int(lens[2 * b]), hi = int(lens[2 * b + 1]);
    int len = hi < 0 ? -1 : (hi > 0 || lo < 0) ? SEQ_N + 1 : lo;
#else
    int lo = int(lens[b]), hi = lo < 0 ? -1 : 0;
    int len = lo;
#endif
    if (len > SEQ_N) {
#if CHECK
        gpuc_report(e, lo, hi, 0);
#endif
        len = 0;
    }
    return s < len ? e + (len - 1 - 2 * s) * SEQ_STRIDE : e;
#elif MODE == 1
    int j = e % MN, t = e / MN;
    int i = t % MN;
    from = i == j ? 0 : 2;
    return (t / MN) * MN + i;
#elif MODE == 2
    int j = e % MC, t = e / MC;
    int i = t % MR;
    if (i != j) return e;
    from = 1;
    return (t / MR) * min(MR, MC) + i;
#else
    int t = e, src = 0;
    for (int k = RANK - 1; k >= 0; --k) {
        int c = t % OUT_SHAPE[k];
        t /= OUT_SHAPE[k];
        if (c % DIL[k] != 0) from = 2;
        src += (c / DIL[k]) * IN_STRIDES[k];
    }
    return src;
#endif
}

#if EL_PACKED
uint el_value(int e) {
    int from;
    int src = src_of(e, from);
#if MODE == 2
    if (from == 1) return EL_GET(d, src);
#endif
#if HAS_PV
    if (from == 2) return EL_GET(pv, 0);
#endif
    return from == 0 ? EL_GET(x, src) : 0u;
}
#endif

void main() {
    uint gid = gpuc_gid();
    if (gid >= TOTAL) return;
#if EL_PACKED
    out_[gid] = el_word(int(gid) * EL_PER);
#elif ELEM == 8
    int from, w = int(gid & 1u);
    int src = src_of(int(gid >> 1u), from);
    uint v = 0u;
    if (from == 0) v = x[2 * src + w];
#if MODE == 2
    if (from == 1) v = d[2 * src + w];
#endif
#if HAS_PV
    if (from == 2) v = pv[w];
#endif
    out_[gid] = v;
#else
    int from;
    int src = src_of(int(gid), from);
    out__A v = out__A(0);
    if (from == 0) v = LD(x, src);
#if MODE == 2
    if (from == 1) v = LD(d, src);
#endif
#if HAS_PV
    if (from == 2) v = LD(pv, 0);
#endif
    ST(out_, gid, v);
#endif
}
