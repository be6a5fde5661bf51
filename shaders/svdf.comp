// SVDF (float), LiteRT's EvalFloatSVDF: per filter f, the state row's newest entry is the feature
// projection WF[f] . x, the filter's output is WT[f] . state row; each unit sums its RANK filters onto
// its bias, then the fused activation; the state rows shift left by one (zero filled).
// One workgroup per batch element; invocations stride over the F filters, then over the U units.
// Bindings: out_ [NB,U], x [NB,I], w (packed constants: WF [F][I] at OFF_WF, WT [F][M] at OFF_WT,
// BIAS [U] at OFF_B when HAS_BIAS), state [NB][F][M] (read-write: it persists across runs).
// Defines: NB I F M U RANK, OFF_WF OFF_WT OFF_B, SVDF_ACT (TFLite's fused activation code), HAS_BIAS.
shared float sc[F];

float svdf_act(float v) {
#if SVDF_ACT == 1
    return max(v, 0.0);
#elif SVDF_ACT == 2
    return clamp(v, -1.0, 1.0);
#elif SVDF_ACT == 3
    return clamp(v, 0.0, 6.0);
#elif SVDF_ACT == 4
    return tanh(clamp(v, -15.0, 15.0));
#elif SVDF_ACT == 5
    return float(floatBitsToUint(v) >> 31);
#else
    return v;
#endif
}

void main() {
    uint b = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
    if (b >= uint(NB)) return;                      // whole workgroup leaves together
    int l = int(gl_LocalInvocationID.x), n = int(gl_WorkGroupSize.x);
    for (int f = l; f < F; f += n) {
        float v = 0.0;
        for (int k = 0; k < I; ++k) v += w[OFF_WF + f * I + k] * x[int(b) * I + k];
        int sb = (int(b) * F + f) * M;
        float s = 0.0;
        for (int m = 0; m < M - 1; ++m) s += w[OFF_WT + f * M + m] * state[sb + m];
        s += w[OFF_WT + f * M + M - 1] * v;
        sc[f] = s;
        for (int m = 0; m < M - 2; ++m) state[sb + m] = state[sb + m + 1];
        if (M >= 2) state[sb + M - 2] = v;
        state[sb + M - 1] = 0.0;
    }
    barrier();
    for (int u = l; u < U; u += n) {
#if HAS_BIAS
        float o = w[OFF_B + u];
#else
        float o = 0.0;
#endif
        for (int r = 0; r < RANK; ++r) o += sc[u * RANK + r];
        out_[int(b) * U + u] = svdf_act(o);
    }
}
