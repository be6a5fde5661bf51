// @storage16
// MIRROR_PAD: out[c] = x[m(c - PAD_LO)], m mirroring each coordinate back into [0, IN_SHAPE):
// OFFSET 1 (REFLECT, edge not repeated): -1 -> 1, n -> n - 2; OFFSET 0 (SYMMETRIC): -1 -> 0, n -> n - 1.
// Paddings are at most IN_SHAPE - OFFSET (checked at compile time, as LiteRT does).
// Defines: RANK OUT_SHAPE[] IN_SHAPE[] IN_STRIDES[] PAD_LO[] OFFSET; ELEM N (elem.glsl)
// @include elem.glsl

int mirror_src(int e) {
    int t = e, si = 0;
    for (int d = RANK - 1; d >= 0; --d) {
        int c = t % OUT_SHAPE[d] - PAD_LO[d];
        t /= OUT_SHAPE[d];
        if (c < 0) c = OFFSET - 1 - c;
        else if (c >= IN_SHAPE[d]) c = 2 * IN_SHAPE[d] - 1 - OFFSET - c;
        si += c * IN_STRIDES[d];
    }
    return si;
}

#if EL_PACKED
uint el_value(int e) { return EL_GET(x, mirror_src(e)); }
#endif

void main() {
    uint gid = gpuc_gid();
    if (gid >= TOTAL) return;
#if EL_PACKED
    out_[gid] = el_word(int(gid) * EL_PER);
#else
    ST(out_, gid, LD(x, mirror_src(int(gid))));
#endif
}
