// Comparisons and logic with numpy broadcasting -> bool.  OP: 0 less 1 less_equal 2 greater
// 3 greater_equal 4 equal 5 not_equal 6 logical_and 7 logical_or 8 logical_not (UNARY: no b).
// KIND: input kind, 0 float32, 1 int32, 2 bool (compared as 0 / 1).  Defines: N (output elements) RANK OUT_SHAPE[]
// A_STRIDES[] B_STRIDES[] (0 on broadcast dims), SAME_SHAPE.
// Bool tensors are bytes packed 4 per 32-bit word (little-endian); each invocation writes one whole
// output word (4 elements), so no two invocations touch the same word.  Buffers are read and
// written as raw 32-bit words (ew_bits / ew_put), whatever their declared type.
#ifndef UNARY
#define UNARY 0
#endif
uint ew_bits(float v) { return floatBitsToUint(v); }
uint ew_bits(int v) { return uint(v); }
uint ew_bits(uint v) { return v; }
void ew_put(out float d, uint b) { d = uintBitsToFloat(b); }
void ew_put(out int d, uint b) { d = int(b); }
void ew_put(out uint d, uint b) { d = b; }
#define EW_BYTE(buf, e) ((ew_bits(buf[(e) >> 2]) >> (8 * ((e) & 3))) & 0xFFu)

#if KIND == 0
// floats are compared through their bits (sign-magnitude -> two's complement, -0 == +0, NaN ->
// EW_NAN_KEY): exact whatever the driver does with denormals (most GPUs flush them) and NaN
#define EW_T int
#define EW_NAN_KEY int(0x80000000u)
int ew_key(uint u) {
    uint m = u & 0x7fffffffu;
    if (m > 0x7f800000u) return EW_NAN_KEY;
    return (u & 0x80000000u) != 0u ? -int(m) : int(m);
}
#define EW_LOAD(buf, e) ew_key(ew_bits(buf[e]))
#elif KIND == 1
#define EW_T int
#define EW_LOAD(buf, e) int(ew_bits(buf[e]))
#else
#define EW_T int
#define EW_LOAD(buf, e) (EW_BYTE(buf, e) != 0u ? 1 : 0)
#endif

bool ew_op(EW_T x, EW_T y) {
#if KIND == 0
    if (x == EW_NAN_KEY || y == EW_NAN_KEY) return OP == 5 || (OP == 8 && x == EW_NAN_KEY);
#endif
#if OP == 0
    return x < y;
#elif OP == 1
    return x <= y;
#elif OP == 2
    return x > y;
#elif OP == 3
    return x >= y;
#elif OP == 4
    return x == y;
#elif OP == 5
    return x != y;
#elif OP == 6
    return x != EW_T(0) && y != EW_T(0);
#elif OP == 7
    return x != EW_T(0) || y != EW_T(0);
#else
    return x == EW_T(0);
#endif
}

bool ew_elem(int e) {
#if SAME_SHAPE
    int ia = e, ib = e;
#else
    int t = e, ia = 0, ib = 0;
    for (int d = RANK - 1; d >= 0; --d) {
        int c = t % OUT_SHAPE[d];
        t /= OUT_SHAPE[d];
        ia += c * A_STRIDES[d];
        ib += c * B_STRIDES[d];
    }
#endif
#if UNARY
    EW_T x = EW_LOAD(a, ia);
    return ew_op(x, x);
#else
    return ew_op(EW_LOAD(a, ia), EW_LOAD(b, ib));
#endif
}

void main() {
    uint gid = gpuc_gid();
    if (gid >= TOTAL) return;
    uint w = 0u;
    for (int j = 0; j < 4; ++j) {
        int e = int(gid) * 4 + j;
        if (e >= N) break;
        if (ew_elem(e)) w |= 1u << (8 * j);
    }
    ew_put(out_[gid], w);
}
