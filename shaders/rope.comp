// @storage16
// Rotary position embedding (compiler/ops/rope.py: the chain litert-torch writes, one dispatch): one
// invocation per rotated element, computed by rope_value (rope.glsl: the formula, the source and c / s
// index maps).  Defines: rope.glsl's; DUS 1 (ops/kv_write.py: the rotated tensor is the update of a
// DYNAMIC_UPDATE_SLICE, a KV cache): element f, at coordinate c of X_SHAPE[] (URANK dims), goes to
// out_[(start + c) . OUT_STRIDES], each start clamped to [0, MAX_START[d]] as LiteRT clamps it; the rest
// of out_ is the cache (in place) or a copy the compiler dispatched first.
#define ROPE_LD(i) LD(x, i)
// @include rope.glsl
#ifndef DUS
#define DUS 0
#endif

#if DUS
int out_index(int f) {
    int t = f, di = 0;
    for (int d = URANK - 1; d >= 0; --d) {
        int c = t % X_SHAPE[d];
        t /= X_SHAPE[d];
        di += (c + clamp(start[d], 0, MAX_START[d])) * OUT_STRIDES[d];
    }
    return di;
}
#else
int out_index(int f) { return f; }
#endif

void main() {
    uint gid = gpuc_gid();
    if (gid >= TOTAL) return;
    int f = int(gid);
    ST(out_, out_index(f), rope_value(f));
}
