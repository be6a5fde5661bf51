// @storage16
// Strided N-d copy of a region: out[DST_OFFSET + c.DST_STRIDES] = act(x[SRC_OFFSET + c.SRC_STRIDES])
// for every coordinate c in SHAPE.  Serves RESHAPE, CONCATENATION (one dispatch per input),
// and any transpose/slice that is an affine index map.  Defines: RANK SHAPE[] SRC_STRIDES[]
// DST_STRIDES[] SRC_OFFSET DST_OFFSET CONTIGUOUS ACT
void main() {
    uint gid = gpuc_gid();
    if (gid >= TOTAL) return;
#if CONTIGUOUS
    int si = SRC_OFFSET + int(gid), di = DST_OFFSET + int(gid);
#else
    int t = int(gid), si = SRC_OFFSET, di = DST_OFFSET;
    for (int d = RANK - 1; d >= 0; --d) {
        int c = t % SHAPE[d];
        t /= SHAPE[d];
        si += c * SRC_STRIDES[d];
        di += c * DST_STRIDES[d];
    }
#endif
#if ACT || FQ
    ST(out_, di, gpuc_act(LD(x, si)));
#else
    ST(out_, di, LD(x, si));
#endif
}
