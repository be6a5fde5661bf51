// Float-float arithmetic (a value = hi + lo, ~48 significant bits) from IEEE float add / multiply only
// (`precise`: no contraction into fma, no reassociation), and the functions the random ops need
// (compiler/ops/random.py): log, sin and cos of a float, exp of a float-float, and the correctly rounded
// float square root.  Results rounded to float are the correctly rounded ones except within ~2^-40 of a
// rounding midpoint.  Coefficients are float-float pairs given by their bits (hi, lo) so that no
// compiler parses a decimal literal differently: LOG_C = 1/(2k+1), SIN_C = (-1)^k/(2k+1)!,
// COS_C = (-1)^k/(2k)!, EXP_C = 1/k!.
#define FF_F(b) uintBitsToFloat(b)

vec2 ff_fast_two_sum(float a, float b) {       // |a| >= |b| (or a == 0)
    precise float s = a + b;
    precise float e = b - (s - a);
    return vec2(s, e);
}

vec2 ff_two_sum(float a, float b) {
    precise float s = a + b;
    precise float bb = s - a;
    precise float e = (a - (s - bb)) + (b - bb);
    return vec2(s, e);
}

vec2 ff_split(float a) {                        // Dekker: a = hi + lo, each with at most 12 bits
    precise float c = 4097.0 * a;
    precise float hi = c - (c - a);
    precise float lo = a - hi;
    return vec2(hi, lo);
}

vec2 ff_two_prod(float a, float b) {            // a * b exactly (no overflow, no underflow)
    precise float p = a * b;
    vec2 x = ff_split(a), y = ff_split(b);
    precise float e = ((x.x * y.x - p) + x.x * y.y + x.y * y.x) + x.y * y.y;
    return vec2(p, e);
}

vec2 ff_add(vec2 a, vec2 b) {
    vec2 s = ff_two_sum(a.x, b.x);
    precise float e = s.y + (a.y + b.y);
    return ff_fast_two_sum(s.x, e);
}

vec2 ff_mul(vec2 a, vec2 b) {
    vec2 p = ff_two_prod(a.x, b.x);
    precise float e = p.y + (a.x * b.y + a.y * b.x);
    return ff_fast_two_sum(p.x, e);
}

vec2 ff_neg(vec2 a) { return vec2(-a.x, -a.y); }

bool ff_gt(vec2 a, vec2 b) { return a.x > b.x || (a.x == b.x && a.y > b.y); }    // normalized pairs

const uint LOG_C_HI[10] = uint[](0x3F800000u, 0x3EAAAAABu, 0x3E4CCCCDu, 0x3E124925u, 0x3DE38E39u, 0x3DBA2E8Cu, 0x3D9D89D9u, 0x3D888889u, 0x3D70F0F1u, 0x3D579436u);
const uint LOG_C_LO[10] = uint[](0x00000000u, 0xB22AAAABu, 0xB14CCCCDu, 0xB1DB6DB7u, 0xB0638E39u, 0xB13A2E8Cu, 0xB144EC4Fu, 0xB16EEEEFu, 0xAF70F0F1u, 0xAFD79436u);
const uint SIN_C_HI[9] = uint[](0x3F800000u, 0xBE2AAAABu, 0x3C088889u, 0xB9500D01u, 0x3638EF1Du, 0xB2D7322Bu, 0x2F309231u, 0xAB573F9Fu, 0x274A963Cu);
const uint SIN_C_LO[9] = uint[](0x00000000u, 0x31AAAAABu, 0xAFEEEEEFu, 0x2C3FCBFDu, 0x292AD8E6u, 0xA5FEA89Cu, 0xA2C5792Fu, 0x9E667704u, 0x9AFCF52Bu);
const uint COS_C_HI[10] = uint[](0x3F800000u, 0xBF000000u, 0x3D2AAAABu, 0xBAB60B61u, 0x37D00D01u, 0xB493F27Eu, 0x310F76C7u, 0xAD49CBA5u, 0x29573F9Fu, 0xA53413C3u);
const uint COS_C_LO[10] = uint[](0x00000000u, 0x00000000u, 0xB0AAAAABu, 0x2E13E93Fu, 0xAABFCBFDu, 0x2808760Au, 0x24FF8D89u, 0xA08C07CAu, 0x1C667704u, 0x97EE5F66u);
const uint EXP_C_HI[14] = uint[](0x3F800000u, 0x3F800000u, 0x3F000000u, 0x3E2AAAABu, 0x3D2AAAABu, 0x3C088889u, 0x3AB60B61u, 0x39500D01u, 0x37D00D01u, 0x3638EF1Du, 0x3493F27Eu, 0x32D7322Bu, 0x310F76C7u, 0x2F309231u);
const uint EXP_C_LO[14] = uint[](0x00000000u, 0x00000000u, 0x00000000u, 0xB1AAAAABu, 0xB0AAAAABu, 0xAFEEEEEFu, 0xAE13E93Fu, 0xAC3FCBFDu, 0xAABFCBFDu, 0x292AD8E6u, 0xA808760Au, 0x25FEA89Cu, 0x24FF8D89u, 0xA2C5792Fu);
// pi/2 and ln 2 as p1 + p2 + p3 (p1, p2: 21 / 16 significant bits, so small multiples are exact)
#define FF_PIO2_1 FF_F(0x3FC90FD8u)
#define FF_PIO2_2 FF_F(0x34A88858u)
#define FF_PIO2_3 FF_F(0x298C234Cu)
#define FF_LN2_1 FF_F(0x3F317200u)
#define FF_LN2_2 FF_F(0x35BFBE00u)
#define FF_LN2_3 FF_F(0x2D8E7BCDu)

