// SELECT / SELECT_V2: out = cond ? x : y with numpy broadcasting (SELECT's rank-1 condition picks
// whole rows: C_STRIDES = [1, 0, ...]).  BYTES 0: 4-byte elements (float32 / int32), one per
// invocation; BYTES 1: 1-byte elements (bool / uint8 / int8) packed 4 per 32-bit word, one whole
// output word per invocation.  cond is bool bytes, packed.  Defines: N (output elements) RANK
// OUT_SHAPE[] C_STRIDES[] X_STRIDES[] Y_STRIDES[] (0 on broadcast dims).
// Buffers are read and written as raw 32-bit words (ew_bits / ew_put), whatever their declared type.
uint ew_bits(float v) { return floatBitsToUint(v); }
uint ew_bits(int v) { return uint(v); }
uint ew_bits(uint v) { return v; }
void ew_put(out float d, uint b) { d = uintBitsToFloat(b); }
void ew_put(out int d, uint b) { d = int(b); }
void ew_put(out uint d, uint b) { d = b; }
#define EW_BYTE(buf, e) ((ew_bits(buf[(e) >> 2]) >> (8 * ((e) & 3))) & 0xFFu)

uint ew_elem(int e) {
    int t = e, ic = 0, ix = 0, iy = 0;
    for (int d = RANK - 1; d >= 0; --d) {
        int c = t % OUT_SHAPE[d];
        t /= OUT_SHAPE[d];
        ic += c * C_STRIDES[d];
        ix += c * X_STRIDES[d];
        iy += c * Y_STRIDES[d];
    }
#if BYTES
    return EW_BYTE(cond, ic) != 0u ? EW_BYTE(x, ix) : EW_BYTE(y, iy);
#else
    return EW_BYTE(cond, ic) != 0u ? ew_bits(x[ix]) : ew_bits(y[iy]);
#endif
}

void main() {
    uint gid = gpuc_gid();
    if (gid >= TOTAL) return;
#if BYTES
    uint w = 0u;
    for (int j = 0; j < 4; ++j) {
        int e = int(gid) * 4 + j;
        if (e >= N) break;
        w |= ew_elem(e) << (8 * j);
    }
    ew_put(out_[gid], w);
#else
    ew_put(out_[gid], ew_elem(int(gid)));
#endif
}
