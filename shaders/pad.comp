// @storage16
// PAD / PADV2: out[c] = x[c - PAD_LO] inside the source, PAD_VALUE outside.
// Defines: RANK OUT_SHAPE[] IN_SHAPE[] IN_STRIDES[] PAD_LO[] PAD_VALUE; ELEM N (elem.glsl): packed
// elements take PAD_VALUE's low bits, int64 (ELEM 8) the words PAD_VALUE (low) and PAD_HI (high).
// @include elem.glsl

// the source element of output element e, or -1 in the padding
int pad_src(int e) {
    int t = e, si = 0;
    bool inside = true;
    for (int d = RANK - 1; d >= 0; --d) {
        int c = t % OUT_SHAPE[d] - PAD_LO[d];
        t /= OUT_SHAPE[d];
        inside = inside && c >= 0 && c < IN_SHAPE[d];
        si += c * IN_STRIDES[d];
    }
    return inside ? si : -1;
}

#if EL_PACKED
uint el_value(int e) {
    int si = pad_src(e);
    return si >= 0 ? EL_GET(x, si) : uint(PAD_VALUE) & EL_MASK;
}
#endif

void main() {
    uint gid = gpuc_gid();
    if (gid >= TOTAL) return;
#if EL_PACKED
    out_[gid] = el_word(int(gid) * EL_PER);
#else
    int si = pad_src(int(gid));
#if ELEM == 8
    ST(out_, gid, si >= 0 ? LD(x, si) : x_A((gid & 1u) == 0u ? PAD_VALUE : PAD_HI));
#else
    ST(out_, gid, si >= 0 ? LD(x, si) : x_A(PAD_VALUE));
#endif
#endif
}
