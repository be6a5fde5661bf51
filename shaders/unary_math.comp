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

#define EW_NAN uintBitsToFloat(0x7fc00000u)
#define EW_INF uintBitsToFloat(0x7f800000u)

bool ew_signbit(float v) { return (floatBitsToUint(v) & 0x80000000u) != 0u; }

// Denormals: GPU arithmetic may flush them to zero, which changes some results by far more than a
// denormal (SIGN, FLOOR, CEIL, RSQRT, LOG, SQRT); those ops look at the bits.  A denormal v equals
// ew_den_m(v) * 2^-149 exactly, and that integer is a normal float.
bool ew_is_den(float v) { uint m = floatBitsToUint(v) & 0x7fffffffu; return m != 0u && m < 0x00800000u; }
float ew_den_m(float v) { return float(floatBitsToUint(v) & 0x007fffffu); }

// sin / cos to about 1 ulp for |x| < 8192 (Cody-Waite reduction by pi/2 with the cephes split, and
// the cephes sinf / cosf polynomials on [-pi/4, pi/4]); drivers' sin/cos may be far less accurate.
float ew_sin_poly(float r) {
    float z = r * r;
    return r + r * z * ((-1.9515295891e-4 * z + 8.3321608736e-3) * z - 1.6666654611e-1);
}
float ew_cos_poly(float r) {
    float z = r * r;
    return 1.0 - 0.5 * z + z * z * ((2.443315711809948e-5 * z - 1.388731625493765e-3) * z + 4.166664568298827e-2);
}
float ew_sincos(float x, int shift) {    // shift 0: sin, 1: cos
    if (isinf(x) || isnan(x)) return EW_NAN;
    float j = roundEven(x * 0.63661977236758134308);
    float r = ((x - j * 1.5703125) - j * 4.837512969970703125e-4) - j * 7.54978995489188216e-8;
    int q = (int(j) + shift) & 3;
    float v = (q & 1) != 0 ? ew_cos_poly(r) : ew_sin_poly(r);
    return q >= 2 ? -v : v;
}

// exp(x) - 1 without cancellation near 0 (Taylor series below |x| = 1/4).
float ew_expm1(float x) {
    if (abs(x) < 0.25) {
        return x * (1.0 + x * (0.5 + x * (1.0 / 6.0 + x * (1.0 / 24.0 + x * (1.0 / 120.0 + x * (1.0 / 720.0
                 + x * (1.0 / 5040.0)))))));
    }
    return exp(x) - 1.0;
}

// erfc to a relative error of ~1.2e-7 over the whole line (Numerical Recipes' erfcc Chebyshev fit),
// so GELU keeps its relative accuracy in the far negative tail.
float ew_erfc(float x) {
    float z = abs(x);
    float t = 1.0 / (1.0 + 0.5 * z);
    float p = -1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (-0.18628806
              + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277))))))));
    float r = t * exp(-z * z + p);
    return x >= 0.0 ? r : 2.0 - r;
}

float ew_fn(float v) {
#if FN == 0
    return abs(v);
#elif FN == 1
    return -v;
#elif FN == 2
    return v * v;
#elif FN == 3
    if (ew_is_den(v)) return ew_signbit(v) ? EW_NAN : sqrt(2.0 * ew_den_m(v)) * exp2(-75.0);
    if (v == 0.0 || isinf(v)) return v;          // sqrt(-0) = -0
    return v < 0.0 ? EW_NAN : sqrt(v);
#elif FN == 4
    if (ew_is_den(v)) return ew_signbit(v) ? EW_NAN : inversesqrt(2.0 * ew_den_m(v)) * exp2(75.0);
    if (v == 0.0) return ew_signbit(v) ? -EW_INF : EW_INF;
    if (v < 0.0 || isnan(v)) return EW_NAN;
    return isinf(v) ? 0.0 : inversesqrt(v);
#elif FN == 5
    return exp(v);
#elif FN == 6
    if (ew_is_den(v)) return ew_signbit(v) ? EW_NAN : log(ew_den_m(v)) - 103.27892990343184;
    if (v == 0.0) return -EW_INF;
    if (v < 0.0 || isnan(v)) return EW_NAN;
    return isinf(v) ? v : log(v);
#elif FN == 7
    return ew_sincos(v, 0);
#elif FN == 8
    return ew_sincos(v, 1);
#elif FN == 9
    if (ew_is_den(v)) return ew_signbit(v) ? -1.0 : 0.0;
    return floor(v);
#elif FN == 10
    if (ew_is_den(v)) return ew_signbit(v) ? -0.0 : 1.0;
    return ceil(v);
#elif FN == 11
    return roundEven(v);
#elif FN == 12
    uint m = floatBitsToUint(v) & 0x7fffffffu;      // by bits: denormals have a sign
    if (m > 0x7f800000u) return v;                  // NaN
    return m == 0u ? 0.0 : (ew_signbit(v) ? -1.0 : 1.0);
#elif FN == 13
    return v < 0.0 ? ew_expm1(v) : v;
#elif FN == 14
    return v * clamp(v + 3.0, 0.0, 6.0) / 6.0;
#elif FN == 15
    // 0.5 v (1 + tanh(u)) = v / (1 + exp(-2u)): no cancellation for negative v
    float u = 0.7978845608028654 * (v + 0.044715 * v * v * v);
    return v / (1.0 + exp(-2.0 * u));
#elif FN == 16
    return 0.5 * v * ew_erfc(-0.7071067811865476 * v);
#elif FN == 17
    return v > 0.0 ? v : v * ALPHA;
#else
    return clamp(v, 0.0, 1.0);
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
