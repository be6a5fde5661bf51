// @storage16 (float path; IS_INT variants bind int32 tensors only)
// One elementwise binary op with numpy broadcasting and LiteRT semantics (compiler/ops/math.py; its
// facts: compiler/ew_table.py), on float32 (IS_INT 0) or int32 (IS_INT 1).
// Defines: EW_EXPR (the op's ew_math.glsl function call on v0 and v1, which resolves to the float or
// the int32 overload), RANK OUT_SHAPE[] A_STRIDES[] B_STRIDES[] (0 on broadcast dims), SAME_SHAPE, ACT
// (fused activation, gpuc_apply; for int32 only the codes with an int overload) and, for floats, FQ
// (a fake-quantized output's rounding: gpuc_act).
// Buffers are read and written as raw 32-bit words (ew_bits / ew_put), whatever their declared type.
// VEC=1 (float; the output's innermost extent a multiple of 4, ops/ew_fused.py vector_form): an invocation
// computes 4 consecutive elements along the innermost dim (out_ a vec4 view, TOTAL counts invocations) with
// one index walk; VEC_A / VEC_B: that operand is a vec4 view too (contiguous along the dim; its strides in
// vec4s), else a scalar binding broadcast along it (one value for the 4).  OUT_SHAPE's innermost extent
// then counts vectors.  Each element is computed as the scalar form computes it (the same bits).
#ifndef IS_INT
#define IS_INT 0
#endif
uint ew_bits(float v) { return floatBitsToUint(v); }
uint ew_bits(int v) { return uint(v); }
uint ew_bits(uint v) { return v; }
void ew_put(out float d, uint b) { d = uintBitsToFloat(b); }
void ew_put(out int d, uint b) { d = int(b); }
void ew_put(out uint d, uint b) { d = b; }

// @include ew_math.glsl

#ifndef VEC
#define VEC 0
#endif
#if VEC
float ew_one(float v0, float v1) { return gpuc_act(EW_EXPR); }
#endif

void main() {
    uint gid = gpuc_gid();
    if (gid >= TOTAL) return;
#if SAME_SHAPE
    int ia = int(gid), ib = int(gid);
#else
    int t = int(gid), ia = 0, ib = 0;
    for (int d = RANK - 1; d >= 0; --d) {
        int c = t % OUT_SHAPE[d];
        t /= OUT_SHAPE[d];
        ia += c * A_STRIDES[d];
        ib += c * B_STRIDES[d];
    }
#endif
#if VEC
    vec4 p0 = vec4(LD(a, ia)), p1 = vec4(LD(b, ib));     // (a scalar binding: its value in every lane)
    ST(out_, gid, vec4(ew_one(p0.x, p1.x), ew_one(p0.y, p1.y), ew_one(p0.z, p1.z), ew_one(p0.w, p1.w)));
#elif IS_INT
    int v0 = int(ew_bits(a[ia])), v1 = int(ew_bits(b[ib]));
    ew_put(out_[gid], uint(gpuc_apply(EW_EXPR, ACT)));
#else
    float v0 = LD(a, ia), v1 = LD(b, ib);
    ST(out_, gid, gpuc_act(EW_EXPR));                             // float32 or float16 storage
#endif
}
