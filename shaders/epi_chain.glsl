// The elementwise chain fused after a GEMM-like kernel's epilogue (passes/gemm_epilogue.py,
// ops/epi_chain.py): gemm.comp and batch_matmul.comp call epi_chain(o, v) last for each output
// element o (its linear index), with v their own result.  It computes what ew_fused.comp computes for
// the same steps, with operand v0 = v instead of a load: the per-op formulas of ew_math.glsl /
// common.glsl, every intermediate through ew_keep, so results equal the unfused program's.
// Defines: EPI_CHAIN (0: no chain), EPI_NIN (1 + the chain's inputs e1..e6), EPI_IDX<k> (the element
// of e<k> that output element o reads: an int expression in o, broadcasting by strides), EW_BODY and
// EW_RESULT (ops/ew_fused.py render_body), EPI_R16 (the unfused program stored v as float16: round
// it so first), EW_ROUND16 (ew_math.glsl's EW_R16 rounds).
#ifndef EPI_CHAIN
#define EPI_CHAIN 0
#endif
#if EPI_CHAIN
// @include ew_math.glsl
// epi_body: the chain's steps on the kernel's result v and the chain inputs' elements v1..v6 (unused
// ones 0.0), for kernels that load those themselves (gemm.comp's cooperative-matrix epilogue loads them
// as matrices); epi_chain(o, v): the same with e<k> read at element EPI_IDX<k> of output element o.
float epi_body(float v, float v1, float v2, float v3, float v4, float v5, float v6) {
#if EPI_R16
    float v0 = ew_keep(EW_R16(v));
#else
    float v0 = ew_keep(v);          // opaque, as the unfused program's store and load were
#endif
    EW_BODY
    return EW_RESULT;
}

float epi_chain(int o, float v) {
    float v1 = 0.0, v2 = 0.0, v3 = 0.0, v4 = 0.0, v5 = 0.0, v6 = 0.0;
#if EPI_NIN > 1
    v1 = LD(e1, EPI_IDX1);
#endif
#if EPI_NIN > 2
    v2 = LD(e2, EPI_IDX2);
#endif
#if EPI_NIN > 3
    v3 = LD(e3, EPI_IDX3);
#endif
#if EPI_NIN > 4
    v4 = LD(e4, EPI_IDX4);
#endif
#if EPI_NIN > 5
    v5 = LD(e5, EPI_IDX5);
#endif
#if EPI_NIN > 6
    v6 = LD(e6, EPI_IDX6);
#endif
    return epi_body(v, v1, v2, v3, v4, v5, v6);
}
#endif
