// @storage16 (float path; IS_INT variants bind int32 tensors only)
// One elementwise binary op with numpy broadcasting and LiteRT semantics (compiler/ops/math.py; its
// facts: compiler/ew_table.py), on float32 (IS_INT 0) or int32 (IS_INT 1).
// Defines: EW_EXPR (the op's ew_math.glsl function call on v0 and v1, which resolves to the float or
// the int32 overload), RANK OUT_SHAPE[] A_STRIDES[] B_STRIDES[] (0 on broadcast dims), SAME_SHAPE, ACT
// (fused activation, gpuc_apply; for int32 only the codes with an int overload) and, for floats, FQ
// (a fake-quantized output's rounding: gpuc_act).
// Buffers are read and written as raw 32-bit words (ew_bits / ew_put), whatever their declared type.
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
#if IS_INT
    int v0 = int(ew_bits(a[ia])), v1 = int(ew_bits(b[ib]));
    ew_put(out_[gid], uint(gpuc_apply(EW_EXPR, ACT)));
#else
    float v0 = LD(a, ia), v1 = LD(b, ib);
    ST(out_, gid, gpuc_act(EW_EXPR));                             // float32 or float16 storage
#endif
}
