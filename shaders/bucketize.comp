// BUCKETIZE: out[e] = the index std::upper_bound(bnd, bnd + NB, x[e]) returns (libstdc++'s binary
// search, step for step: NaN lands past the last boundary, as in LiteRT).  FLOATS: float32 input, else
// int32 converted to float for the comparison (C++'s usual conversions: value < boundary).
// Defines: NB FLOATS
void main() {
    uint gid = gpuc_gid();
    if (gid >= TOTAL) return;
    float v = float(x[gid]);
    int first = 0, len = NB;
    while (len > 0) {
        int hl = len >> 1, mid = first + hl;
        if (v < bnd[mid]) {
            len = hl;
        } else {
            first = mid + 1;
            len = len - hl - 1;
        }
    }
    out_[gid] = first;
}
