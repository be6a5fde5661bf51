// The epilogue of a gemm-like kernel before its fused chain, on the sum v with its bias element b and
// residual element r (either unused without HAS_BIAS / RESIDUAL): + bias, ACT, then ACT2(v + residual).
// gemm.comp's `finish` and cooperative-matrix register epilogue and grouped_conv.comp apply it; BIAS_AT(col) /
// RES_AT(o) read the bias and residual elements (0.0 without them).
float gemm_epi(float v, float b, float r) {
#if HAS_BIAS
    v += b;
#endif
    v = gpuc_act(v);
#if RESIDUAL
    v = gpuc_apply(v + r, ACT2);
#endif
    return v;
}
#if HAS_BIAS
#define BIAS_AT(col) LD(bias, col)
#else
#define BIAS_AT(col) 0.0
#endif
#if RESIDUAL
#define RES_AT(o) LD(res, o)
#else
#define RES_AT(o) 0.0
#endif
