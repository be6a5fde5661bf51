// L2_POOL_2D, NHWC, as LiteRT's kernel: the squares of the window's cells inside the input summed (rows,
// then columns), times 1 / their count, square-rooted, then the fused activation.
// CHUNKED (compiler/ops/step_chunks.py, a tall window): the dispatch sums window rows steps = [first, count],
// starting from the sum the dispatch before left in ps, and the last one finishes the output: the same order.
// Defines: N H W C OH OW KH KW SH SW PT PL ACT; switch CHUNKED
#ifndef CHUNKED
#define CHUNKED 0
#endif
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
#if CHUNKED
    int first = steps[0], last = steps[0] + steps[1];
    precise float acc = first > 0 ? ps[gid] : 0.0;
    for (int iy = max(y0, oy * SH - PT + first); iy < min(y1, oy * SH - PT + last); ++iy)
#else
    precise float acc = 0.0;
    for (int iy = y0; iy < y1; ++iy)
#endif
        for (int ix = x0; ix < x1; ++ix) {
            precise float v = x[((n * H + iy) * W + ix) * C + c];
            acc += v * v;
        }
#if CHUNKED
    if (last < KH) {
        ps[gid] = acc;
        return;
    }
#endif
    int cells = max(y1 - y0, 0) * max(x1 - x0, 0);
    precise float r = acc * (1.0 / float(cells));
    out_[gid] = gpuc_act(sqrt(r));
}
