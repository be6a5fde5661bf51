// Shared by every template (pasted after the generated defines and bindings).
#ifndef ACT
#define ACT 0
#endif
#ifndef ACT2
#define ACT2 0
#endif
#ifndef FQ
#define FQ 0
#endif
#ifndef FQM
#define FQM 0
#endif
#ifndef RESIDUAL
#define GPUC_RES 0
#else
#define GPUC_RES RESIDUAL
#endif

// Linear invocation index over a (possibly 2-D) grid of 1-D workgroups.
uint gpuc_gid() {
    return gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * gl_WorkGroupSize.x;
}

// Clamps that let NaN through, as LiteRT's std::max / std::min order does (GLSL leaves min / max /
// clamp of a NaN undefined, and GPUs return the other operand).
float gpuc_clamp(float v, float lo, float hi) { return isnan(v) ? v : clamp(v, lo, hi); }
float gpuc_max(float v, float lo) { return isnan(v) ? v : max(v, lo); }
// A running maximum that skips NaN operands `v` (LiteRT's max-pooling); -inf as the start value.
float gpuc_max_skip(float acc, float v) { return v > acc ? v : acc; }

// +-inf to +-FLT_MAX (NaN stays NaN): LiteRT's builtin clamp to [lowest, max].
float gpuc_finite(float v) { return abs(v) > 3.40282347e38 ? sign(v) * 3.40282347e38 : v; }

// Activations: the one formula of each activation op of compiler/ew_table.py, which the op's own
// kernel (unary_math.comp), a fused chain (ew_fused.comp) and every epilogue (gpuc_apply) call.
// As epilogues they follow LiteRT's default (XNNPACK) kernels: the range of a fused NONE and the open
// end of RELU are +-inf, so +-inf pass through (LiteRT's builtin kernels clamp them to +-FLT_MAX
// instead, which makes later sums depend on their order), and NaN stays NaN.
float ew_relu(float v) { return gpuc_max(v, 0.0); }
float ew_relu_n1_to_1(float v) { return gpuc_clamp(v, -1.0, 1.0); }
float ew_relu6(float v) { return gpuc_clamp(v, 0.0, 6.0); }
float ew_tanh(float v) { return tanh(gpuc_clamp(v, -10.0, 10.0)); }
float ew_logistic(float v) { return 1.0 / (1.0 + exp(-v)); }
float ew_hard_swish(float v) { return v * gpuc_clamp(v + 3.0, 0.0, 6.0) / 6.0; }
// int32 results (binary_math's integer ADD / SUB / MUL / DIV epilogue)
int ew_relu(int v) { return max(v, 0); }
int ew_relu_n1_to_1(int v) { return clamp(v, -1, 1); }
int ew_relu6(int v) { return clamp(v, 0, 6); }

// Epilogue activations: `code` (the ACT / ACT2 defines, always a constant, so the compiler folds the
// branches away) is an activation code of compiler/ew_table.py: 0 none, an activation op's code, or
// ACT_FINITE (gpuc_finite: the +-FLT_MAX clamp both LiteRT interpreters apply for a fused TANH /
// SIGN_BIT they ignore, compiler/ops/util.py).  The renderer (codegen/glsl.py) defines the cases from
// the table: GPUC_ACT_CASES `if (code == 1) return ew_relu(v); ...`, GPUC_IACT_CASES for int32.
float gpuc_apply(float v, int code) {
    GPUC_ACT_CASES
    return v;
}
int gpuc_apply(int v, int code) {
    GPUC_IACT_CASES
    return v;
}

// Simulated quantization ("fake quant") of a quantized output tensor (FQ_SCALE FQ_ZP FQ_MIN FQ_MAX):
// q = clamp(round_half_away_from_zero(v / scale) + zp, qmin, qmax); v = (q - zp) * scale.
// rs >= 0: LiteRT's gemm requantization (ruy, x86): round to 2^-rs steps, then to an integer, both
// ties upward (rs: the multiplier's right shift); 64 + rs: the same, ties away from zero
// (gemmlowp's MultiplyByQuantizedMultiplier); rs < 0: one rounding, ties away from zero.
float gpuc_fq_to(float v, float s, float zp, float lo, float hi, int rs) {
    float r = gpuc_finite(v) / s;
    if (rs >= 64) {                                  // 64 + rs: both roundings ties away from zero
        float p = exp2(float(rs - 64));
        float h = sign(r) * floor(abs(r) * p + 0.5);
        r = sign(h) * floor(abs(h) / p + 0.5);
    } else if (rs >= 0) {
        float p = exp2(float(rs));
        r = floor((floor(r * p + 0.5) + 0.5 * p) / p);
    } else {
        r = sign(r) * floor(abs(r) + 0.5);
    }
    return (clamp(r + zp, lo, hi) - zp) * s;
}
#ifndef FQ_RS
#define FQ_RS -1
#endif
#ifndef FQM_RS
#define FQM_RS -1
#endif
#if FQ
float gpuc_fq(float v) { return gpuc_fq_to(v, FQ_SCALE, float(FQ_ZP), float(FQ_MIN), float(FQ_MAX), FQ_RS); }
#else
float gpuc_fq(float v) { return v; }
#endif
#if FQ && GPUC_RES
// with a fused residual, gpuc_act rounds to the producer's own output grid (when it had one)
#if FQM
float gpuc_fq_mid(float v) { return gpuc_fq_to(v, FQM_SCALE, float(FQM_ZP), float(FQM_MIN), float(FQM_MAX), FQM_RS); }
#else
float gpuc_fq_mid(float v) { return v; }
#endif
#else
float gpuc_fq_mid(float v) { return gpuc_fq(v); }
#endif
#ifdef GPUC_TEST_BROKEN
// Test hook only (GPUC_TEST_BREAK_OP): a deliberately wrong epilogue, for `gpuc verify --per-op` tests.
float gpuc_act(float v) { return gpuc_apply(v, ACT) + 0.5; }
#else
float gpuc_act(float v) { return gpuc_fq_mid(gpuc_apply(v, ACT)); }
#endif
#if FQ && GPUC_RES
// Fused residual ADD: gpuc_act rounded to the producer's own grid (FQM_*); the templates' residual
// step `gpuc_apply(v + res, ACT2)` is the ADD, rounded to the output's grid here.
float gpuc_apply_res(float v, int code) { return gpuc_fq(gpuc_apply(v, code)); }
#define gpuc_apply gpuc_apply_res
#endif

// Storage-type access, used by templates marked "// @storage16": LD widens a binding's element to
// its arithmetic type (float / vec4 for float16 and float32 storage alike; int for int32), ST
// narrows a value to the binding's storage type.  The renderer defines <binding>_A and <binding>_S.
// So a float16 tensor costs half the bytes while every sum and product is still fp32.
#define LD(b, i) b##_A(b[i])
#define ST(b, i, v) b[i] = b##_S(v)
