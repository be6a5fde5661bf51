// @storage16
// Fused attention (passes/attention.py, ops/attention.py): for each batch b (a flat index over the
// score's batch dims) and query row i < N,
//   s_j = SCORE_STEPS(sum_c Q[b, i, c] * K[b, j, c])     (scales, bias / mask ADDs, in the ops' order)
//   out[b, i, :] = sum_j softmax_j(s * BETA) * V[b, j, :]
// without storing s: one workgroup per BQ query rows of one batch; keys in tiles of BK; per tile,
// Q and K are staged in shared memory DC channels at a time (QCHUNKS == 1: Q once, all of D), each
// invocation computes an RQ x CK block of scores (rows ty + TY * a, keys tx + TX * t), the scores go
// to shared memory, PARTS invocations per row update the running max and sum (online softmax, fp32,
// the softmax's (x - max) * BETA form) and turn the tile into probabilities, then every invocation
// rescales its RQ x CV output block (columns tx + TX * u) and adds P * V, V staged VK keys at a time.
// Operands are read through strided views of their sources: the offset of batch b is
// X_OFF + sum(((b / T[3t]) % T[3t + 1]) * T[3t + 2]) over the view's terms (Q_T, K_T, V_T), rows and
// channels through single strides; a bias's row offset uses the same terms over the flat row b*N+i;
// the output is written through such a view too (O_T, O_SR, O_SC: e.g. a head merge).
// Q_STEPS / K_STEPS: scalar MUL / DIV absorbed from the operand's chain.
// NaN / Inf as the unfused ops: a NaN or +Inf score makes its row NaN, -Inf scores weigh 0 and a row
// of -Inf only is NaN (max, exp and 0 / 0 as SOFTMAX computes them), a NaN in V reaches its column.
// Masked key tiles (SKIP_BIAS >= 0: the last score step adds bias SKIP_BIAS, SKIP_SIGN 1, or subtracts
// it, -1): a tile whose bias is <= -MASKED (SKIP_SIGN * bias) at every (row, key) of the block, once
// every row's running max is above -MASKED / 10, is skipped: its softmax weights are exactly 0 in the
// unfused ops too (scores below -0.8 MASKED against a max above -0.1 MASKED), for products under
// MASKED / 10 in magnitude; a NaN or Inf product or value under such a mask is not seen (the unfused
// ops would make the row NaN).  A causal mask's keys past a block's last query cost one bias read.
// KSPLIT > 1 (few workgroups: a batch-1 vision transformer's 12 heads x 13 row blocks): the key tiles are
// split KSPLIT ways across workgroups (workgroup index = (block, batch) * KSPLIT + part); each writes its
// rows' unnormalised partial [m, l, acc[DV]] to out_ (float32, row (b * N + i) * KSPLIT + part, DV + 2 wide)
// and shaders/attention_merge.comp rescales and sums the parts into the output view.
// Defines: N M D DV NBATCH QBLOCKS NWG BETA RQ BQ CK BK CV DC QCHUNKS VK SKV_SIZE KSPLIT
//          Q_T[] Q_NT Q_SR Q_SC Q_CFAST Q_OFF K_T[] K_NT K_SJ K_SC K_CFAST K_OFF
//          V_T[] V_NT V_SJ V_SC V_CFAST V_OFF O_T[] O_NT O_SR O_SC
//          SC[] Q_STEPS K_STEPS SCORE_STEPS NBIAS B_T[] B_FIRST[] B_NT[] B_SJ[] SKIP_BIAS SKIP_SIGN
//          SKIP_LD (the mask's value at row a, key j)
// @include ew_math.glsl
#define MASKED 1.0e30
// @include attention_part.glsl
#define TX 8
#define TY 16
#define NT (TX * TY)
#define SQ_LD (BQ + 1)
#define SK_LD (BK + 1)
#define SV_LD (DV + 1)
#define SS_LD (BK + 1)
#define NBIASX (NBIAS > 0 ? NBIAS : 1)
#define PARTS (NT / BQ)
#define PCOLS (BK / PARTS)

shared float sQ[DC * SQ_LD];
shared float sKV[SKV_SIZE];         // a K chunk [DC][SK_LD], then a V chunk [VK][SV_LD]
shared float sS[BQ * SS_LD];        // scores, then probabilities, of the tile
shared float sAl[BQ];               // per row: the tile's rescale factor, at the end 1 / sum
shared float sRed[NT];              // the row statistics' partial max / sum
#if SKIP_BIAS >= 0
shared int sLive[3];                // per tile (3 in turn): some (row, key) is not masked
#endif

