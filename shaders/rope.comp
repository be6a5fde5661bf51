// @storage16
// Rotary position embedding (compiler/ops/rope.py: the chain litert-torch writes, one dispatch):
//   x1 = x[..., :H2], x2 = x[..., H2:];  out = concat(x1 * c - x2 * s, x2 * c + x1 * s)
// in LiteRT's order of operations (`precise`: no fused multiply-add).  x is read in place from its
// source: flat element f of x is src[(f / SRC_ROW) * SRC_W + SRC_BEGIN + f % SRC_ROW] (a last-axis
// SLICE of src, reshaped).  c (cosv) and s (sinv) share one shape, broadcast to x's half shape [..., H2]: half
// coordinate k of dimension d (HALF_SHAPE[d]) reads c at k * CS_STRIDES[d] (0 where broadcast).
// One invocation per rotated element.  Defines: H2 SRC_ROW SRC_W SRC_BEGIN RANK HALF_SHAPE[] CS_STRIDES[];
// DUS 1 (ops/kv_write.py: the rotated tensor is the update of a DYNAMIC_UPDATE_SLICE, a KV cache): element
// f, at coordinate c of X_SHAPE[] (URANK dims), goes to out_[(start + c) . OUT_STRIDES], each start
// clamped to [0, MAX_START[d]] as LiteRT clamps it; the rest of out_ is the cache (in place) or a copy
// the compiler dispatched first.
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

int src_index(int f) { return (f / SRC_ROW) * SRC_W + SRC_BEGIN + f % SRC_ROW; }

void main() {
    uint gid = gpuc_gid();
    if (gid >= TOTAL) return;
    int f = int(gid);
    int p = f % (2 * H2);
    int j = p % H2;
    int row = f / (2 * H2);
    int f1 = row * 2 * H2 + j;
    // the broadcast index of half element (row, j) into c / s
    int t = row * H2 + j, ci = 0;
    for (int d = RANK - 1; d >= 0; --d) {
        ci += (t % HALF_SHAPE[d]) * CS_STRIDES[d];
        t /= HALF_SHAPE[d];
    }
    float x1 = LD(x, src_index(f1)), x2 = LD(x, src_index(f1 + H2));
    float c = LD(cosv, ci), s = LD(sinv, ci);
    precise float r;
    if (p < H2) {
        precise float a = x1 * c;
        precise float b = x2 * s;
        r = a - b;
    } else {
        precise float a = x2 * c;
        precise float b = x1 * s;
        r = a + b;
    }
    ST(out_, out_index(f), r);
}
