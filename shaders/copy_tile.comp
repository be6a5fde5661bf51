// @storage16
// The tiled form of a copy_nd transpose (compiler/ops/copy_tile.py): out[DST_OFFSET + c.DST_STRIDES] =
// act(x[SRC_OFFSET + c.SRC_STRIDES]) for every coordinate c in SHAPE, where the destination is contiguous
// along dim AXA (the innermost) and the source along dim AXB.  A workgroup of 256 invocations moves a
// 32 x 32 tile of (AXA, AXB) at one coordinate of the other dims: it reads the tile along AXB (consecutive
// source addresses), holds it in shared memory, and writes it along AXA (consecutive destination
// addresses), where copy_nd's invocations read or write 32 elements a stride apart.
// Workgroup w: tile TA-major (w % TA along AXA, then along AXB), then the other dims with dim 0 outermost,
// so a batch's items are consecutive ranges of workgroups.  NWG: the workgroups (a grid may be padded).
// Defines: RANK SHAPE[] SRC_STRIDES[] DST_STRIDES[] SRC_OFFSET DST_OFFSET AXA AXB TA TB NWG ACT FQ.

shared float tile[32][33];

void main() {
    uint wg = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
    if (wg >= uint(NWG)) return;                          // (uniform across the workgroup)
    int t = int(wg);
    int a0 = (t % TA) * 32;
    t /= TA;
    int b0 = (t % TB) * 32;
    t /= TB;
    int si = SRC_OFFSET, di = DST_OFFSET;
    for (int d = RANK - 1; d >= 0; --d) {
        if (d == AXA || d == AXB) continue;
        int c = t % SHAPE[d];
        t /= SHAPE[d];
        si += c * SRC_STRIDES[d];
        di += c * DST_STRIDES[d];
    }
    int lx = int(gl_LocalInvocationID.x) & 31, ly = int(gl_LocalInvocationID.x) >> 5;
    int nb = SHAPE[AXB] - b0, na = SHAPE[AXA] - a0;        // rows left along each dim
    if (lx < nb) {
        for (int j = ly; j < 32 && j < na; j += 8)
            tile[j][lx] = LD(x, si + (a0 + j) * SRC_STRIDES[AXA] + (b0 + lx) * SRC_STRIDES[AXB]);
    }
    barrier();
    if (lx < na) {
        for (int j = ly; j < 32 && j < nb; j += 8)
#if ACT || FQ
            ST(out_, di + (a0 + lx) * DST_STRIDES[AXA] + (b0 + j) * DST_STRIDES[AXB], gpuc_act(tile[lx][j]));
#else
            ST(out_, di + (a0 + lx) * DST_STRIDES[AXA] + (b0 + j) * DST_STRIDES[AXB], tile[lx][j]);
#endif
    }
}
