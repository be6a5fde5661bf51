// Shared by every template (pasted after the generated defines and bindings).
#ifndef ACT
#define ACT 0
#endif
#ifndef ACT2
#define ACT2 0
#endif

// Linear invocation index over a (possibly 2-D) grid of 1-D workgroups.
uint gpuc_gid() {
    return gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * gl_WorkGroupSize.x;
}

// Epilogue activations (codes are gpuc's, not TFLite's enum):
// 0 none, 1 relu, 2 relu_n1_to_1, 3 relu6, 4 tanh, 5 logistic, 6 hard swish.  `code` is always a constant,
// so the compiler folds the branches away.
float gpuc_apply(float v, int code) {
    if (code == 1) return max(v, 0.0);
    if (code == 2) return clamp(v, -1.0, 1.0);
    if (code == 3) return clamp(v, 0.0, 6.0);
    if (code == 4) return tanh(clamp(v, -10.0, 10.0));
    if (code == 5) return 1.0 / (1.0 + exp(-v));
    if (code == 6) return v * clamp(v + 3.0, 0.0, 6.0) / 6.0;          // hard swish
    return v;
}

// Fused-activation epilogue, as LiteRT's float kernels apply it: clamp to the activation range,
// whose outer bounds are +-FLT_MAX (so +-inf become +-FLT_MAX; NaN stays NaN).
float gpuc_finite(float v) { return abs(v) > 3.40282347e38 ? sign(v) * 3.40282347e38 : v; }
#ifdef GPUC_TEST_BROKEN
// Test hook only (GPUC_TEST_BREAK_OP): a deliberately wrong epilogue, for `gpuc verify --per-op` tests.
float gpuc_act(float v) { return gpuc_finite(gpuc_apply(v, ACT)) + 0.5; }
#else
float gpuc_act(float v) { return gpuc_finite(gpuc_apply(v, ACT)); }
#endif