// @include view_off.glsl

int tid;

void load_q(int qoff, int i0, int c0) {
    for (int e = tid; e < DC * BQ; e += NT) {
#if Q_CFAST
        int cc = e % DC, rr = e / DC;
#else
        int rr = e % BQ, cc = e / BQ;
#endif
        int i = i0 + rr, c = c0 + cc;
        float x = 0.0;
        if (i < N && c < D) {
            x = LD(q, qoff + i * Q_SR + c * Q_SC);
            Q_STEPS
        }
        sQ[cc * SQ_LD + rr] = x;
    }
}

void load_k(int koff, int j0, int c0) {
    for (int e = tid; e < DC * BK; e += NT) {
#if K_CFAST
        int cc = e % DC, jj = e / DC;
#else
        int jj = e % BK, cc = e / BK;
#endif
        int j = j0 + jj, c = c0 + cc;
        float x = 0.0;
        if (j < M && c < D) {
            x = LD(k, koff + j * K_SJ + c * K_SC);
            K_STEPS
        }
        sKV[cc * SK_LD + jj] = x;
    }
}

void load_v(int voff, int j0) {
    for (int e = tid; e < VK * DV; e += NT) {
#if V_CFAST
        int cc = e % DV, jj = e / DV;
#else
        int jj = e % VK, cc = e / VK;
#endif
        int j = j0 + jj;
        sKV[jj * SV_LD + cc] = j < M ? LD(v, voff + j * V_SJ + cc * V_SC) : 0.0;
    }
}

