// @storage16
// TILE / BROADCAST_TO: out[c] = x[c mod IN_SHAPE] per dimension (IN_SHAPE padded to RANK with 1s).
// Defines: RANK OUT_SHAPE[] IN_SHAPE[] IN_STRIDES[]
void main() {
    uint gid = gpuc_gid();
    if (gid >= TOTAL) return;
    int t = int(gid), si = 0;
    for (int d = RANK - 1; d >= 0; --d) {
        int c = t % OUT_SHAPE[d];
        t /= OUT_SHAPE[d];
        si += (c % IN_SHAPE[d]) * IN_STRIDES[d];
    }
    ST(out_, gid, LD(x, si));
}
