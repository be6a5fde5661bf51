// @storage16
// A fused chain (or small DAG) of float elementwise ops (passes/ew_fusion.py, ops/ew_fused.py): one
// invocation computes the whole expression for one output element, so the intermediates never
// reach memory.  The per-op formulas are ew_math.glsl's and common.glsl's (the functions of
// compiler/ew_table.py, which unary_math / binary_math call too), with gpuc_apply (fused activations)
// and gpuc_fq_to (fake quant), so every step rounds exactly as the unfused kernels do.
// Defines: NIN (1..7 inputs x0..x6), EW_BCAST (0: every input has the output's shape; 1: RANK,
// OUT_SHAPE[], I<k>_STRIDES[] with 0 on broadcast dims), EW_BODY (statements computing float locals
// from the loaded inputs v0..v<NIN-1>), EW_RESULT (the output expression), EW_ROUND16 (EW_R16(v)
// rounds an intermediate to float16 as a float16 store + load would, ew_math.glsl ew_round16: the
// unfused program stored it so under --precision fp16), FQ (fake quant of the output, as gpuc_act).
// @include ew_math.glsl
void main() {
    uint gid = gpuc_gid();
    if (gid >= TOTAL) return;
    int i0 = int(gid), i1 = int(gid), i2 = int(gid), i3 = int(gid), i4 = int(gid), i5 = int(gid), i6 = int(gid);
#if EW_BCAST
    i0 = 0; i1 = 0; i2 = 0; i3 = 0; i4 = 0; i5 = 0; i6 = 0;
    int t = int(gid);
    for (int d = RANK - 1; d >= 0; --d) {
        int c = t % OUT_SHAPE[d];
        t /= OUT_SHAPE[d];
        i0 += c * I0_STRIDES[d];
#if NIN > 1
        i1 += c * I1_STRIDES[d];
#endif
#if NIN > 2
        i2 += c * I2_STRIDES[d];
#endif
#if NIN > 3
        i3 += c * I3_STRIDES[d];
#endif
#if NIN > 4
        i4 += c * I4_STRIDES[d];
#endif
#if NIN > 5
        i5 += c * I5_STRIDES[d];
#endif
#if NIN > 6
        i6 += c * I6_STRIDES[d];
#endif
    }
#endif
    float v0 = LD(x0, i0);
#if NIN > 1
    float v1 = LD(x1, i1);
#endif
#if NIN > 2
    float v2 = LD(x2, i2);
#endif
#if NIN > 3
    float v3 = LD(x3, i3);
#endif
#if NIN > 4
    float v4 = LD(x4, i4);
#endif
#if NIN > 5
    float v5 = LD(x5, i5);
#endif
#if NIN > 6
    float v6 = LD(x6, i6);
#endif
    EW_BODY
    float v = EW_RESULT;
#if FQ
    v = gpuc_fq(v);                     // the output's fake quant, as gpuc_act applies it
#endif
#ifdef GPUC_TEST_BROKEN
    v += 0.5;                           // test hook only (GPUC_TEST_BREAK_OP), as common.glsl's gpuc_act
#endif
    ST(out_, gid, v);
}
