// @storage16 (float path; IS_INT variants bind int32 tensors only)
// Elementwise binary arithmetic with numpy broadcasting, LiteRT semantics, on float32 (IS_INT 0)
// or int32 (IS_INT 1).  OP: 0 add 1 sub 2 mul 3 div 4 pow 5 squared_difference 6 maximum 7 minimum
// 8 floor_div 9 floor_mod 10 prelu (float: a >= 0 ? a : a * b).
// Defines: RANK OUT_SHAPE[] A_STRIDES[] B_STRIDES[] (0 on broadcast dims), SAME_SHAPE, ACT (fused
// activation; for int32 only 0 none, 1 relu, 2 relu_n1_to_1, 3 relu6).
// Buffers are read and written as raw 32-bit words (ew_bits / ew_put), whatever their declared type.
uint ew_bits(float v) { return floatBitsToUint(v); }
uint ew_bits(int v) { return uint(v); }
uint ew_bits(uint v) { return v; }
void ew_put(out float d, uint b) { d = uintBitsToFloat(b); }
void ew_put(out int d, uint b) { d = int(b); }
void ew_put(out uint d, uint b) { d = b; }

#if IS_INT
const int INT_MIN = int(0x80000000u);
const int INT_MAX = 0x7fffffff;

uint ew_uabs(int v) { return v < 0 ? uint(-v) : uint(v); }   // |INT_MIN| = 2^31 as uint

// C++ truncating division; LiteRT gives INT_MAX for INT_MIN / -1 (and rejects division by 0).
int ew_div(int a, int b) {
    if (b == 0) return 0;
    if (a == INT_MIN && b == -1) return INT_MAX;
    int q = int(ew_uabs(a) / ew_uabs(b));
    return (a < 0) != (b < 0) ? -q : q;
}

// floor(double(a) / double(b)) cast to int32 (INT_MIN / -1 -> INT_MIN, as the x86 conversion does).
int ew_floor_div(int a, int b) {
    if (b == 0) return 0;
    uint ua = ew_uabs(a), ub = ew_uabs(b);
    uint q = ua / ub;
    if ((a < 0) != (b < 0)) return -int(q) - ((ua - q * ub) != 0u ? 1 : 0);
    return int(q);
}

// C++ % (truncated), then moved to the divisor's sign.
int ew_floor_mod(int a, int b) {
    if (b == 0) return 0;
    int r = int(ew_uabs(a) % ew_uabs(b));
    if (a < 0) r = -r;
    return (r != 0 && ((b < 0) != (r < 0))) ? r + b : r;
}

// LiteRT: std::pow in double, cast to int32 (out of range -> INT_MIN, as the x86 conversion does).
// A negative exponent is an error in LiteRT; we return what the double computation would give.
int ew_pow(int x, int e) {
    if (e < 0) {
        if (x == 1) return 1;
        if (x == -1) return (e & 1) != 0 ? -1 : 1;
        return x == 0 ? INT_MIN : 0;
    }
    uint ux = ew_uabs(x), m = 1u;
    bool big = false;
    if (ux <= 1u) {
        m = (e == 0 || ux == 1u) ? 1u : 0u;
    } else {
        for (int i = 0; i < e; ++i) {          // ux >= 2: at most 32 steps before overflow
            if (m > 0x80000000u / ux) { big = true; break; }
            m *= ux;
        }
    }
    if (big || m >= 0x80000000u) return INT_MIN;
    return (x < 0 && (e & 1) != 0) ? -int(m) : int(m);
}

int ew_binop(int a, int b) {
#if OP == 0
    return a + b;
#elif OP == 1
    return a - b;
#elif OP == 2
    return a * b;
#elif OP == 3
    return ew_div(a, b);
#elif OP == 4
    return ew_pow(a, b);
#elif OP == 5
    int d = a - b;
    return d * d;
#elif OP == 6
    return a > b ? a : b;
#elif OP == 7
    return a < b ? a : b;
#elif OP == 8
    return ew_floor_div(a, b);
#elif OP == 9
    return ew_floor_mod(a, b);
#else
    return a >= 0 ? a : a * b;
#endif
}

int ew_act(int v) {
#if ACT == 1
    return max(v, 0);
#elif ACT == 2
    return clamp(v, -1, 1);
#elif ACT == 3
    return clamp(v, 0, 6);
#else
    return v;
#endif
}

#else  // float32

// @include ew_math.glsl

float ew_binop(float a, float b) {
#if OP == 0
    return ew_add(a, b);
#elif OP == 1
    return ew_sub(a, b);
#elif OP == 2
    return ew_mul(a, b);
#elif OP == 3
    return ew_div(a, b);
#elif OP == 4
    return ew_pow(a, b);
#elif OP == 5
    return ew_squared_difference(a, b);
#elif OP == 6
    return ew_maximum(a, b);
#elif OP == 7
    return ew_minimum(a, b);
#elif OP == 8
    return ew_floor_div(a, b);
#elif OP == 9
    return ew_floor_mod(a, b);
#else
    return ew_prelu(a, b);
#endif
}

float ew_act(float v) {
#if OP <= 3
    // ops with a fused activation: clamped to the activation's range (NaN passes through), gpuc_act
    return gpuc_act(v);
#else
    return gpuc_fq(v);              // no activation range in LiteRT: +-inf pass through (a fake-quantized
                                    // output is still rounded to its grid, as gpuc_act would)
#endif
}
#endif

void main() {
    uint gid = gpuc_gid();
    if (gid >= TOTAL) return;
#if SAME_SHAPE
    int ia = int(gid), ib = int(gid);
#else
    int t = int(gid), ia = 0, ib = 0;
    for (int d = RANK - 1; d >= 0; --d) {
        int c = t % OUT_SHAPE[d];
        t /= OUT_SHAPE[d];
        ia += c * A_STRIDES[d];
        ib += c * B_STRIDES[d];
    }
#endif
#if IS_INT
    int v = ew_act(ew_binop(int(ew_bits(a[ia])), int(ew_bits(b[ib]))));
    ew_put(out_[gid], uint(v));
#else
    ST(out_, gid, ew_act(ew_binop(LD(a, ia), LD(b, ib))));        // float32 or float16 storage
#endif
}
