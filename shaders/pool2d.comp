// @storage16
// AVERAGE_POOL_2D (OP 0; averages only the cells inside the input) and MAX_POOL_2D (OP 1), NHWC.
// Defines: N H W C OH OW KH KW SH SW PT PL OP ACT
void main() {
    uint gid = gpuc_gid();
    if (gid >= TOTAL) return;
    int c = int(gid % C);
    int t = int(gid / C);
    int ox = t % OW; t /= OW;
    int oy = t % OH;
    int n = t / OH;
    int y0 = max(oy * SH - PT, 0), y1 = min(oy * SH - PT + KH, H);
    int x0 = max(ox * SW - PL, 0), x1 = min(ox * SW - PL + KW, W);
#if OP == 1
    float acc = -1.0 / 0.0;
#else
    float acc = 0.0;
#endif
    for (int iy = y0; iy < y1; ++iy)
        for (int ix = x0; ix < x1; ++ix) {
            float v = LD(x, ((n * H + iy) * W + ix) * C + c);
#if OP == 1
            acc = max(acc, v);
#else
            acc += v;
#endif
        }
#if OP == 0
    acc /= float(max((y1 - y0) * (x1 - x0), 1));
#endif
    ST(out_, gid, gpuc_act(acc));
}
