// @storage16
// CUMSUM along one axis: the input viewed as [OUTER][AXIS][INNER], one invocation per line
// (outer, inner) summing sequentially in LiteRT's order.  EXCLUSIVE: each output is the sum of
// the elements before it; REVERSE: the scan runs from the end of the axis.  IS_INT: int32 (wraps).
// Defines: AXIS INNER EXCLUSIVE REVERSE IS_INT
#if IS_INT
#define XT int
#else
#define XT float
#endif

void main() {
    uint gid = gpuc_gid();
    if (gid >= TOTAL) return;
    int o = int(gid) / INNER, i = int(gid) % INNER;
    int base = o * AXIS * INNER + i;
    XT acc = XT(0);
    for (int a = 0; a < AXIS; ++a) {
#if REVERSE
        int e = base + (AXIS - 1 - a) * INNER;
#else
        int e = base + a * INNER;
#endif
#if EXCLUSIVE
        ST(out_, e, acc);
        acc += XT(LD(x, e));
#else
        acc += XT(LD(x, e));
        ST(out_, e, acc);
#endif
    }
}
