// The tiled int8 convolutions' layer data and epilogue (int8_conv_tiled.comp, int8_conv_cm.comp; compiler/ops/
// int8_conv.py GEOMETRY and ADD_FIELDS): the geometry is data, not defines: qp's first QP0 ints (G_* below),
// then bias, multiplier, shift and weight sums per channel; so one module serves every layer of a model.
// RESIDUAL: a fused residual ADD (int8_conv.py _fuse_residual_adds): the conv's int8 value v and the residual
// r (binding res, the output's shape) rescaled and summed as LiteRT's int8 ADD (int8_eltwise.comp OP 0):
// q8_rq0((v + OFF_A) << 20, M_A, S_A) + q8_rq0((r + OFF_B) << 20, M_B, S_B), then q8_rq0(., MO, SO) + OUT_ZP
// clamped; its parameters at qp[G_R + i] in ADD_FIELDS order.  The two input rescalings depend on one byte
// each: tables of 256 in shared memory (q8_residual_init).  Per output channel parameters are loaded once per
// column (q8_cols), not per element.  Needs int8_requant.glsl before it.
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
#if RQ_MODE != 1
#error the tiled epilogue (q8_finish_cols) is ruy's rounding (RQ_RUY)
#endif
// @include int8_conv.glsl

#if RESIDUAL
int R_MO, R_LSH, R_RS, R_MASK, R_HALF, R_ZP, R_MIN, R_MAX;     // (the output rescaling's shift split once)
// the fused ADD's rescaled inputs as tables (q8_residual_init): entry v + 128 of side a (the conv's int8 value v) is
// q8_rq0((v + OFF_A) << 20, M_A, S_A), entry 256 + r + 128 of side b (a residual byte r) the same with OFF_B, M_B, S_B;
// in a shared array of their own unless the kernel defines Q8_LUT_GET(i) / Q8_LUT_SET(i, v) before including this
// file (int8_conv_cm.comp: 512 words of its staging array, free after the K loop)
#ifndef Q8_LUT_GET
shared int q8_lut[512];
#define Q8_LUT_GET(i) q8_lut[i]
#define Q8_LUT_SET(i, v) q8_lut[i] = (v)
#endif
#endif

void q8_load_layer() {
    COUT = qp[G_COUT];
    IN_OFF = qp[G_IN_OFF];
    OUT_ZP = qp[G_OUT_ZP];
    ACT_MIN = qp[G_ACT_MIN];
    ACT_MAX = qp[G_ACT_MAX];
#if RESIDUAL
    R_MO = qp[G_R + 6];
    R_LSH = max(qp[G_R + 7], 0);
    R_RS = max(-qp[G_R + 7], 0);
    R_MASK = int((1u << uint(R_RS)) - 1u);
    R_HALF = R_MASK >> 1;
    R_ZP = qp[G_R + 8];
    R_MIN = qp[G_R + 9];
    R_MAX = qp[G_R + 10];
#endif
}

#if RESIDUAL
// invocation tid of nt fills the tables (a barrier must follow before q8_store_cols reads it)
void q8_residual_init(int tid, int nt) {
    for (int i = tid; i < 512; i += nt) {
        int s = i >> 8, v = (i & 255) - 128;
        Q8_LUT_SET(i, q8_rq0((v + qp[G_R + 3 * s]) << 20, qp[G_R + 3 * s + 1], qp[G_R + 3 * s + 2]));
    }
}
#endif

// output channels oc0 .. oc0 + 3's requantization (RQ_RUY), loaded once for all the pixels an invocation finishes:
// bias plus IN_OFF times the weight sum (one int32 sum, wrapping as the two adds do), multiplier, left shift,
// right shift and its rounding half (0 where there is none)
struct Q8Cols { ivec4 add, m, lsh, rs, rnd; };

Q8Cols q8_cols(int oc0) {
    Q8Cols p;
    for (int j = 0; j < 4; ++j) {
        int oc = oc0 + j, sh = qp[QP0 + 2 * COUT + oc];
        p.add[j] = qp[QP0 + oc] + IN_OFF * qp[QP0 + 3 * COUT + oc];
        p.m[j] = qp[QP0 + COUT + oc];
        p.lsh[j] = max(sh, 0);
        p.rs[j] = max(-sh, 0);
        p.rnd[j] = int((1u << uint(p.rs[j])) >> 1);
    }
    return p;
}

// q8_finish (RQ_RUY) of 4 channels' int32 sums with their parameters in registers
ivec4 q8_finish_cols(ivec4 acc, Q8Cols p) {
    ivec4 v;
    for (int j = 0; j < 4; ++j)
        v[j] = clamp(((q8_high_up((acc[j] + p.add[j]) << p.lsh[j], p.m[j]) + p.rnd[j]) >> p.rs[j]) + OUT_ZP, ACT_MIN, ACT_MAX);
    return v;
}

// output word e (a pixel's channels p was loaded for) from their int32 sums; RESIDUAL: rw, the residual's
// word e, read by the caller before any of its writes (res may share out_'s bytes: every word is read and
// written by one invocation), all its words at once, so that their loads overlap
#if RESIDUAL
#define Q8_RES(rw) , rw
void q8_store_cols(ivec4 acc, Q8Cols p, int e, uint rw) {
#else
#define Q8_RES(rw)
void q8_store_cols(ivec4 acc, Q8Cols p, int e) {
#endif
    ivec4 v = q8_finish_cols(acc, p);
#if RESIDUAL
    for (int j = 0; j < 4; ++j) {     // q8_rq0(a + b, MO, SO) with SO's shifts from q8_load_layer
        int r = q8_high_away((Q8_LUT_GET(v[j] + 128) + Q8_LUT_GET(384 + q8_lane(rw, j))) << R_LSH, R_MO);
        r = (r >> R_RS) + ((r & R_MASK) > R_HALF + (r < 0 ? 1 : 0) ? 1 : 0);
        v[j] = clamp(r + R_ZP, R_MIN, R_MAX);
    }
#endif
    out_[e] = (uint(v.x) & 0xFFu) | (uint(v.y) & 0xFFu) << 8 | (uint(v.z) & 0xFFu) << 16 | (uint(v.w) & 0xFFu) << 24;
}

#if !RESIDUAL
// output word e (pixel m's channels oc0 .. oc0 + 3) from their int32 sums, the parameters loaded here
void q8_store_word(ivec4 acc, int oc0, int e) {
    q8_store_cols(acc, q8_cols(oc0), e);
}
#endif