// x - k * c (c = c1 + c2 + c3 above, k a small integer, x - k c1 exact by Sterbenz)
vec2 ff_reduce(vec2 x, float k, float c1, float c2, float c3) {
    precise float r1 = x.x - k * c1;
    vec2 r = ff_add(vec2(r1, 0.0), vec2(x.y, 0.0));
    r = ff_add(r, vec2(-k * c2, 0.0));
    return ff_add(r, ff_neg(ff_two_prod(k, c3)));
}

// log(x) of a positive normal float
vec2 ff_log(float x) {
    int e;
    float m = frexp(x, e);                      // x = m 2^e, m in [0.5, 1)
    if (m < 0.70710678) { m *= 2.0; e -= 1; }   // m in [sqrt(1/2), sqrt(2))
    precise float f = m - 1.0;                  // exact
    vec2 d = ff_two_sum(2.0, f);
    precise float q1 = f / d.x;                 // s = f / (2 + f), refined by its residual
    vec2 qd = ff_mul(vec2(q1, 0.0), d);
    vec2 res = ff_add(vec2(f, 0.0), ff_neg(qd));
    precise float q2 = res.x / d.x;
    vec2 s = ff_fast_two_sum(q1, q2);
    vec2 t = ff_mul(s, s);
    vec2 p = vec2(FF_F(LOG_C_HI[9]), FF_F(LOG_C_LO[9]));
    for (int k = 8; k >= 0; --k) p = ff_add(ff_mul(p, t), vec2(FF_F(LOG_C_HI[k]), FF_F(LOG_C_LO[k])));
    vec2 l1p = ff_mul(ff_add(s, s), p);         // log(1 + f) = 2 atanh(s)
    float fe = float(e);
    vec2 el = ff_add(ff_two_prod(fe, FF_LN2_1), ff_two_prod(fe, FF_LN2_2));
    el = ff_add(el, ff_two_prod(fe, FF_LN2_3));
    return ff_add(el, l1p);
}

// (sin x, cos x) of a float x in [0, 8), each rounded to float
vec2 ff_sincos(float x) {
    float j = floor(x * FF_F(0x3F22F983u) + 0.5);     // nearest multiple of pi/2
    vec2 r = ff_reduce(vec2(x, 0.0), j, FF_PIO2_1, FF_PIO2_2, FF_PIO2_3);   // |r| <= pi/4 (a little more)
    vec2 z = ff_mul(r, r);
    vec2 s = vec2(FF_F(SIN_C_HI[8]), FF_F(SIN_C_LO[8]));
    for (int k = 7; k >= 0; --k) s = ff_add(ff_mul(s, z), vec2(FF_F(SIN_C_HI[k]), FF_F(SIN_C_LO[k])));
    s = ff_mul(s, r);
    vec2 c = vec2(FF_F(COS_C_HI[9]), FF_F(COS_C_LO[9]));
    for (int k = 8; k >= 0; --k) c = ff_add(ff_mul(c, z), vec2(FF_F(COS_C_HI[k]), FF_F(COS_C_LO[k])));
    int q = int(j) & 3;
    float sv = q == 0 ? s.x : q == 1 ? c.x : q == 2 ? -s.x : -c.x;
    float cv = q == 0 ? c.x : q == 1 ? -s.x : q == 2 ? -c.x : s.x;
    return vec2(sv, cv);
}

// exp(x) of a float-float x (0 below the float range)
vec2 ff_exp(vec2 x) {
    if (x.x < -103.0) return vec2(0.0);
    float k = floor(x.x * FF_F(0x3FB8AA3Bu) + 0.5);   // nearest multiple of ln 2
    vec2 r = ff_reduce(x, k, FF_LN2_1, FF_LN2_2, FF_LN2_3);
    vec2 p = vec2(FF_F(EXP_C_HI[13]), FF_F(EXP_C_LO[13]));
    for (int i = 12; i >= 0; --i) p = ff_add(ff_mul(p, r), vec2(FF_F(EXP_C_HI[i]), FF_F(EXP_C_LO[i])));
    int ki = int(k);
    return vec2(ldexp(p.x, ki), ldexp(p.y, ki));
}

// the correctly rounded float sqrt of a positive normal float (the device's sqrt, then fixed up by
// exact midpoint tests: x > ((c + next(c)) / 2)^2 in float-float)
bool ff_above_mid(float c, float x) {
    float n = uintBitsToFloat(floatBitsToUint(c) + 1u);
    precise float h = (n - c) * 0.5;            // half an ulp: exact
    vec2 sq = ff_add(ff_two_prod(c, c), ff_two_prod(2.0 * c, h));
    sq = ff_add(sq, ff_two_prod(h, h));
    return ff_gt(vec2(x, 0.0), sq);
}

float ff_sqrt(float x) {
    float c = sqrt(x);
    for (int i = 0; i < 4 && ff_above_mid(c, x); ++i) c = uintBitsToFloat(floatBitsToUint(c) + 1u);
    for (int i = 0; i < 4; ++i) {
        float p = uintBitsToFloat(floatBitsToUint(c) - 1u);
        if (ff_above_mid(p, x)) break;
        c = p;
    }
    return c;
}
