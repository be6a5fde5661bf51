// Native int8 (compiler/ops/int8_common.py): int8 lanes of 32-bit words, and LiteRT's requantization.
// q8_lane(word, j): the signed byte j of a word.
int q8_lane(uint w, int j) { return bitfieldExtract(int(w), 8 * j, 8); }
int q8_lane(int w, int j) { return bitfieldExtract(w, 8 * j, 8); }

// x * m * 2^(shift - 31), m >= 0, with the 64-bit product from imulExtended, in three roundings (one
// function each, so that a shader holds only the ones it calls):
// q8_rq0 (RQ_GEMMLOWP, common.h MultiplyByQuantizedMultiplier): SaturatingRoundingDoublingHighMul (nudge
//   +-2^30 by the product's sign, / 2^31 truncating) then RoundingDivideByPOT (half away from zero);
// q8_rq1 (RQ_RUY, ruy's x86 gemm epilogue): (x * m + 2^30) >> 31 then (r + 2^(rs-1)) >> rs (half up);
// q8_rq2 (RQ_UPWARD, the optimized depthwise kernel's blocks of 8): q8_rq0's first step, q8_rq1's second.
int q8_high_away(int a, int m) {
    int hi, lo;
    imulExtended(a, m, hi, lo);
    bool neg = hi < 0;
    uint carry;
    uint l2 = uaddCarry(uint(lo), neg ? uint(1 - (1 << 30)) : (1u << 30), carry);
    int h2 = hi + int(carry) + (neg ? -1 : 0);
    int r = (h2 << 1) | int(l2 >> 31);                       // floor((a * m + nudge) / 2^31)
    return (h2 < 0 && (l2 & 0x7fffffffu) != 0u) ? r + 1 : r;  // C++'s division truncates
}
int q8_high_up(int a, int m) {
    int hi, lo;
    imulExtended(a, m, hi, lo);
    uint carry;
    uint l2 = uaddCarry(uint(lo), 1u << 30, carry);
    return ((hi + int(carry)) << 1) | int(l2 >> 31);         // floor((a * m + 2^30) / 2^31)
}
int q8_rq0(int x, int m, int shift) {
    int r = q8_high_away(x << max(shift, 0), m);
    int rs = max(-shift, 0);
    int mask = int((1u << uint(rs)) - 1u);
    int thr = (mask >> 1) + (r < 0 ? 1 : 0);
    return (r >> rs) + ((r & mask) > thr ? 1 : 0);
}
int q8_rq1(int x, int m, int shift) {
    int r = q8_high_up(x << max(shift, 0), m);
    int rs = max(-shift, 0);
    return rs == 0 ? r : (r + (1 << (rs - 1))) >> rs;
}
int q8_rq2(int x, int m, int shift) {
    int r = q8_high_away(x << max(shift, 0), m);
    int rs = max(-shift, 0);
    return rs == 0 ? r : (r + (1 << (rs - 1))) >> rs;
}