void main() {
    int wg = int(gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x);
    if (wg >= NWG) return;                       // whole workgroup: uniform
    int ks = wg % KSPLIT;                        // this workgroup's part of the key tiles
    wg /= KSPLIT;
    int qb = wg % QBLOCKS, b = wg / QBLOCKS;
    int j_end = PART_END(ks);
    int i0 = qb * BQ;
    int qoff, koff, voff;
    VIEW_OFF(qoff, Q_T, Q_NT, b)
    VIEW_OFF(koff, K_T, K_NT, b)
    VIEW_OFF(voff, V_T, V_NT, b)
    qoff += Q_OFF;
    koff += K_OFF;
    voff += V_OFF;
    int ooff;
    VIEW_OFF(ooff, O_T, O_NT, b)
    tid = int(gl_LocalInvocationIndex);
    int tx = tid % TX, ty = tid / TX;
    int bo[NBIASX][RQ];                          // bias offsets of this invocation's rows
    for (int h = 0; h < NBIAS; ++h)
        for (int a = 0; a < RQ; ++a)
            BIAS_OFF(bo[h][a], h, b * N + i0 + ty + TY * a)
    float acc[RQ][CV];
    for (int a = 0; a < RQ; ++a)
        for (int u = 0; u < CV; ++u) acc[a][u] = 0.0;
    int srow = tid / PARTS, part = tid % PARTS;  // the statistics of row srow: every part keeps them
    float m_run = -EW_INF, l_run = 0.0;
#if QCHUNKS == 1
    load_q(qoff, i0, 0);
#endif
#if SKIP_BIAS >= 0
    if (tid < 3) sLive[tid] = 0;
    barrier();
    int turn = 0;
#endif
    for (int j0 = PART_BEGIN(ks); j0 < j_end; j0 += BK) {
#if SKIP_BIAS >= 0
        {                                        // flag tile t in sLive[t % 3], clear the next one
            bool live = !(m_run > -0.1 * MASKED);
            for (int a = 0; a < RQ && !live; ++a) {
                if (i0 + ty + TY * a >= N) continue;
                for (int t = 0; t < CK; ++t) {
                    int j = j0 + tx + TX * t;
                    if (j < M && !(float(SKIP_SIGN) * SKIP_LD <= -MASKED))
                        live = true;
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
        float s[RQ][CK];
        for (int a = 0; a < RQ; ++a)
            for (int t = 0; t < CK; ++t) s[a][t] = 0.0;
        for (int c0 = 0; c0 < D; c0 += DC) {
#if QCHUNKS > 1
            load_q(qoff, i0, c0);
#endif
            load_k(koff, j0, c0);
            barrier();
            for (int cc = 0; cc < DC; ++cc) {
                float qv[RQ], kv[CK];
                for (int a = 0; a < RQ; ++a) qv[a] = sQ[cc * SQ_LD + ty + TY * a];
                for (int t = 0; t < CK; ++t) kv[t] = sKV[cc * SK_LD + tx + TX * t];
                for (int a = 0; a < RQ; ++a)
                    for (int t = 0; t < CK; ++t) s[a][t] += qv[a] * kv[t];
            }
            barrier();
        }
        for (int a = 0; a < RQ; ++a) {
            int row = ty + TY * a;
            for (int t = 0; t < CK; ++t) {
                int col = tx + TX * t, j = j0 + col;
                float x = s[a][t];
                if (i0 + row < N && j < M) {
                    SCORE_STEPS
                }
                sS[row * SS_LD + col] = x;
            }
        }
        barrier();
        {                                        // PARTS invocations per row, PCOLS keys each
            int jn = min(BK, M - j0), o = srow * SS_LD, j1 = part * PCOLS;
            float mt = -EW_INF;
            for (int jj = j1; jj < min(j1 + PCOLS, jn); ++jj) mt = max(mt, sS[o + jj]);
            sRed[tid] = mt;
            barrier();
            for (int p = 0; p < PARTS; ++p) mt = max(mt, sRed[srow * PARTS + p]);
            float mn = max(m_run, mt), al = 1.0, ls = 0.0;
            if (mn == -EW_INF) {                 // nothing but -inf so far: weights 0, nothing to rescale
                for (int jj = j1; jj < j1 + PCOLS; ++jj) sS[o + jj] = 0.0;
            } else {
                al = exp((m_run - mn) * BETA);
                for (int jj = j1; jj < j1 + PCOLS; ++jj) {
                    float p = jj < jn ? exp((sS[o + jj] - mn) * BETA) : 0.0;
                    sS[o + jj] = p;
                    ls += p;
                }
                m_run = mn;
            }
            barrier();
            sRed[tid] = ls;
            if (part == 0) sAl[srow] = al;
            barrier();
            ls = 0.0;
            for (int p = 0; p < PARTS; ++p) ls += sRed[srow * PARTS + p];
            l_run = l_run * al + ls;
        }
        for (int a = 0; a < RQ; ++a) {
            float al = sAl[ty + TY * a];
            for (int u = 0; u < CV; ++u) acc[a][u] *= al;
        }
        for (int v0 = 0; v0 < BK; v0 += VK) {
            load_v(voff, j0 + v0);
            barrier();
            for (int jj = 0; jj < VK; ++jj) {
                float p[RQ], vv[CV];
                for (int a = 0; a < RQ; ++a) p[a] = sS[(ty + TY * a) * SS_LD + v0 + jj];
                for (int u = 0; u < CV; ++u) vv[u] = sKV[jj * SV_LD + tx + TX * u];
                for (int a = 0; a < RQ; ++a)
                    for (int u = 0; u < CV; ++u) acc[a][u] += p[a] * vv[u];
            }
            barrier();
        }
    }
#if KSPLIT > 1
    if (part == 0 && i0 + srow < N) {
        int base = PART_ROW(b * N + i0 + srow, ks);
        ST(out_, base, m_run);
        ST(out_, base + 1, l_run);
    }
    for (int a = 0; a < RQ; ++a) {
        int i = i0 + ty + TY * a;
        if (i >= N) continue;
        int base = PART_ROW(b * N + i, ks) + 2;
        for (int u = 0; u < CV; ++u) {
            int c = tx + TX * u;
            if (c < DV) ST(out_, base + c, acc[a][u]);
        }
    }
    return;
#endif
    if (part == 0) sAl[srow] = l_run > 0.0 ? 1.0 / l_run : EW_NAN;    // NaN sum, or a row of -inf only
    barrier();
    for (int a = 0; a < RQ; ++a) {
        int i = i0 + ty + TY * a;
        if (i >= N) continue;
        float inv = sAl[ty + TY * a];
        for (int u = 0; u < CV; ++u) {
            int c = tx + TX * u;
            if (c < DV) ST(out_, ooff + i * O_SR + c * O_SC, acc[a][u] * inv);
        }
    }
}
