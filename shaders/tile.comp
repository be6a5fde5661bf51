// @storage16
// TILE / BROADCAST_TO: out[c] = x[c mod IN_SHAPE] per dimension (IN_SHAPE padded to RANK with 1s).
// Defines: RANK OUT_SHAPE[] IN_SHAPE[] IN_STRIDES[]; ELEM N (elem.glsl)
// @include elem.glsl

int tile_src(int e) {
    int t = e, si = 0;
    for (int d = RANK - 1; d >= 0; --d) {
        int c = t % OUT_SHAPE[d];
        t /= OUT_SHAPE[d];
        si += (c % IN_SHAPE[d]) * IN_STRIDES[d];
    }
    return si;
}

#if EL_PACKED
uint el_value(int e) { return EL_GET(x, tile_src(e)); }
#endif

void main() {
    uint gid = gpuc_gid();
    if (gid >= TOTAL) return;
#if EL_PACKED
    out_[gid] = el_word(int(gid) * EL_PER);
#else
    ST(out_, gid, LD(x, tile_src(int(gid))));
#endif
}
