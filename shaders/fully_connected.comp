// FULLY_CONNECTED: out[r, o] = act(sum_i x[r, i] * w[o, i] + bias[o]).  Defines: IN O HAS_BIAS ACT RESIDUAL ACT2
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
    float v = gpuc_act(acc);
#if RESIDUAL
    v = gpuc_apply(v + res[gid], ACT2);
#endif
    out_[gid] = v;
}
