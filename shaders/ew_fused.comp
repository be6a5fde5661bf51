// @storage16
// A fused chain (or small DAG) of float elementwise ops (passes/ew_fusion.py, ops/ew_fused.py): one
// invocation computes the whole expression for one output element (4 or 8: EW_VEC), so the intermediates never
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
// VEC_IN: bit k set: x<k> is a vec4 view (inner stride 1), its vectors at i<k> (and i<k> + 1); clear:
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
// one output element from its inputs' values (v<k> past NIN: unused), as the scalar form computes it
float ew_one(float v0, float v1, float v2, float v3, float v4, float v5, float v6) {
    EW_BODY
    float v = EW_RESULT;
#if FQ
    v = gpuc_fq(v);                     // the output's fake quant, as gpuc_act applies it
#endif
#ifdef GPUC_TEST_BROKEN
    v += 0.5;                           // test hook only (GPUC_TEST_BREAK_OP), as common.glsl's gpuc_act
#endif
    return v;
}
// vector j of input k: a vec4 view's vec4 at i<k> + j, or a scalar splat (broadcast along the innermost dim)
#define EW_LD(k, j) vec4(LD(x##k, i##k + (j) * ((VEC_IN >> k) & 1)))
#define EW_ONE(p, c) ew_one(p##0.c, p##1.c, p##2.c, p##3.c, p##4.c, p##5.c, p##6.c)
#define EW_VEC4(p) vec4(EW_ONE(p, x), EW_ONE(p, y), EW_ONE(p, z), EW_ONE(p, w))
#define EW_LOADS(p, j) vec4 p##0 = EW_LD(0, j), p##1 = EW_LD1(j), p##2 = EW_LD2(j), p##3 = EW_LD3(j), \
                               p##4 = EW_LD4(j), p##5 = EW_LD5(j), p##6 = EW_LD6(j)
#if NIN > 1
#define EW_LD1(j) EW_LD(1, j)
#else
#define EW_LD1(j) vec4(0.0)
#endif
#if NIN > 2
#define EW_LD2(j) EW_LD(2, j)
#else
#define EW_LD2(j) vec4(0.0)
#endif
#if NIN > 3
#define EW_LD3(j) EW_LD(3, j)
#else
#define EW_LD3(j) vec4(0.0)
#endif
#if NIN > 4
#define EW_LD4(j) EW_LD(4, j)
#else
#define EW_LD4(j) vec4(0.0)
#endif
#if NIN > 5
#define EW_LD5(j) EW_LD(5, j)
#else
#define EW_LD5(j) vec4(0.0)
#endif
#if NIN > 6
#define EW_LD6(j) EW_LD(6, j)
#else
#define EW_LD6(j) vec4(0.0)
#endif
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
    // vector form: each input loaded once per vector, then the scalar form's statements per element
    EW_LOADS(a, 0);
#if EW_VEC > 1
    EW_LOADS(b, 1);
#endif
    ST(out_, g, EW_VEC4(a));
#if EW_VEC > 1
    ST(out_, g + 1, EW_VEC4(b));
#endif
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
