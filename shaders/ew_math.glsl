// Elementwise math with LiteRT semantics: the function of each op of compiler/ew_table.py (the row's
// `glsl`; the activations' are in common.glsl), a float overload and, for the ops with int32 in their
// dtypes, an int one.  The single home of these formulas: unary_math.comp, binary_math.comp and
// ew_fused.comp (fused elementwise chains, passes/ew_fusion.py) all call them.  The renderer pastes
// this file where a template has the line "// @include ew_math.glsl".
#define EW_NAN uintBitsToFloat(0x7fc00000u)
#define EW_INF uintBitsToFloat(0x7f800000u)
#define EW_FLT_MAX uintBitsToFloat(0x7f7fffffu)

bool ew_signbit(float v) { return (floatBitsToUint(v) & 0x80000000u) != 0u; }
// by bits: true for denormals too, which GPU arithmetic may flush to zero
bool ew_nonzero(float v) { return (floatBitsToUint(v) & 0x7fffffffu) != 0u; }

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

// ---- unary ops ----
float ew_abs(float v) { return abs(v); }
float ew_neg(float v) { return -v; }
float ew_square(float v) { return v * v; }
float ew_sqrt(float v) {
    if (ew_is_den(v)) return ew_signbit(v) ? EW_NAN : sqrt(2.0 * ew_den_m(v)) * exp2(-75.0);
    if (v == 0.0 || isinf(v)) return v;          // sqrt(-0) = -0
    return v < 0.0 ? EW_NAN : sqrt(v);
}
float ew_rsqrt(float v) {
    if (ew_is_den(v)) return ew_signbit(v) ? EW_NAN : inversesqrt(2.0 * ew_den_m(v)) * exp2(75.0);
    if (v == 0.0) return ew_signbit(v) ? -EW_INF : EW_INF;
    if (v < 0.0 || isnan(v)) return EW_NAN;
    return isinf(v) ? 0.0 : inversesqrt(v);
}
float ew_exp(float v) { return exp(v); }
float ew_log(float v) {
    if (ew_is_den(v)) return ew_signbit(v) ? EW_NAN : log(ew_den_m(v)) - 103.27892990343184;
    if (v == 0.0) return -EW_INF;
    if (v < 0.0 || isnan(v)) return EW_NAN;
    return isinf(v) ? v : log(v);
}
float ew_sin(float v) { return ew_sincos(v, 0); }
float ew_cos(float v) { return ew_sincos(v, 1); }
float ew_floor(float v) {
    if (ew_is_den(v)) return ew_signbit(v) ? -1.0 : 0.0;
    return floor(v);
}
float ew_ceil(float v) {
    if (ew_is_den(v)) return ew_signbit(v) ? -0.0 : 1.0;
    return ceil(v);
}
float ew_round(float v) { return roundEven(v); }
float ew_sign(float v) {
    uint m = floatBitsToUint(v) & 0x7fffffffu;      // by bits: denormals have a sign
    if (m > 0x7f800000u) return v;                  // NaN
    return m == 0u ? 0.0 : (ew_signbit(v) ? -1.0 : 1.0);
}
float ew_elu(float v) { return v < 0.0 ? ew_expm1(v) : v; }
float ew_gelu_tanh(float v) {
    // 0.5 v (1 + tanh(u)) = v / (1 + exp(-2u)): no cancellation for negative v
    float u = 0.7978845608028654 * (v + 0.044715 * v * v * v);
    return v / (1.0 + exp(-2.0 * u));
}
float ew_gelu_erf(float v) { return 0.5 * v * ew_erfc(-0.7071067811865476 * v); }
float ew_gelu(float v, bool approximate) { return approximate ? ew_gelu_tanh(v) : ew_gelu_erf(v); }
float ew_leaky_relu(float v, float alpha) { return v > 0.0 ? v : v * alpha; }
float ew_relu_0_to_1(float v) { return gpuc_clamp(v, 0.0, 1.0); }

// ---- binary ops ----
float ew_add(float a, float b) { return a + b; }
float ew_sub(float a, float b) { return a - b; }
float ew_mul(float a, float b) { return a * b; }

