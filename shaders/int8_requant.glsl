// Native int8 (compiler/ops/int8_common.py): int8 lanes of 32-bit words, and LiteRT's requantization.
// q8_lane(word, j): the signed byte j of a word.
int q8_lane(uint w, int j) { return bitfieldExtract(int(w), 8 * j, 8); }
int q8_lane(int w, int j) { return bitfieldExtract(w, 8 * j, 8); }

// x * m * 2^(shift - 31), m >= 0, with the 64-bit product from imulExtended.
// mode 0 (RQ_GEMMLOWP, common.h MultiplyByQuantizedMultiplier): SaturatingRoundingDoublingHighMul
//   (nudge +-2^30 by the product's sign, / 2^31 truncating) then RoundingDivideByPOT (half away from 0).
// mode 1 (RQ_RUY, ruy's x86 gemm epilogue): (x * m + 2^30) >> 31 then (r + 2^(rs-1)) >> rs (half up).
// mode 2 (RQ_UPWARD, the optimized depthwise kernel's vector blocks): mode 0's first step, mode 1's second.
int q8_requant(int x, int m, int shift, int mode) {
    bool away = mode != 1;
    int ls = max(shift, 0), rs = max(-shift, 0);
    int a = x << ls;
    int hi, lo;
    imulExtended(a, m, hi, lo);
    bool neg = hi < 0;
    uint nudge = (away && neg) ? uint(1 - (1 << 30)) : (1u << 30);
    uint carry;
    uint l2 = uaddCarry(uint(lo), nudge, carry);
    int h2 = hi + int(carry) + ((away && neg) ? -1 : 0);
    int r = (h2 << 1) | int(l2 >> 31);                       // floor((a * m + nudge) / 2^31)
    if (away && h2 < 0 && (l2 & 0x7fffffffu) != 0u) r += 1;   // C++'s division truncates
    if (rs == 0) return r;
    if (mode == 0) {
        int mask = int((1u << uint(rs)) - 1u);
        int thr = (mask >> 1) + (r < 0 ? 1 : 0);
        return (r >> rs) + ((r & mask) > thr ? 1 : 0);
    }
    return (r + (1 << (rs - 1))) >> rs;
}
