// FILL / ZEROS_LIKE / ONES_LIKE: every output element gets one value, as raw 32-bit words.
// RUNTIME_VALUE=0: the value's bits are the define VALUE_BITS (int32 view of the float/int bits,
// or the value's bits for 1- and 2-byte dtypes).  RUNTIME_VALUE=1: the value is element 0 of binding
// `val` (for 1- and 2-byte dtypes: its low lane, `val` being the word view).  ELEM 1 / 2 (elem.glsl):
// packed output, each invocation writes one whole word (the padding bytes of the last word lie inside
// the tensor's slot).
// I64: int64 output as (low, high) 32-bit words, one word per invocation (VALUE_BITS low, HI_BITS high;
// a runtime value is read through a word view of its two words).
// Defines: N (elements) RUNTIME_VALUE ELEM I64 VALUE_BITS HI_BITS
// @include elem.glsl
uint f_bits(float v) { return floatBitsToUint(v); }
uint f_bits(int v) { return uint(v); }
uint f_bits(uint v) { return v; }
void f_put(out float d, uint b) { d = uintBitsToFloat(b); }
void f_put(out int d, uint b) { d = int(b); }
void f_put(out uint d, uint b) { d = b; }

// the bits of output word gid (of the element, for packed outputs)
uint fill_bits(uint gid) {
#if RUNTIME_VALUE && I64
    uint b = f_bits(val[gid & 1u]);
#elif RUNTIME_VALUE
    uint b = f_bits(val[0]);
#elif I64
    uint b = uint((gid & 1u) == 0u ? VALUE_BITS : HI_BITS);
#else
    uint b = uint(VALUE_BITS);
#endif
    return b;
}

#if EL_PACKED
uint el_value(int e) { return fill_bits(0u) & EL_MASK; }
#endif

void main() {
    uint gid = gpuc_gid();
    if (gid >= TOTAL) return;
#if EL_PACKED
    f_put(out_[gid], el_word(int(gid) * EL_PER));
#else
    f_put(out_[gid], fill_bits(gid));
#endif
}