// a / b with x/0 made explicit (GPU division by zero is not specified).
float ew_div(float a, float b) {
    if (b == 0.0) {
        if (a == 0.0 || isnan(a)) return EW_NAN;
        return ew_signbit(a) != ew_signbit(b) ? -EW_INF : EW_INF;
    }
    return a / b;
}

// C fmod, exactly: |a| minus the largest multiples of |b| * 2^k, each subtraction exact (Sterbenz).
float ew_fmod(float a, float b) {
    float r = abs(a), m = abs(b);
    if (isnan(a) || isnan(b) || isinf(a) || m == 0.0) return EW_NAN;
    if (isinf(b) || r < m) return a;
    int er, em;
    frexp(r, er);
    frexp(m, em);
    float s = ldexp(m, er - em);              // m in the binade of r: r < 2 s
    for (int k = er - em; k >= 0; --k) {
        if (r >= s) r -= s;
        s *= 0.5;
    }
    return ew_signbit(a) ? -r : r;
}

// floor(a / b) of the exact quotient (LiteRT divides in double): trunc quotient from the exact
// remainder, then one step down when the remainder and divisor differ in sign.
float ew_floor_div(float a, float b) {
    if (b == 0.0 || isnan(a) || isnan(b) || isinf(a) || isinf(b)) return floor(ew_div(a, b));
    float r = ew_fmod(a, b);
    float q = roundEven((a - r) / b);
    if (ew_nonzero(r) && ew_signbit(r) != ew_signbit(b)) q -= 1.0;
    // a zero quotient takes floor(a / b)'s sign: -0 only from a zero a over b of the other sign (a nonzero a
    // under b in size gives a positive quotient here; the other sign was taken to -1 above)
    if (q == 0.0) q = (!ew_nonzero(a) && ew_signbit(a) != ew_signbit(b)) ? uintBitsToFloat(0x80000000u) : 0.0;
    return q;
}

float ew_floor_mod(float a, float b) {
    float r = ew_fmod(a, b);
    return (ew_nonzero(r) && ew_signbit(r) != ew_signbit(b)) ? r + b : r;
}

// std::pow: negative bases with integer exponents, zeros and infinities made explicit; small
// integer exponents by repeated squaring (a few roundings), the rest through exp2/log2.
float ew_pow(float x, float y) {
    if (y == 0.0 || x == 1.0) return 1.0;
    if (isnan(x) || isnan(y)) return EW_NAN;
    bool yint = floor(y) == y;
    if (x < 0.0 && !yint) return EW_NAN;
    bool odd = yint && !isinf(y) && abs(y) < 16777216.0 && fract(y * 0.5) != 0.0;
    float ax = abs(x), r;
    if (ax == 0.0) {
        r = y > 0.0 ? 0.0 : EW_INF;
    } else if (isinf(ax)) {
        r = y > 0.0 ? EW_INF : 0.0;
    } else if (yint && abs(y) <= 64.0) {
        int n = int(abs(y));
        float p = ax;
        r = 1.0;
        while (n > 0) {
            if ((n & 1) != 0) r *= p;
            p *= p;
            n >>= 1;
        }
        if (y < 0.0) r = 1.0 / r;
    } else {
        r = exp2(y * log2(ax));
    }
    return (odd && ew_signbit(x)) ? -r : r;
}

float ew_squared_difference(float a, float b) { float d = a - b; return d * d; }
float ew_maximum(float a, float b) { return a > b ? a : b; }
float ew_minimum(float a, float b) { return a < b ? a : b; }
float ew_prelu(float a, float b) { return a >= 0.0 ? a : a * b; }

// std::atan2(y, x) with C's zeros, infinities and NaN: atan of the smaller over the larger magnitude
// (cephes atanf on [0, 1], about 2 ulp), moved to the quadrant; denormals by their bits.
float ew_atan2(float y, float x) {
    if (isnan(x) || isnan(y)) return EW_NAN;
    float ax = abs(x), ay = abs(y), t;
    if (ew_is_den(x) && ew_is_den(y)) { ax = ew_den_m(x); ay = ew_den_m(y); }      // both scaled by 2^149
    if (!ew_nonzero(y)) t = 0.0;
    else if (!ew_nonzero(x)) t = 1.5707963267948966;
    else if (isinf(ax) && isinf(ay)) t = 0.7853981633974483;
    else {
        float r = min(ax, ay) / max(ax, ay), base = 0.0;
        if (r > 0.41421356237309503) { base = 0.7853981633974483; r = (r - 1.0) / (r + 1.0); }
        float z = r * r;
        t = base + ((((8.05374449538e-2 * z - 1.38776856032e-1) * z + 1.99777106478e-1) * z - 3.33329491539e-1) * z * r + r);
        if (ay > ax) t = 1.5707963267948966 - t;
    }
    if (ew_signbit(x)) t = 3.141592653589793 - t;
    return ew_signbit(y) ? -t : t;
}

