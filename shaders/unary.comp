// @storage16
// Elementwise unary op.  FN: 0 identity(+ACT) 1 logistic 2 relu 3 relu6 4 tanh 5 relu_n1_to_1
void main() {
    uint gid = gpuc_gid();
    if (gid >= TOTAL) return;
    float v = LD(x, gid);
#if FN == 1
    v = 1.0 / (1.0 + exp(-v));
#elif FN == 2
    v = gpuc_max(v, 0.0);
#elif FN == 3
    v = gpuc_clamp(v, 0.0, 6.0);
#elif FN == 4
    v = tanh(gpuc_clamp(v, -10.0, 10.0));
#elif FN == 5
    v = gpuc_clamp(v, -1.0, 1.0);
#endif
#if ACT || FQ
    v = gpuc_act(v);
#endif
    ST(out_, gid, v);                  // standalone activations do not clamp +-inf (as in LiteRT)
}
