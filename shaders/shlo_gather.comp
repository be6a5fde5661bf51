// STABLEHLO_GATHER (LiteRT's stablehlo_gather.cc): output element r (rank RR) splits into batch dims
// (not in offset_dims) and offset dims; the batch index reads the start-index vector along IVD of the
// indices (int32, or int64 through a word view clamped to int32), start_index_map scatters it into an
// operand index, which is clipped so the slice fits (max(0, min(s, dim - slice))), then the offset
// index, with 0 at collapsed_slice_dims, is added.
// One invocation per 32-bit word of the output (ES bytes per element: 1 / 2 pack lanes, 8 takes 2 words).
// Defines: RR OR_ IR NIV ES IDX64 NE (output elements); arrays OSHAPE ISOFF (1: an offset dim) OPDIM
// (output dim -> operand dim for offset dims) ISTR (indices strides) BPOS (batch dim -> indices dim)
// SMAP (index vector k -> operand dim) SLICE OPSHAPE OPSTR; IVD
int start_value(int off) {
#if IDX64
    int lo = int(idx[2 * off]), hi = int(idx[2 * off + 1]);
    if (hi > 0 || (hi == 0 && lo < 0)) return 2147483647;
    if (hi < -1 || (hi == -1 && lo >= 0)) return -2147483647 - 1;
    return lo;
#else
    return int(idx[off]);
#endif
}

int source(int e) {          // the operand element output element e reads
    int rem = e;
    int res[RR];
    for (int d = RR - 1; d >= 0; --d) {
        res[d] = rem % OSHAPE[d];
        rem /= OSHAPE[d];
    }
    int ioff = 0, b = 0;     // offset of the batch position in the indices (index-vector dim at 0)
    for (int d = 0; d < RR; ++d) {
        if (ISOFF[d] == 0) {
            ioff += res[d] * ISTR[BPOS[b]];
            b++;
        }
    }
    int start[OR_], src = 0;
    for (int k = 0; k < OR_; ++k) start[k] = 0;
    for (int k = 0; k < NIV; ++k) start[SMAP[k]] = start_value(ioff + k * ISTR[IVD]);
    for (int k = 0; k < OR_; ++k) start[k] = max(0, min(start[k], OPSHAPE[k] - SLICE[k]));
    for (int d = 0; d < RR; ++d) {
        if (ISOFF[d] == 1) start[OPDIM[d]] += res[d];
    }
    for (int k = 0; k < OR_; ++k) src += start[k] * OPSTR[k];
    return src;
}

void main() {
    uint w = gpuc_gid();
    if (w >= TOTAL) return;
#if ES == 4
    out_[w] = x[source(int(w))];
#elif ES == 8
    out_[w] = x[2 * source(int(w) >> 1) + (int(w) & 1)];
#else
    const int bits = 8 * ES, lanes = 4 / ES;
    uint word = 0u;
    for (int l = 0; l < lanes; ++l) {
        int e = int(w) * lanes + l;
        if (e >= NE) break;
        int s = source(e);
        uint v = bitfieldExtract(uint(x[s / lanes]), (s % lanes) * bits, bits);
        word = bitfieldInsert(word, v, l * bits, bits);
    }
    out_[w] = word;
#endif
}
