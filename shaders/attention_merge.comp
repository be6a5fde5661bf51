// @storage16
// Split attention, pass 2 (ops/attention.py, shaders/attention.comp KSPLIT > 1): output element (b, i, c)
// from the KSPLIT partials [m_s, l_s, acc_s[DV]] of row r = b * N + i (x, float32, at PART_ROW(r, s):
// attention_part.glsl): M = max_s m_s, w_s = exp((m_s - M) * BETA) (0 for a part of -inf scores only),
// out = sum_s w_s * acc_s[c] / sum_s w_s * l_s, written through the output view (O_T, O_SR, O_SC) as
// attention.comp writes it.  A NaN part makes the element NaN; a row of -inf scores only (sum 0) is NaN,
// as in one pass.  One invocation an output element.
// Defines: N DV NBATCH KSPLIT BETA O_T[] O_NT O_SR O_SC (TOTAL: the invocations, from the renderer)
// @include ew_math.glsl
// @include view_off.glsl
// @include attention_part.glsl

void main() {
    int e = int(gpuc_gid());
    if (e >= TOTAL) return;
    int c = e % DV, r = e / DV;
    int b = r / N, i = r % N;
    float mx = -EW_INF;
    for (int s = 0; s < KSPLIT; ++s) mx = max(mx, LD(x, PART_ROW(r, s)));
    float den = 0.0, num = 0.0;
    bool nan_ = false;
    for (int s = 0; s < KSPLIT; ++s) {
        int o = PART_ROW(r, s);
        float m = LD(x, o);
        nan_ = nan_ || isnan(m);
        float w = m == -EW_INF ? 0.0 : exp((m - mx) * BETA);
        den += w * LD(x, o + 1);
        num += w * LD(x, o + 2 + c);
    }
    int ooff;
    VIEW_OFF(ooff, O_T, O_NT, b)
    ST(out_, ooff + i * O_SR + c * O_SC, !nan_ && den > 0.0 ? num / den : EW_NAN);
}
