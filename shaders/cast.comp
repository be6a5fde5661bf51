// CAST between kinds 0 float32, 1 int32, 2 bool, 3 uint8, 4 int8 (IN_KIND -> OUT_KIND), LiteRT
// semantics: float -> integer truncates and saturates (NaN -> the maximum), integer -> narrower
// integer wraps, anything -> bool is != 0, bool -> number is 0 / 1.  1-byte kinds are packed 4 per
// 32-bit word; for a 1-byte output each invocation writes one whole word (4 elements).
// Defines: N (elements).  Buffers are read and written as raw 32-bit words (ew_bits / ew_put).
uint ew_bits(float v) { return floatBitsToUint(v); }
uint ew_bits(int v) { return uint(v); }
uint ew_bits(uint v) { return v; }
void ew_put(out float d, uint b) { d = uintBitsToFloat(b); }
void ew_put(out int d, uint b) { d = int(b); }
void ew_put(out uint d, uint b) { d = b; }
#define EW_BYTE(buf, e) ((ew_bits(buf[(e) >> 2]) >> (8 * ((e) & 3))) & 0xFFu)
#define OUT_BYTES (OUT_KIND >= 2)

// the output element's bits (low byte only for 1-byte kinds)
uint ew_from_float(float v) {
#if OUT_KIND == 0
    return floatBitsToUint(v);
#elif OUT_KIND == 1
    if (isnan(v) || v >= 2147483648.0) return 0x7fffffffu;
    if (v <= -2147483648.0) return 0x80000000u;
    return uint(int(v));
#elif OUT_KIND == 2
    return (floatBitsToUint(v) & 0x7fffffffu) != 0u ? 1u : 0u;     // by bits: denormals are != 0 too
#elif OUT_KIND == 3
    if (isnan(v) || v >= 255.0) return 255u;
    return v <= 0.0 ? 0u : uint(v);
#else
    if (isnan(v) || v >= 127.0) return 127u;
    if (v <= -128.0) return 0x80u;
    return uint(int(v)) & 0xFFu;
#endif
}

uint ew_from_int(int v) {
#if OUT_KIND == 0
    return floatBitsToUint(float(v));
#elif OUT_KIND == 1
    return uint(v);
#elif OUT_KIND == 2
    return v != 0 ? 1u : 0u;
#else
    return uint(v) & 0xFFu;
#endif
}

uint ew_elem(int e) {
#if IN_KIND == 0
    return ew_from_float(uintBitsToFloat(ew_bits(x[e])));
#elif IN_KIND == 1
    return ew_from_int(int(ew_bits(x[e])));
#elif IN_KIND == 2
    return ew_from_int(EW_BYTE(x, e) != 0u ? 1 : 0);
#elif IN_KIND == 3
    return ew_from_int(int(EW_BYTE(x, e)));
#else
    return ew_from_int(bitfieldExtract(int(EW_BYTE(x, e)), 0, 8));
#endif
}

void main() {
    uint gid = gpuc_gid();
    if (gid >= TOTAL) return;
#if OUT_BYTES
    uint w = 0u;
    for (int j = 0; j < 4; ++j) {
        int e = int(gid) * 4 + j;
        if (e >= N) break;
        w |= ew_elem(e) << (8 * j);
    }
    ew_put(out_[gid], w);
#else
    ew_put(out_[gid], ew_elem(int(gid)));
#endif
}
