// @storage16 (float path; IS_INT variants bind int32 tensors only)
// One elementwise unary op with LiteRT semantics (compiler/ops/math.py; its facts: compiler/ew_table.py).
// EW_EXPR: the op's function call on v0 (ew_math.glsl; common.glsl for activations), which resolves to
// the float overload or, with IS_INT 1, the int32 one; without EW_EXPR a copy (QUANTIZE float ->
// float, the rounding of a fake-quantized output: passes/quant.py).  Float results pass through
// gpuc_act (ACT / FQ epilogue: identity without them).
// Buffers are read and written as raw 32-bit words (ew_bits / ew_put), whatever their declared type.
// VEC=1 (float, element count % 4 == 0): x and out_ are vec4 views, 4 elements per invocation (fewer,
// wider memory accesses, and four independent evaluations of a long formula such as GELU's).
#ifndef EW_EXPR
#define EW_EXPR v0
#endif
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
#if !IS_INT
float ew_one(float v0) { return gpuc_act(EW_EXPR); }
#endif

void main() {
    uint gid = gpuc_gid();
    if (gid >= TOTAL) return;
#if VEC
    vec4 v = LD(x, gid);
    ST(out_, gid, vec4(ew_one(v.x), ew_one(v.y), ew_one(v.z), ew_one(v.w)));
#elif IS_INT
    int v0 = int(ew_bits(x[gid]));
    ew_put(out_[gid], uint(EW_EXPR));
#else
    ST(out_, gid, ew_one(LD(x, gid)));                             // float32 or float16 storage
#endif
}