// ---- int32 overloads (LiteRT on x86; see compiler/ops/math.py) ----
const int EW_INT_MIN = int(0x80000000u);
const int EW_INT_MAX = 0x7fffffff;

uint ew_uabs(int v) { return v < 0 ? uint(-v) : uint(v); }   // |INT_MIN| = 2^31 as uint

int ew_abs(int v) { return v < 0 ? -v : v; }                 // INT_MIN wraps to itself, as in LiteRT
int ew_neg(int v) { return -v; }
int ew_sign(int v) { return v > 0 ? 1 : (v < 0 ? -1 : 0); }
int ew_add(int a, int b) { return a + b; }                   // +, -, * wrap
int ew_sub(int a, int b) { return a - b; }
int ew_mul(int a, int b) { return a * b; }

// C++ truncating division; LiteRT gives INT_MAX for INT_MIN / -1 (and rejects division by 0).
int ew_div(int a, int b) {
    if (b == 0) return 0;
    if (a == EW_INT_MIN && b == -1) return EW_INT_MAX;
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
        return x == 0 ? EW_INT_MIN : 0;
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
    if (big || m >= 0x80000000u) return EW_INT_MIN;
    return (x < 0 && (e & 1) != 0) ? -int(m) : int(m);
}

int ew_squared_difference(int a, int b) { int d = a - b; return d * d; }
int ew_maximum(int a, int b) { return a > b ? a : b; }
int ew_minimum(int a, int b) { return a < b ? a : b; }
int ew_bitwise_xor(int a, int b) { return a ^ b; }
int ew_right_shift(int a, int b) { return a >> clamp(b, 0, 31); }   // arithmetic; LiteRT clamps the shift

// ---- fused expressions (ew_fused.comp, reduce.comp PROLOGUE) ----
// ew_keep: a value the optimizer cannot see through (XOR with a runtime zero: the dispatch grid is
// never 65536 groups deep in z).  Every intermediate and every inlined constant passes through it, so
// no multiply-add is contracted across two ops and no op is specialised for a constant operand: the
// fused kernel rounds exactly where the separate kernels rounded (their operands came from memory).
float ew_keep(float v) { return uintBitsToFloat(floatBitsToUint(v) ^ (gl_NumWorkGroups.z >> 16u)); }
// per-step copies (salt: the step's number) are never common subexpressions of each other: two steps
// computing the same thing stay two values, as the unfused program's two tensors were
float ew_keep(float v, uint salt) { return uintBitsToFloat(floatBitsToUint(v) ^ ((gl_NumWorkGroups.z >> 16u) * salt)); }
// a second, independent opaque copy: an op given the same value twice (x - x, x / x ...) sees two
// values the optimizer cannot prove equal, as the unfused kernel's two loads were (no x - x -> 0 for NaN)
float ew_keep2(float v) { return uintBitsToFloat(floatBitsToUint(v) ^ (gl_NumWorkGroups.z >> 17u)); }
#ifndef EW_ROUND16
#define EW_ROUND16 0
#endif
// v rounded to float16 and widened back, as a float16 store and load give: through the core
// packHalf2x16 / unpackHalf2x16 pair (the same float -> half conversion a float16 store makes; no 16-bit
// arithmetic type or shaderFloat16 needed).  One conversion each way: the fp32-only emulation it replaced
// (exponent, two ldexp, roundEven) made fp16 chains ALU-bound (EfficientNet-B0's depthwise + SiLU at b32).
float ew_round16(float v) { return unpackHalf2x16(packHalf2x16(vec2(v, 0.0))).x; }
#if EW_ROUND16
#define EW_R16(v) ew_round16(v)
#else
#define EW_R16(v) (v)
#endif

