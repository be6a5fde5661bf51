// @storage16
// The cooperative-matrix form of attention_wide.comp (ops/attention.py coopmat_variant: the `coopmat`
// variant of --precision fp16, where the device has VK_KHR_cooperative_matrix 16x16x16
// fp16*fp16+fp32 at subgroup scope and subgroups of 32): the same inputs, views, steps, masked-tile
// skipping and results, with Q, K, V and P rounded to fp16 and the products on 16x16x16 coopmats with
// fp32 accumulators; scores, masks and the online softmax in fp32.  128 invocations (4 subgroups) per
// workgroup of BQ = 32 query rows of one batch, 64-key tiles, D and DV up to 128 (DP / DVP: rounded up
// to 16).  Subgroup sg takes the 16 rows of block rb = sg % 2 and half the columns, hf = sg / 2: key blocks
// 2 hf, 2 hf + 1 of S and value column blocks hf, hf + 2, ... of O.  Q (scaled by its steps) is loaded
// once into DP / 16 A matrices; per tile K goes to shared memory as fp16 [key][channel] (B = K^T:
// column-major), S = Q K^T goes to shared memory as fp32, where four invocations per row apply the score
// steps and the online softmax (row max through shared memory; each keeps its quarter's partial sum) and
// write P as fp16; V (fp16 [key][column]) replaces K; the output accumulators are rescaled by each row's
// factor (a column-vector matrix loaded with stride 0: the same element order as the accumulators) and
// O += P V.  At the end each tile passes through shared memory to the output view, divided by the row
// sums.  Global loads go through registers, LB at once per invocation; V's first LB are issued with K's
// (in flight through the scores).  Shared memory: K / V 64 x (max(DP, DVP) + 8) halves, S 32 x 68 floats,
// P 32 x 72 halves: 31 KiB at D = 128.
// CM_EMULATE=1 (tests, CompileOptions.coopmat_emulate): the same tiling and staging with the matrix
// operations done per invocation (32 invocations stand for a subgroup, element q of a tile at position
// lane + 32 q, row-major), Q kept in shared memory; lavapipe checks everything but the coopmat calls.
// Defines: those of attention_wide.comp but DCH VCH VKP PF; DP, DVP, CM_EMULATE.
#extension GL_EXT_control_flow_attributes : enable
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#if !CM_EMULATE
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#endif
// @include ew_math.glsl
#define MASKED 1.0e30
#define NT 128
#define BQ 32
#define BK 64
#define NBIASX (NBIAS > 0 ? NBIAS : 1)
#define LDK ((DP > DVP ? DP : DVP) + 8)  // halves per staged K / V row (16-byte aligned rows)
#define SLD 68                          // floats per row of S
#define PLD 72                          // halves per row of P
#define ND (DP / 16)
#define NV (DVP / 16)
#define LB 32                           // K / V values an invocation loads at once (registers)

shared float16_t sKV[BK * LDK];     // Q (at the start), then per tile K: [key][channel], V: [key][column]
shared float sS[BQ * SLD];          // S [row][key]; the output tiles at the end
shared float16_t sP[BQ * PLD];      // P [row][key]
shared float sRed[NT];              // per invocation: its quarter row's max, then its partial sum
shared float sAl[BQ];               // per row: the rescale factor of the tile, then 1 / sum
#if CM_EMULATE
shared float16_t sQ[BQ * LDK];
#endif
#if SKIP_BIAS >= 0
shared int sLive[3];
#endif

#if !CM_EMULATE
#define CM_A coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA>
#define CM_B coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB>
#define CM_C coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>
#endif

// V values e0 + tid + NT u (u < LB) of the tile at j0 (lanes along columns) into registers rv, and from them
// into sKV as fp16
#define LOAD_V(e0, rv) \
    [[unroll]] for (int u = 0; u < LB; ++u) { \
        int e = (e0) + tid + NT * u, c = e % DVP, j = j0 + e / DVP; \
        rv[u] = e < BK * DVP && j < M && c < DV ? LD(v, voff + j * V_SJ + c * V_SC) : 0.0; \
    }
#define STORE_V(e0, rv) \
    [[unroll]] for (int u = 0; u < LB; ++u) { \
        int e = (e0) + tid + NT * u; \
        if (e < BK * DVP) sKV[e / DVP * LDK + e % DVP] = float16_t(rv[u]); \
    }

#define VIEW_OFF(res, T, NTERMS, x) { res = 0; for (int t_ = 0; t_ < NTERMS; ++t_) res += ((x) / T[3 * t_] % T[3 * t_ + 1]) * T[3 * t_ + 2]; }

