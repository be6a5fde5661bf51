// FULLY_CONNECTED: out[r, o] = act(sum_i x[r, i] * w[o, i] + bias[o]).  Defines: IN O HAS_BIAS ACT
void main() {
    uint gid = gpuc_gid();
    if (gid >= TOTAL) return;
    int o = int(gid % O);
    int r = int(gid / O);
    int xb = r * IN, wb = o * IN;
    float acc = 0.0;
    for (int i = 0; i < IN; ++i) acc += x[xb + i] * w[wb + i];
#if HAS_BIAS
    acc += bias[o];
#endif
    out_[gid] = gpuc_act(acc);
}
