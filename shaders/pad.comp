// @storage16
// PAD / PADV2: out[c] = x[c - PAD_LO] inside the source, PAD_VALUE outside.
// Defines: RANK OUT_SHAPE[] IN_SHAPE[] IN_STRIDES[] PAD_LO[] PAD_VALUE
void main() {
    uint gid = gpuc_gid();
    if (gid >= TOTAL) return;
    int t = int(gid), si = 0;
    bool inside = true;
    for (int d = RANK - 1; d >= 0; --d) {
        int c = t % OUT_SHAPE[d] - PAD_LO[d];
        t /= OUT_SHAPE[d];
        inside = inside && c >= 0 && c < IN_SHAPE[d];
        si += c * IN_STRIDES[d];
    }
    ST(out_, gid, inside ? LD(x, si) : x_A(PAD_VALUE));
}
