// @storage16
// DYNAMIC_UPDATE_SLICE: out_[(start + c) . OUT_STRIDES] = upd[c] for every coordinate c of the update
// (UPD_SHAPE, row-major: invocation i moves update element i).  The start of dim d is start[d] clamped
// to [0, MAX_START[d]] (MAX_START = operand dim - update dim), as LiteRT clamps it.  The rest of out_
// is the operand: the same bytes (in place: a KV cache) or a copy the compiler dispatches first.
// Defines: RANK UPD_SHAPE[] OUT_STRIDES[] MAX_START[] NSTART (dims that have a start; 8-byte elements
// move as (low, high) word pairs through a last dim of 2 that has none) IDX64 (start is int64, bound
// as (low, high) int32 pairs); UPD_ROW UPD_W UPD_BEGIN (ops/kv_write.py: update element f read at
// upd[(f / UPD_ROW) * UPD_W + UPD_BEGIN + f % UPD_ROW], a last-axis slice of a wider tensor; default: upd[f])
#ifndef UPD_ROW
#define UPD_ROW 1
#define UPD_W 1
#define UPD_BEGIN 0
#endif

int start_of(int d) {
    if (d >= NSTART) return 0;
#if IDX64
    int lo = start[2 * d];
    int hi = start[2 * d + 1];
    int s = hi < 0 ? 0 : (hi > 0 || lo < 0) ? MAX_START[d] : lo;
#else
    int s = start[d];
#endif
    return clamp(s, 0, MAX_START[d]);
}

void main() {
    uint gid = gpuc_gid();
    if (gid >= TOTAL) return;
    int t = int(gid);
    int di = 0;
    for (int d = RANK - 1; d >= 0; --d) {
        int c = t % UPD_SHAPE[d];
        t /= UPD_SHAPE[d];
        di += (c + start_of(d)) * OUT_STRIDES[d];
    }
    int f = int(gid);
    ST(out_, di, LD(upd, (f / UPD_ROW) * UPD_W + UPD_BEGIN + f % UPD_ROW));
}
