// STABLEHLO_AND on integers (bitwise) and STABLEHLO_SHIFT_LEFT, per 32-bit word of the output (1- and
// 2-byte dtypes through word views, 4 / 2 lanes a word; int64 AND: 2 words an element).
// OPK 0: AND (word-wise: the same bits as lane-wise); 1: SHIFT_LEFT: each lane, sign-extended to int32,
// shifted by its (sign-extended) count, truncated to the lane: counts outside [0, 31] give 0.
// Defines: OPK ES (bytes per element)
int shl(int v, int c) { return (c < 0 || c > 31) ? 0 : v << c; }

void main() {
    uint w = gpuc_gid();
    if (w >= TOTAL) return;
#if OPK == 0
    out_[w] = a[w] & b[w];
#elif ES == 4
    out_[w] = shl(int(a[w]), int(b[w]));
#else
    const int bits = 8 * ES;
    uint av = uint(a[w]), bv = uint(b[w]), word = 0u;
    for (int k = 0; k < 32 / bits; ++k) {
        int x = bitfieldExtract(int(av), k * bits, bits), c = bitfieldExtract(int(bv), k * bits, bits);
        word = bitfieldInsert(word, uint(shl(x, c)), k * bits, bits);
    }
    out_[w] = word;
#endif
}
