// @storage16
// CUMSUM along one axis: the input viewed as [OUTER][AXIS][INNER], one invocation per line
// (outer, inner) summing sequentially in LiteRT's order.  EXCLUSIVE: each output is the sum of
// the elements before it; REVERSE: the scan runs from the end of the axis.  IS_INT 0: float32;
// 1: int32 (wraps); 2: int64 (wraps): x and out_ are 32-bit word views, element e = words (2e low,
// 2e + 1 high), added with a carry.
// CHUNKED (compiler/ops/step_chunks.py, a long axis): the dispatch scans the positions steps = [first, count]
// of the axis in scan order, resuming from what the dispatch before wrote at position first - 1 (out_ is
// read-write then): the same additions in the same order as one dispatch.
// Defines: AXIS INNER EXCLUSIVE REVERSE IS_INT; switch CHUNKED
#ifndef CHUNKED
#define CHUNKED 0
#endif
#if IS_INT == 2
#define XT uvec2
uvec2 load(int e) { return uvec2(uint(LD(x, 2 * e)), uint(LD(x, 2 * e + 1))); }
#if CHUNKED
uvec2 load_out(int e) { return uvec2(uint(LD(out_, 2 * e)), uint(LD(out_, 2 * e + 1))); }
#endif
void store(int e, uvec2 v) {
    ST(out_, 2 * e, v.x);
    ST(out_, 2 * e + 1, v.y);
}
uvec2 add(uvec2 a, uvec2 b) {
    uint carry;
    uint lo = uaddCarry(a.x, b.x, carry);
    return uvec2(lo, a.y + b.y + carry);
}
#else
#if IS_INT
#define XT int
#else
#define XT float
#endif
XT load(int e) { return XT(LD(x, e)); }
#if CHUNKED
XT load_out(int e) { return XT(LD(out_, e)); }
#endif
void store(int e, XT v) { ST(out_, e, v); }
XT add(XT a, XT b) { return a + b; }
#endif

void main() {
    uint gid = gpuc_gid();
    if (gid >= TOTAL) return;
    int o = int(gid) / INNER, i = int(gid) % INNER;
    int base = o * AXIS * INNER + i;
    XT acc = XT(0);
#if CHUNKED
    int first = steps[0], last = steps[0] + steps[1];
    if (first > 0) {                                   // the scan so far: the output before this chunk
        int e = base + (REVERSE != 0 ? AXIS - first : first - 1) * INNER;
#if EXCLUSIVE
        acc = add(load_out(e), load(e));
#else
        acc = load_out(e);
#endif
    }
#else
    int first = 0, last = AXIS;
#endif
    for (int a = first; a < last; ++a) {
#if REVERSE
        int e = base + (AXIS - 1 - a) * INNER;
#else
        int e = base + a * INNER;
#endif
#if EXCLUSIVE
        store(e, acc);
        acc = add(acc, load(e));
#else
        acc = add(acc, load(e));
        store(e, acc);
#endif
    }
}
