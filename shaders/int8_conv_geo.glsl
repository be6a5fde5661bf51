// The tiled int8 convolutions' layer data and epilogue (int8_conv_tiled.comp, int8_conv_cm.comp; compiler/ops/
// int8_conv.py GEOMETRY and ADD_FIELDS): the geometry is data, not defines: qp's first QP0 ints (G_* below),
// then bias, multiplier, shift and weight sums per channel; so one module serves every layer of a model.
// RESIDUAL: a fused residual ADD (int8_conv.py _fuse_residual_adds): the conv's int8 value v and the residual
// r (binding res, the output's shape) rescaled and summed as LiteRT's int8 ADD (int8_eltwise.comp OP 0):
// q8_rq0((v + OFF_A) << 20, M_A, S_A) + q8_rq0((r + OFF_B) << 20, M_B, S_B), then q8_rq0(., MO, SO) + OUT_ZP
// clamped; its parameters at qp[G_R + i] in ADD_FIELDS order.  Needs int8_requant.glsl before it.
#define QP0 36
#define G_N 0
#define G_H 1
#define G_W 2
#define G_CW 3
#define G_OH 4
#define G_OW 5
#define G_COUT 6
#define G_KH 7
#define G_KW 8
#define G_SH 9
#define G_SW 10
#define G_DH 11
#define G_DW 12
#define G_PT 13
#define G_PL 14
#define G_IN_OFF 15
#define G_OUT_ZP 16
#define G_ACT_MIN 17
#define G_ACT_MAX 18
#define G_XZ_WORD 19
#define G_GM 20
#define G_KWORDS 21
#define G_TILES_N 22
#define G_R 23
int COUT, IN_OFF, OUT_ZP, ACT_MIN, ACT_MAX;
#define RQ_SPLIT 0
// @include int8_conv.glsl

void q8_load_layer() {
    COUT = qp[G_COUT];
    IN_OFF = qp[G_IN_OFF];
    OUT_ZP = qp[G_OUT_ZP];
    ACT_MIN = qp[G_ACT_MIN];
    ACT_MAX = qp[G_ACT_MAX];
}

// output word e (pixel m's channels oc0 .. oc0 + 3) from their int32 sums
void q8_store_word(ivec4 acc, int oc0, int e) {
    ivec4 v = ivec4(q8_finish(acc.x, oc0), q8_finish(acc.y, oc0 + 1), q8_finish(acc.z, oc0 + 2),
                    q8_finish(acc.w, oc0 + 3));
#if RESIDUAL
    uint rw = res[e];       // (read right before the write: res may share out_'s bytes)
    for (int j = 0; j < 4; ++j) {
        int va = q8_rq0((v[j] + qp[G_R]) << 20, qp[G_R + 1], qp[G_R + 2]);
        int vb = q8_rq0((q8_lane(rw, j) + qp[G_R + 3]) << 20, qp[G_R + 4], qp[G_R + 5]);
        v[j] = clamp(q8_rq0(va + vb, qp[G_R + 6], qp[G_R + 7]) + qp[G_R + 8], qp[G_R + 9], qp[G_R + 10]);
    }
#endif
    out_[e] = (uint(v.x) & 0xFFu) | (uint(v.y) & 0xFFu) << 8 | (uint(v.z) & 0xFFu) << 16 | (uint(v.w) & 0xFFu) << 24;
}
