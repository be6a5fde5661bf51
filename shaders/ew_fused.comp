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
// EW_VEC (1 or 2; 0/unset: one element per invocation): the invocation computes EW_VEC groups of 4
// consecutive output elements along the innermost dim (out_ is a vec4 view; TOTAL counts invocations).
// VEC_IN: bit k set: x<k> is a vec4 view (inner stride 1), its EW_VEC vectors at i<k>, i<k> + 1; clear:
// x<k> is broadcast along the innermost dim (scalar binding, one value for all the invocation's
// elements).  OUT_SHAPE's innermost extent then counts invocations along that dim and I<k>_STRIDES are
// in units of x<k>'s binding (vec4 ones: element strides / 4, innermost EW_VEC).  Every element runs
// EW_BODY / EW_RESULT as the scalar form does (one component at a time), so the results are the same bits.
// @include ew_math.glsl
#ifndef EW_VEC
#define EW_VEC 0
#endif
#if EW_VEC
#define EW_G EW_VEC
#define EW_STEP(k) ((VEC_IN >> k) & 1)  // index step from one vector of x<k> to the next
#define EW_W(k) vec4 w##k[EW_VEC]; for (int j = 0; j < EW_VEC; ++j) w##k[j] = vec4(LD(x##k, i##k + j * EW_STEP(k)));
#else
#define EW_G 1
#endif
void main() {
    uint gid = gpuc_gid();
    if (gid >= TOTAL) return;
    int g = int(gid) * EW_G;            // (the first vec4 of out_ this invocation writes, in the vector form)
    int i0 = g, i1 = g, i2 = g, i3 = g, i4 = g, i5 = g, i6 = g;
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
#if EW_VEC
    // vector form: load each input once (a splat for one broadcast along the innermost dim), then the
    // scalar form's statements per element
    EW_W(0)
#if NIN > 1
    EW_W(1)
#endif
#if NIN > 2
    EW_W(2)
#endif
#if NIN > 3
    EW_W(3)
#endif
#if NIN > 4
    EW_W(4)
#endif
#if NIN > 5
    EW_W(5)
#endif
#if NIN > 6
    EW_W(6)
#endif
    vec4 r[EW_VEC];
    for (int j = 0; j < EW_VEC; ++j) {
        for (int c = 0; c < 4; ++c) {
            float v0 = w0[j][c];
#if NIN > 1
            float v1 = w1[j][c];
#endif
#if NIN > 2
            float v2 = w2[j][c];
#endif
#if NIN > 3
            float v3 = w3[j][c];
#endif
#if NIN > 4
            float v4 = w4[j][c];
#endif
#if NIN > 5
            float v5 = w5[j][c];
#endif
#if NIN > 6
            float v6 = w6[j][c];
#endif
            EW_BODY
            float v = EW_RESULT;
#if FQ
            v = gpuc_fq(v);
#endif
#ifdef GPUC_TEST_BROKEN
            v += 0.5;
#endif
            r[j][c] = v;
        }
    }
    for (int j = 0; j < EW_VEC; ++j)
        ST(out_, g + j, r[j]);
#else
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
#endif
}