void main() {
    int wg = int(gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x);
    if (wg >= NWG) return;                       // whole workgroup: uniform
    int qb = QBLOCKS - 1 - wg / NBATCH, b = wg % NBATCH;  // the last rows first (attention_wide.comp)
    int i0 = qb * BQ;
    int qoff, koff, voff, ooff;
    VIEW_OFF(qoff, Q_T, Q_NT, b)
    VIEW_OFF(koff, K_T, K_NT, b)
    VIEW_OFF(voff, V_T, V_NT, b)
    VIEW_OFF(ooff, O_T, O_NT, b)
    qoff += Q_OFF;
    koff += K_OFF;
    voff += V_OFF;
    int tid = int(gl_LocalInvocationIndex);
    int sg = tid / 32, lane = tid % 32, rb = sg % 2, hf = sg / 2;
    int row = tid / 4, h = tid % 4, i = i0 + row;    // softmax: keys 16 h .. 16 h + 15 of a tile
    const int a = 0;                             // SCORE_STEPS / SKIP_LD read bo[..][a]
    int bo[NBIASX][1];
    for (int hh = 0; hh < NBIAS; ++hh) {
        int o = 0;
        for (int t_ = 0; t_ < B_NT[hh]; ++t_) {
            int f = 3 * (B_FIRST[hh] + t_);
            o += ((b * N + i) / B_T[f] % B_T[f + 1]) * B_T[f + 2];
        }
        bo[hh][0] = o;
    }
#if CM_EMULATE
#define QSTAGE sQ
#else
#define QSTAGE sKV
#endif
    for (int e = tid; e < BQ * DP; e += NT) {    // Q: lanes along channels
        int c = e % DP, rr = e / DP, ii = i0 + rr;
        float x = 0.0;
        if (ii < N && c < D) {
            x = LD(q, qoff + ii * Q_SR + c * Q_SC);
            Q_STEPS
        }
        QSTAGE[rr * LDK + c] = float16_t(x);
    }
    barrier();
#define NVH ((NV + 1) / 2)                  // value column blocks a subgroup owns (c = hf + 2 cc < NV)
#if CM_EMULATE
    float oc[NVH][8];
    for (int c = 0; c < NVH; ++c)
        for (int u = 0; u < 8; ++u) oc[c][u] = 0.0;
#else
    CM_A qa[ND];
    [[unroll]] for (int kk = 0; kk < ND; ++kk)
        coopMatLoad(qa[kk], sKV, rb * 16 * LDK + kk * 16, LDK, gl_CooperativeMatrixLayoutRowMajor);
    CM_C oc[NVH];
    [[unroll]] for (int c = 0; c < NVH; ++c) oc[c] = CM_C(0.0);
#endif
    float m_run = -EW_INF, l_run = 0.0;
#if SKIP_BIAS >= 0
    if (tid < 3) sLive[tid] = 0;
    int turn = 0;
#endif
    barrier();                                   // Q read before K overwrites it
    for (int j0 = 0; j0 < M; j0 += BK) {
#if SKIP_BIAS >= 0
        {                                        // as attention_wide.comp: a tile no row has a live key in
            bool live = false;
            if (i < N) {
                if (!(m_run > -0.1 * MASKED)) live = true;
                for (int t = 0; t < 16 && !live; ++t) {
                    int j = j0 + 16 * h + t;
                    if (j < M && !(float(SKIP_SIGN) * SKIP_LD <= -MASKED)) live = true;
                }
            }
            if (live) sLive[turn] = 1;
            if (tid == 0) sLive[turn == 2 ? 0 : turn + 1] = 0;
            barrier();
            bool skip = sLive[turn] == 0;
            turn = turn == 2 ? 0 : turn + 1;
            if (skip) continue;                  // uniform: every invocation read the same flag
        }
#endif
        float v0[LB];                            // V's first values in flight through K's staging and S
        LOAD_V(0, v0)
        for (int e0 = 0; e0 < BK * DP; e0 += NT * LB) {    // K: lanes along channels, LB loads in flight
            float rv[LB];
            [[unroll]] for (int u = 0; u < LB; ++u) {
                int e = e0 + tid + NT * u, c = e % DP, j = j0 + e / DP;
                rv[u] = e < BK * DP && j < M && c < D ? LD(k, koff + j * K_SJ + c * K_SC) : 0.0;
            }
            [[unroll]] for (int u = 0; u < LB; ++u) {
                int e = e0 + tid + NT * u, c = e % DP, jj = e / DP;
                float x = rv[u];
                if (j0 + jj < M && c < D) {
                    K_STEPS
                }
                if (e < BK * DP) sKV[jj * LDK + c] = float16_t(x);
            }
        }
        barrier();
#if CM_EMULATE
        for (int n = 2 * hf; n < 2 * hf + 2; ++n)
            for (int u = 0; u < 8; ++u) {
                int e = lane + 32 * u, rr = e / 16, cc = e % 16;
                float acc = 0.0;
                for (int kk = 0; kk < DP; ++kk)
                    acc += float(sQ[(rb * 16 + rr) * LDK + kk]) * float(sKV[(n * 16 + cc) * LDK + kk]);
                sS[(rb * 16 + rr) * SLD + n * 16 + cc] = acc;
            }
#else
        [[unroll]] for (int n = 2 * hf; n < 2 * hf + 2; ++n) {
            CM_C sc = CM_C(0.0);
            [[unroll]] for (int kk = 0; kk < ND; ++kk) {
                CM_B kb;
                coopMatLoad(kb, sKV, n * 16 * LDK + kk * 16, LDK, gl_CooperativeMatrixLayoutColumnMajor);
                sc = coopMatMulAdd(qa[kk], kb, sc);
            }
            coopMatStore(sc, sS, rb * 16 * SLD + n * 16, SLD, gl_CooperativeMatrixLayoutRowMajor);
        }
#endif
        barrier();                               // K read by all, S stored
        STORE_V(0, v0)                           // V: its first LB values were loaded with K
        for (int e0 = NT * LB; e0 < BK * DVP; e0 += NT * LB) {
            float rv[LB];
            LOAD_V(e0, rv)
            STORE_V(e0, rv)
        }
        float xs[16], mt = -EW_INF;
        [[unroll]] for (int t = 0; t < 16; ++t) {
            int j = j0 + 16 * h + t;
            float x = sS[row * SLD + 16 * h + t];
            if (j < M) {
                if (i < N) {
                    SCORE_STEPS
                }
                mt = max(mt, x);
            } else {
                x = -EW_INF;                     // past the keys: weight 0
            }
            xs[t] = x;
        }
        sRed[tid] = mt;
        barrier();
        mt = max(max(mt, sRed[tid ^ 1]), max(sRed[tid ^ 2], sRed[tid ^ 3]));
        float mn = max(m_run, mt), al = 1.0, ls = 0.0;
        if (mn == -EW_INF) {                     // nothing but -inf so far: weights 0, nothing to rescale
            [[unroll]] for (int t = 0; t < 16; ++t) xs[t] = 0.0;
        } else {
            al = exp((m_run - mn) * BETA);
            [[unroll]] for (int t = 0; t < 16; ++t) {
                float p = exp((xs[t] - mn) * BETA);
                xs[t] = p;
                ls += p;
            }
            m_run = mn;
        }
        l_run = l_run * al + ls;
        [[unroll]] for (int t = 0; t < 16; ++t) sP[row * PLD + 16 * h + t] = float16_t(xs[t]);
        if (h == 0) sAl[row] = al;
        barrier();                               // P, the factors and V staged
#if CM_EMULATE
        for (int c = 0; c < NVH; ++c)
            for (int u = 0; u < 8; ++u) {
                int e = lane + 32 * u, rr = e / 16, cc = e % 16, col = (hf + 2 * c) * 16 + cc;
                float acc = oc[c][u] * sAl[rb * 16 + rr];
                for (int kk = 0; kk < BK && col < DVP; ++kk)
                    acc += float(sP[(rb * 16 + rr) * PLD + kk]) * float(sKV[kk * LDK + col]);
                oc[c][u] = acc;
            }
#else
        {
            CM_C am;
            coopMatLoad(am, sAl, rb * 16, 0, gl_CooperativeMatrixLayoutColumnMajor);
            CM_A pa[4];
            [[unroll]] for (int kk = 0; kk < 4; ++kk)
                coopMatLoad(pa[kk], sP, rb * 16 * PLD + kk * 16, PLD, gl_CooperativeMatrixLayoutRowMajor);
            [[unroll]] for (int c = 0; c < NVH; ++c) {
                if (hf + 2 * c < NV) {           // uniform per subgroup
                    for (int u = 0; u < oc[c].length(); ++u) oc[c][u] *= am[u];
                    [[unroll]] for (int kk = 0; kk < 4; ++kk) {
                        CM_B vb;
                        coopMatLoad(vb, sKV, kk * 16 * LDK + (hf + 2 * c) * 16, LDK, gl_CooperativeMatrixLayoutRowMajor);
                        oc[c] = coopMatMulAdd(pa[kk], vb, oc[c]);
                    }
                }
            }
        }
#endif
        barrier();                               // V, P and the factors read before the next tile's writes
    }
    sRed[tid] = l_run;
    barrier();
    if (h == 0) {
        float l = (l_run + sRed[tid ^ 1]) + (sRed[tid ^ 2] + sRed[tid ^ 3]);
        sAl[row] = l > 0.0 ? 1.0 / l : EW_NAN;   // NaN sum, or a row of -inf only
    }
    barrier();
    for (int c = 0; c < NVH; ++c) {              // the same count in every subgroup: its barriers uniform
        int cb = hf + 2 * c;                     // value column block
#if CM_EMULATE
        for (int u = 0; u < 8; ++u) {
            int e = lane + 32 * u, rr = e / 16, col = cb * 16 + e % 16, ii = i0 + rb * 16 + rr;
            if (ii < N && col < DV) ST(out_, ooff + ii * O_SR + col * O_SC, oc[c][u] * sAl[rb * 16 + rr]);
        }
#else
        if (cb < NV)
            coopMatStore(oc[c], sS, rb * 16 * SLD + hf * 16, SLD, gl_CooperativeMatrixLayoutRowMajor);
        barrier();
        for (int u = 0; u < 8; ++u) {
            int e = lane + 32 * u, rr = e / 16, col = cb * 16 + e % 16, ii = i0 + rb * 16 + rr;
            if (ii < N && col < DV)
                ST(out_, ooff + ii * O_SR + col * O_SC, sS[(rb * 16 + rr) * SLD + hf * 16 + e % 16] * sAl[rb * 16 + rr]);
        }
        barrier();
#endif
    }
}
