// @storage16
// MIRROR_PAD: out[c] = x[m(c - PAD_LO)], m mirroring each coordinate back into [0, IN_SHAPE):
// OFFSET 1 (REFLECT, edge not repeated): -1 -> 1, n -> n - 2; OFFSET 0 (SYMMETRIC): -1 -> 0, n -> n - 1.
// Paddings are at most IN_SHAPE - OFFSET (checked at compile time, as LiteRT does).
// Defines: RANK OUT_SHAPE[] IN_SHAPE[] IN_STRIDES[] PAD_LO[] OFFSET
void main() {
    uint gid = gpuc_gid();
    if (gid >= TOTAL) return;
    int t = int(gid), si = 0;
    for (int d = RANK - 1; d >= 0; --d) {
        int c = t % OUT_SHAPE[d] - PAD_LO[d];
        t /= OUT_SHAPE[d];
        if (c < 0) c = OFFSET - 1 - c;
        else if (c >= IN_SHAPE[d]) c = 2 * IN_SHAPE[d] - 1 - OFFSET - c;
        si += c * IN_STRIDES[d];
    }
    ST(out_, gid, LD(x, si));
}
