// Shared by int8_conv.comp and int8_conv_tiled.comp (compiler/ops/int8_conv.py): DOT4(a, b), the 4-lane
// signed dot product of packed int8 words (DOT_EXT: SPIR-V's OpSDot, VK_KHR_shader_integer_dot_product),
// and q8_finish, output channel oc's bias, requantization, zero point and activation clamp (needs
// int8_requant.glsl before it and the defines COUT VEC4 IN_OFF RQ_MODE RQ_SPLIT DEPTHWISE OUT_ZP ACT_MIN ACT_MAX).
#if DOT_EXT
// the variant for devices with VK_KHR_shader_integer_dot_product: OpSDot on 4 x int8 packed words
#extension GL_EXT_spirv_intrinsics : require
spirv_instruction(extensions = ["SPV_KHR_integer_dot_product"], capabilities = [6019, 6018], id = 4450)
int q8_sdot(uint a, uint b, spirv_literal int fmt);
#define DOT4(a, b) q8_sdot(a, b, 0)
#endif
#ifndef DOT4
int DOT4(uint a, uint b) {
    return q8_lane(a, 0) * q8_lane(b, 0) + q8_lane(a, 1) * q8_lane(b, 1) + q8_lane(a, 2) * q8_lane(b, 2)
         + q8_lane(a, 3) * q8_lane(b, 3);
}
#endif
#ifndef QP0
#define QP0 0
#endif
#ifndef Q8_WSUM
#define Q8_WSUM(oc) qp[QP0 + 3 * COUT + (oc)]     // (VEC4: sum of output channel oc's weights)
#endif
// bias, requantization, output zero point and activation clamp of output channel oc's int32 sum
// (qp's rows from QP0 on: int8_conv_tiled.comp keeps its geometry before them)
int q8_finish(int acc, int oc) {
#if VEC4
    acc += IN_OFF * Q8_WSUM(oc);
#endif
    acc += qp[QP0 + oc];
    int m = qp[QP0 + COUT + oc], sh = qp[QP0 + 2 * COUT + oc];
#ifndef TCONV
#define TCONV 0
#endif
#if (DEPTHWISE || TCONV) && RQ_MODE == 2
    int r = oc < RQ_SPLIT ? q8_rq2(acc, m, sh) : q8_rq0(acc, m, sh);   // (past the last block of 8: gemmlowp's)
#elif RQ_MODE == 2
    int r = q8_rq2(acc, m, sh);
#elif RQ_MODE == 1
    int r = q8_rq1(acc, m, sh);
#else
    int r = q8_rq0(acc, m, sh);
#endif
    r += OUT_ZP;
    return clamp(r, ACT_MIN, ACT_MAX);
}

