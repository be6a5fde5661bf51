// @storage16
// ARG_MAX / ARG_MIN along one axis: the input viewed as [OUTER][AXIS][INNER], one invocation per
// output element (outer, inner).  Ties and NaNs as LiteRT's reference loop: the running best is
// replaced only when a later value compares strictly greater (IS_MIN: less), so the first index wins.
// IS_INT: int32 input.  OUT64: int64 output written as (low, high) int32 words (out_ is an int32 view
// of twice the length; indices are non-negative, so the high word is 0).
// Defines: AXIS INNER IS_MIN IS_INT OUT64
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
    XT best = XT(LD(x, base));
    int bi = 0;
    for (int a = 1; a < AXIS; ++a) {
        XT v = XT(LD(x, base + a * INNER));
#if IS_MIN
        if (v < best) {
#else
        if (v > best) {
#endif
            best = v;
            bi = a;
        }
    }
#if OUT64
    ST(out_, 2 * gid, bi);
    ST(out_, 2 * gid + 1, 0);
#else
    ST(out_, gid, bi);
#endif
}
