// @storage16
// Normalisation over the last axis (D elements per row), LiteRT's float kernels:
// OP 0 LOG_SOFTMAX: out = (x - max) - log(sum(exp(x - max)));
// OP 1 L2_NORMALIZATION: out = x / max(sqrt(sum(x * x)), EPS).
// ROW_PER_GROUP=0: one invocation per row (short rows).  ROW_PER_GROUP=1: one workgroup per row;
// invocations stride over the row and reduce through shared memory (long rows).
// Defines: D OP EPS ROW_PER_GROUP
#if ROW_PER_GROUP
shared float red[gl_WorkGroupSize.x];

float wg_reduce(float v, bool is_max) {
    uint l = gl_LocalInvocationID.x;
    red[l] = v;
    barrier();
    for (uint s = gl_WorkGroupSize.x / 2; s > 0; s >>= 1) {
        if (l < s) red[l] = is_max ? max(red[l], red[l + s]) : red[l] + red[l + s];
        barrier();
    }
    float r = red[0];
    barrier();
    return r;
}

void main() {
    uint row = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
    if (row * gl_WorkGroupSize.x >= TOTAL) return;      // whole workgroup leaves together
    int b = int(row) * D;
    int l = int(gl_LocalInvocationID.x), n = int(gl_WorkGroupSize.x);
#if OP == 0
    float m = -1.0 / 0.0;
    for (int i = l; i < D; i += n) m = max(m, LD(x, b + i));
    m = wg_reduce(m, true);
    float s = 0.0;
    for (int i = l; i < D; i += n) s += exp(LD(x, b + i) - m);
    float ls = log(wg_reduce(s, false));
    for (int i = l; i < D; i += n) ST(out_, b + i, (LD(x, b + i) - m) - ls);
#else
    float s = 0.0;
    for (int i = l; i < D; i += n) s += LD(x, b + i) * LD(x, b + i);
    float nrm = max(sqrt(wg_reduce(s, false)), EPS);
    for (int i = l; i < D; i += n) ST(out_, b + i, LD(x, b + i) / nrm);
#endif
}
#else
void main() {
    uint gid = gpuc_gid();
    if (gid >= TOTAL) return;
    int b = int(gid) * D;
#if OP == 0
    float m = LD(x, b);
    for (int i = 1; i < D; ++i) m = max(m, LD(x, b + i));
    float s = 0.0;
    for (int i = 0; i < D; ++i) s += exp(LD(x, b + i) - m);
    float ls = log(s);
    for (int i = 0; i < D; ++i) ST(out_, b + i, (LD(x, b + i) - m) - ls);
#else
    float s = 0.0;
    for (int i = 0; i < D; ++i) s += LD(x, b + i) * LD(x, b + i);
    float nrm = max(sqrt(s), EPS);
    for (int i = 0; i < D; ++i) ST(out_, b + i, LD(x, b + i) / nrm);
#endif
}
#endif
