// @storage16 (float path; IS_INT variants bind int32 tensors only)
// Elementwise unary math, LiteRT semantics.  float32 FN: 0 abs 1 neg 2 square 3 sqrt 4 rsqrt 5 exp
// 6 log 7 sin 8 cos 9 floor 10 ceil 11 round (half to even) 12 sign 13 elu 14 hard_swish
// 15 gelu (tanh approximation) 16 gelu (erf) 17 leaky_relu (ALPHA) 18 relu_0_to_1.
// IS_INT 1: int32 abs / neg / sign (FN 0, 1, 12; wrapping like LiteRT for INT_MIN).
// Buffers are read and written as raw 32-bit words (ew_bits / ew_put), whatever their declared type.
#ifndef ALPHA
#define ALPHA 0.0
#endif
uint ew_bits(float v) { return floatBitsToUint(v); }
uint ew_bits(int v) { return uint(v); }
uint ew_bits(uint v) { return v; }
void ew_put(out float d, uint b) { d = uintBitsToFloat(b); }
void ew_put(out int d, uint b) { d = int(b); }
void ew_put(out uint d, uint b) { d = b; }

// @include ew_math.glsl

float ew_fn(float v) {
#if FN == 0
    return ew_abs(v);
#elif FN == 1
    return ew_neg(v);
#elif FN == 2
    return ew_square(v);
#elif FN == 3
    return ew_sqrt(v);
#elif FN == 4
    return ew_rsqrt(v);
#elif FN == 5
    return ew_exp(v);
#elif FN == 6
    return ew_log(v);
#elif FN == 7
    return ew_sin(v);
#elif FN == 8
    return ew_cos(v);
#elif FN == 9
    return ew_floor(v);
#elif FN == 10
    return ew_ceil(v);
#elif FN == 11
    return ew_round(v);
#elif FN == 12
    return ew_sign(v);
#elif FN == 13
    return ew_elu(v);
#elif FN == 14
    return ew_hard_swish(v);
#elif FN == 15
    return ew_gelu_tanh(v);
#elif FN == 16
    return ew_gelu_erf(v);
#elif FN == 17
    return ew_leaky_relu(v, ALPHA);
#else
    return ew_relu_0_to_1(v);
#endif
}

int ew_ifn(int v) {
#if FN == 0
    return v < 0 ? -v : v;
#elif FN == 1
    return -v;
#else
    return v > 0 ? 1 : (v < 0 ? -1 : 0);
#endif
}

void main() {
    uint gid = gpuc_gid();
    if (gid >= TOTAL) return;
#if IS_INT
    ew_put(out_[gid], uint(ew_ifn(int(ew_bits(x[gid])))));
#else
    ST(out_, gid, ew_fn(LD(x, gid)));                              // float32 or float16 storage
#endif
}
