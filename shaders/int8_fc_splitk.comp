// Native int8 FULLY_CONNECTED / 1x1 stride-1 unpadded CONV_2D (a plain GEMM: pixel m's input is the row of
// KWORDS words at x[m * KWORDS]) with K split across a workgroup (compiler/ops/int8_conv.py _splitk_candidate:
// a `measured` candidate of the flat kernel, for layers with few outputs, such as a classifier at a small
// batch, where one invocation per output word leaves the GPU nearly idle).  Workgroup (pixel block, word
// group) computes PIX pixels' channels oc0 .. oc0 + 3; invocation l sums K words l, l + LX, ... (adjacent
// invocations read adjacent words of one weight row), the partial sums are added in shared memory (a tree:
// integer sums, so exact), then int8_conv_geo.glsl's epilogue (LiteRT's requantization).
// Defines: PIX RQ_MODE (1) VEC4 (1) DEPTHWISE (0) RESIDUAL (0) DOT_EXT
// @include int8_requant.glsl
// @include int8_conv_geo.glsl
#define LX 64
shared ivec4 red[PIX * LX];

void main() {
    q8_load_layer();
    int GM = qp[G_GM], KWORDS = qp[G_KWORDS];
    int wg = int(gl_WorkGroupID.x + gl_NumWorkGroups.x * gl_WorkGroupID.y);
    int l = int(gl_LocalInvocationID.x);
    int groups = COUT / 4;
    int oc0 = (wg % groups) * 4, m0 = (wg / groups) * PIX;
    ivec4 acc[PIX];
    for (int i = 0; i < PIX; ++i) acc[i] = ivec4(0);
    for (int k = l; k < KWORDS; k += LX) {
        uvec4 b = uvec4(w[oc0 * KWORDS + k], w[(oc0 + 1) * KWORDS + k], w[(oc0 + 2) * KWORDS + k],
                        w[(oc0 + 3) * KWORDS + k]);
        for (int i = 0; i < PIX; ++i) {
            uint a = x[min(m0 + i, GM - 1) * KWORDS + k];
            acc[i] += ivec4(DOT4(a, b.x), DOT4(a, b.y), DOT4(a, b.z), DOT4(a, b.w));
        }
    }
    for (int i = 0; i < PIX; ++i) red[i * LX + l] = acc[i];
    barrier();
    for (int s = LX / 2; s > 0; s >>= 1) {
        if (l < s)
            for (int i = 0; i < PIX; ++i) red[i * LX + l] += red[i * LX + l + s];
        barrier();
    }
    if (l < PIX && m0 + l < GM)
        q8_store_word(red[l * LX], oc0, ((m0 + l) * COUT + oc0) >> 2);
}
