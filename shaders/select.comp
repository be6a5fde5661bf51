// SELECT / SELECT_V2: out = cond ? x : y with numpy broadcasting (SELECT's rank-1 condition picks
// whole rows: C_STRIDES = [1, 0, ...]).  ELEM 4: 4-byte elements (float32 / int32; int64 as word
// pairs by geometry), one per invocation; ELEM 1 / 2: elements packed in 32-bit words (elem.glsl), one
// whole output word per invocation.  cond is bool bytes, packed.  Defines: N (output elements) RANK
// OUT_SHAPE[] C_STRIDES[] X_STRIDES[] Y_STRIDES[] (0 on broadcast dims) ELEM.
// Buffers are read and written as raw 32-bit words (ew_bits / ew_put), whatever their declared type.
// @include elem.glsl
uint ew_bits(float v) { return floatBitsToUint(v); }
uint ew_bits(int v) { return uint(v); }
uint ew_bits(uint v) { return v; }
void ew_put(out float d, uint b) { d = uintBitsToFloat(b); }
void ew_put(out int d, uint b) { d = int(b); }
void ew_put(out uint d, uint b) { d = b; }
#define EW_BYTE(buf, e) ((ew_bits(buf[(e) >> 2]) >> (8 * ((e) & 3))) & 0xFFu)

uint el_elem(int e) {
    int t = e, ic = 0, ix = 0, iy = 0;
    for (int d = RANK - 1; d >= 0; --d) {
        int c = t % OUT_SHAPE[d];
        t /= OUT_SHAPE[d];
        ic += c * C_STRIDES[d];
        ix += c * X_STRIDES[d];
        iy += c * Y_STRIDES[d];
    }
#if EL_PACKED
    return EW_BYTE(cond, ic) != 0u ? EL_GET(x, ix) : EL_GET(y, iy);
#else
    return EW_BYTE(cond, ic) != 0u ? ew_bits(x[ix]) : ew_bits(y[iy]);
#endif
}

#if EL_PACKED
uint el_value(int e) { return el_elem(e); }
#endif

void main() {
    uint gid = gpuc_gid();
    if (gid >= TOTAL) return;
#if EL_PACKED
    ew_put(out_[gid], el_word(int(gid) * EL_PER));
#else
    ew_put(out_[gid], el_elem(int(gid)));
#endif
}
