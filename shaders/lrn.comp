// @storage16
// LOCAL_RESPONSE_NORMALIZATION over the last axis (C channels), as LiteRT's kernel:
// out = x * (BIAS + sum over channels [c - R, c + R] inside the row of ALPHA * x^2) ^ -BETA.
// Defines: C R BIAS ALPHA BETA
void main() {
    uint gid = gpuc_gid();
    if (gid >= TOTAL) return;
    int c = int(gid % C), row = int(gid) - c;
    float acc = 0.0;
    for (int k = max(c - R, 0); k < min(c + R + 1, C); ++k) {
        float v = LD(x, row + k);
        acc += v * v * ALPHA;
    }
    float s = BIAS + acc;
    float m = BETA == 1.0 ? 1.0 / s : BETA == 0.5 ? 1.0 / sqrt(s) : pow(s, -BETA);
    ST(out_, gid, LD(x, gid) * m);
}
