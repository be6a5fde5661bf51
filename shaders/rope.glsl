// Rotary position embedding of element f of x [..., 2 * H2] (ops/rope.py), in LiteRT's order (`precise`):
//   x1 = x[..., :H2], x2 = x[..., H2:];  rotated = concat(x1 * c - x2 * s, x2 * c + x1 * s)
// x is read where it lies: its flat element f is ROPE_LD((f / SRC_ROW) * SRC_W + SRC_BEGIN + f % SRC_ROW) (a
// last-axis SLICE of a wider tensor, reshaped).  c (cosv) and s (sinv) share one shape, broadcast to x's
// half shape: half coordinate k of dimension d (HALF_SHAPE[d]) reads them at k * CS_STRIDES[d].
// Defines: H2 SRC_ROW SRC_W SRC_BEGIN RANK HALF_SHAPE[] CS_STRIDES[] ROPE_LD(i) (reads element i of the binding x lies in)

int rope_src(int f) { return (f / SRC_ROW) * SRC_W + SRC_BEGIN + f % SRC_ROW; }

float rope_value(int f) {
    int p = f % (2 * H2);
    int j = p % H2;
    int row = f / (2 * H2);
    int f1 = row * 2 * H2 + j;
    int t = row * H2 + j, ci = 0;          // the broadcast index of half element (row, j) into c / s
    for (int d = RANK - 1; d >= 0; --d) {
        ci += (t % HALF_SHAPE[d]) * CS_STRIDES[d];
        t /= HALF_SHAPE[d];
    }
    float x1 = ROPE_LD(rope_src(f1)), x2 = ROPE_LD(rope_src(f1 + H2));
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
    return r;
}
