// FILL / ZEROS_LIKE / ONES_LIKE: every output element gets one value, as raw 32-bit words.
// RUNTIME_VALUE=0: the value's bits are the define VALUE_BITS (int32 view of the float/int bits,
// or 0/1 for bool).  RUNTIME_VALUE=1: the value is element 0 of binding `val` (for bool: its first
// byte, `val` being the word view).  BYTES: 1-byte output (bool) packed 4 per word; each invocation
// writes one whole word (the padding bytes of the last word lie inside the tensor's slot).
// I64: int64 output as (low, high) 32-bit words, one word per invocation (VALUE_BITS low, HI_BITS high;
// a runtime value is read through a word view of its two words).
// Defines: N (elements) RUNTIME_VALUE BYTES I64 VALUE_BITS HI_BITS
uint f_bits(float v) { return floatBitsToUint(v); }
uint f_bits(int v) { return uint(v); }
uint f_bits(uint v) { return v; }
void f_put(out float d, uint b) { d = uintBitsToFloat(b); }
void f_put(out int d, uint b) { d = int(b); }
void f_put(out uint d, uint b) { d = b; }

void main() {
    uint gid = gpuc_gid();
    if (gid >= TOTAL) return;
#if RUNTIME_VALUE && I64
    uint b = f_bits(val[gid & 1u]);
#elif RUNTIME_VALUE
    uint b = f_bits(val[0]);
#if BYTES
    b = (b & 0xFFu) != 0u ? 1u : 0u;
#endif
#elif I64
    uint b = uint((gid & 1u) == 0u ? VALUE_BITS : HI_BITS);
#else
    uint b = uint(VALUE_BITS);
#endif
#if BYTES
    uint w = 0u;
    for (int j = 0; j < 4; ++j)
        if (int(gid) * 4 + j < N) w |= b << (8 * j);
    f_put(out_[gid], w);
#else
    f_put(out_[gid], b);
#endif
}
