// REDUCE_ALL (ANY 0) / REDUCE_ANY (ANY 1) of bool tensors, packed 4 to a word (elem.glsl ELEM 1): each
// invocation writes one output word, reducing RCOUNT input elements for each of its 4 lanes.
// Output element e keeps coordinates K_SHAPE (input strides K_STRIDES) and reduces over R_SHAPE
// (input strides R_STRIDES).  Defines: NK K_SHAPE[] K_STRIDES[] NR R_SHAPE[] R_STRIDES[] RCOUNT ANY N
#define ELEM 1
// @include elem.glsl

uint el_value(int e) {
    int base = 0;
    int t = e;
    for (int d = NK - 1; d >= 0; --d) {
        base += (t % K_SHAPE[d]) * K_STRIDES[d];
        t /= K_SHAPE[d];
    }
    for (int r = 0; r < RCOUNT; ++r) {
        int off = base;
        int u = r;
        for (int d = NR - 1; d >= 0; --d) {
            off += (u % R_SHAPE[d]) * R_STRIDES[d];
            u /= R_SHAPE[d];
        }
        bool v = EL_GET(x, off) != 0u;
#if ANY
        if (v) return 1u;
#else
        if (!v) return 0u;
#endif
    }
    return ANY != 0 ? 0u : 1u;
}

void main() {
    uint gid = gpuc_gid();
    if (gid >= TOTAL) return;
    out_[gid] = el_word(int(gid) * EL_PER);
}
