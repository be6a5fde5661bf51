// @storage16
// Elementwise binary op with numpy broadcasting.  OP: 0 add, 1 sub, 2 mul.
// Defines: RANK OUT_SHAPE[] A_STRIDES[] B_STRIDES[] (0 on broadcast dims), SAME_SHAPE, ACT
float gpuc_binop(float a, float b) {
#if OP == 0
    return a + b;
#elif OP == 1
    return a - b;
#else
    return a * b;
#endif
}

void main() {
    uint gid = gpuc_gid();
    if (gid >= TOTAL) return;
#if SAME_SHAPE
    int ia = int(gid), ib = int(gid);
#else
    int t = int(gid), ia = 0, ib = 0;
    for (int d = RANK - 1; d >= 0; --d) {
        int c = t % OUT_SHAPE[d];
        t /= OUT_SHAPE[d];
        ia += c * A_STRIDES[d];
        ib += c * B_STRIDES[d];
    }
#endif
    ST(out_, gid, gpuc_act(gpuc_binop(LD(a, ia), LD(b, ib))));
}
