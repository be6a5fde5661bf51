// SOFTMAX over the last axis: one invocation = one row of D elements.  Defines: D BETA
void main() {
    uint gid = gpuc_gid();
    if (gid >= TOTAL) return;
    int b = int(gid) * D;
    float m = x[b];
    for (int i = 1; i < D; ++i) m = max(m, x[b + i]);
    float s = 0.0;
    for (int i = 0; i < D; ++i) s += exp((x[b + i] - m) * BETA);
    float inv = 1.0 / s;
    for (int i = 0; i < D; ++i) out_[b + i] = exp((x[b + i] - m) * BETA) * inv;
}
