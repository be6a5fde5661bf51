// @storage16
// RESIZE_BILINEAR (NEAREST=0) / RESIZE_NEAREST_NEIGHBOR (NEAREST=1), NHWC; one invocation per output
// element.  SCALE_Y/SCALE_X are TFLite's float32 scales, computed on the host.  The coordinate
// arithmetic is `precise` so it rounds exactly like the CPU kernel (no fma contraction).
// Defines: N H W C OH OW SCALE_Y SCALE_X NEAREST HALF_PIXEL ALIGN_CORNERS
#if NEAREST
int src_index(int o, int n_in, float scale) {
    precise float v = (float(o) + (HALF_PIXEL != 0 ? 0.5 : 0.0)) * scale;
#if ALIGN_CORNERS
    // TfLiteRound (half away from zero); v >= 0, and v - floor(v) is exact
    float fl = floor(v);
    int i = int(fl) + (v - fl >= 0.5 ? 1 : 0);
#else
    int i = int(floor(v));
#endif
    i = min(i, n_in - 1);
#if HALF_PIXEL
    i = max(i, 0);
#endif
    return i;
}
#else
// Source coordinate v and its clamped neighbours lo/hi along one axis.
float src_coord(int o, int n_in, float scale, out int lo, out int hi) {
#if HALF_PIXEL
    precise float v = (float(o) + 0.5) * scale - 0.5;
#else
    precise float v = float(o) * scale;
#endif
    lo = max(int(floor(v)), 0);
    hi = min(int(ceil(v)), n_in - 1);
    return v;
}
#endif

void main() {
    uint gid = gpuc_gid();
    if (gid >= TOTAL) return;
    int c = int(gid % C);
    int t = int(gid / C);
    int ox = t % OW; t /= OW;
    int oy = t % OH;
    int n = t / OH;
    int base = n * H;
#if NEAREST
    int iy = src_index(oy, H, SCALE_Y);
    int ix = src_index(ox, W, SCALE_X);
    ST(out_, gid, LD(x, ((base + iy) * W + ix) * C + c));
#else
    int y0, y1, x0, x1;
    float vy = src_coord(oy, H, SCALE_Y, y0, y1);
    float vx = src_coord(ox, W, SCALE_X, x0, x1);
    float dy = vy - float(y0), dx = vx - float(x0);
    float a = LD(x, ((base + y0) * W + x0) * C + c), b = LD(x, ((base + y1) * W + x0) * C + c);
    float d = LD(x, ((base + y0) * W + x1) * C + c), e = LD(x, ((base + y1) * W + x1) * C + c);
    ST(out_, gid, a * (1.0 - dy) * (1.0 - dx) + b * dy * (1.0 - dx) + d * (1.0 - dy) * dx + e * dy * dx);
#endif
}
