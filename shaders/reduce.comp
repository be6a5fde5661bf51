// @storage16
// Reduction over a set of axes.  One invocation = one output element.
// OP: 0 mean, 1 sum, 2 max, 3 min, 4 prod.
// Defines: NK K_SHAPE[] K_STRIDES[] (kept axes), NR R_SHAPE[] R_STRIDES[] (reduced axes), RCOUNT
void main() {
    uint gid = gpuc_gid();
    if (gid >= TOTAL) return;
    int t = int(gid), base = 0;
    for (int d = NK - 1; d >= 0; --d) {
        base += (t % K_SHAPE[d]) * K_STRIDES[d];
        t /= K_SHAPE[d];
    }
#if OP == 2
    float acc = -1.0 / 0.0;
#elif OP == 3
    float acc = 1.0 / 0.0;
#elif OP == 4
    float acc = 1.0;
#else
    float acc = 0.0;
#endif
    for (int r = 0; r < RCOUNT; ++r) {
        int u = r, off = base;
        for (int d = NR - 1; d >= 0; --d) {
            off += (u % R_SHAPE[d]) * R_STRIDES[d];
            u /= R_SHAPE[d];
        }
        float v = LD(x, off);
#if OP == 2
        acc = max(acc, v);
#elif OP == 3
        acc = min(acc, v);
#elif OP == 4
        acc *= v;
#else
        acc += v;
#endif
    }
#if OP == 0
    acc /= float(RCOUNT);
#endif
    ST(out_, gid, acc);
}
