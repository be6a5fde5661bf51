// @storage16
// Fused attention (passes/attention.py, ops/attention.py): for each batch b (a flat index over the
// score's batch dims) and query row i < N,
//   s_j = SCORE_STEPS(sum_c Q[b, i, c] * K[b, j, c])     (scales, bias / mask ADDs, in the ops' order)
//   out[b, i, :] = sum_j softmax_j(s * BETA) * V[b, j, :]
// without storing s: one workgroup of TX x TY invocations per BQ = TY * RQ query rows of one batch;
// keys in tiles of BK = 4 * TX.  Per tile, Q and K are staged in shared memory DC channels at a time
// (QCHUNKS == 1: Q once, all of D); invocation (ty, tx) computes the scores of rows ty * RQ + a and
// keys tx * 4 + t (RQ x 4, from one RVEC and one vec4 shared load per channel), writes them to
// shared memory key-major, PARTS invocations per row update the running max and sum (online softmax,
// fp32, the softmax's (x - max) * BETA form) and turn the tile into probabilities, then every
// invocation rescales its RQ x 4*CV4 output block (columns (u * TX + tx) * 4 + e) and adds P * V, V
// staged VK keys at a time (rows padded to VW vec4s).
// Operands are read through strided views of their sources: the offset of batch b is
// X_OFF + sum(((b / T[3t]) % T[3t + 1]) * T[3t + 2]) over the view's terms (Q_T, K_T, V_T), rows and
// channels through single strides; a bias's row offset uses the same terms over the flat row b*N+i;
// the output is written through such a view too (O_T, O_SR, O_SC: e.g. a head merge).
// Q_STEPS / K_STEPS: scalar MUL / DIV absorbed from the operand's chain.
// NaN / Inf as the unfused ops: a NaN or +Inf score makes its row NaN, -Inf scores weigh 0 and a row
// of -Inf only is NaN (max, exp and 0 / 0 as SOFTMAX computes them), a NaN in V reaches its column.
// Defines: N M D DV NBATCH QBLOCKS NWG BETA RQ CV4 VW DC QCHUNKS VK SKV_SIZE
//          Q_T[] Q_NT Q_SR Q_SC Q_CFAST Q_OFF K_T[] K_NT K_SJ K_SC K_CFAST K_OFF
//          V_T[] V_NT V_SJ V_SC V_CFAST V_OFF O_T[] O_NT O_SR O_SC
//          SC[] Q_STEPS K_STEPS SCORE_STEPS NBIAS B_T[] B_FIRST[] B_NT[] B_SJ[]
// @include ew_math.glsl
#define TX 8
#define TY 16
#define NT (TX * TY)
#define BK (4 * TX)
#define BQ (TY * RQ)
#define NBIASX (NBIAS > 0 ? NBIAS : 1)
#define PARTS (NT / BQ)
#define PCOLS (BK / PARTS)
#if RQ == 4
#define RVEC vec4
#elif RQ == 2
#define RVEC vec2
#else
#define RVEC float
#endif
#if RQ == 1
#define COMP(v, i) v
#else
#define COMP(v, i) v[i]
#endif

shared RVEC sQ[DC * TY];            // [channel][row group]: rows ty * RQ .. + RQ - 1
shared RVEC sP[BK * TY];            // [key][row group]: scores, then probabilities, of the tile
shared vec4 sKV[SKV_SIZE];          // a K chunk [channel][key group of 4], then a V chunk [key][VW]
shared float sAl[BQ];               // per row: the tile's rescale factor, at the end 1 / sum
shared float sRed[NT];              // the row statistics' partial max / sum

#define VIEW_OFF(res, T, NTERMS, x) { res = 0; for (int t_ = 0; t_ < NTERMS; ++t_) res += ((x) / T[3 * t_] % T[3 * t_ + 1]) * T[3 * t_ + 2]; }

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
#if RQ == 1
        sQ[cc * TY + rr] = x;
#else
        sQ[cc * TY + rr / RQ][rr % RQ] = x;
#endif
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
        sKV[cc * TX + jj / 4][jj % 4] = x;
    }
}

void load_v(int voff, int j0) {
    for (int e = tid; e < VK * VW * 4; e += NT) {
#if V_CFAST
        int cc = e % (VW * 4), jj = e / (VW * 4);
#else
        int jj = e % VK, cc = e / VK;
#endif
        int j = j0 + jj;
        sKV[jj * VW + cc / 4][cc % 4] = j < M && cc < DV ? LD(v, voff + j * V_SJ + cc * V_SC) : 0.0;
    }
}

void main() {
    int wg = int(gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x);
    if (wg >= NWG) return;                       // whole workgroup: uniform
    int qb = wg % QBLOCKS, b = wg / QBLOCKS;
    int i0 = qb * BQ;
    int qoff, koff, voff, ooff;
    VIEW_OFF(qoff, Q_T, Q_NT, b)
    VIEW_OFF(koff, K_T, K_NT, b)
    VIEW_OFF(voff, V_T, V_NT, b)
    VIEW_OFF(ooff, O_T, O_NT, b)
    qoff += Q_OFF;
    koff += K_OFF;
    voff += V_OFF;
    tid = int(gl_LocalInvocationIndex);
    int tx = tid % TX, ty = tid / TX;
    int bo[NBIASX][RQ];                          // bias offsets of this invocation's rows
    for (int h = 0; h < NBIAS; ++h)
        for (int a = 0; a < RQ; ++a) {
            int r = b * N + i0 + ty * RQ + a, o = 0;
            for (int t_ = 0; t_ < B_NT[h]; ++t_) {
                int f = 3 * (B_FIRST[h] + t_);
                o += (r / B_T[f] % B_T[f + 1]) * B_T[f + 2];
            }
            bo[h][a] = o;
        }
    vec4 acc[RQ][CV4];
    for (int a = 0; a < RQ; ++a)
        for (int u = 0; u < CV4; ++u) acc[a][u] = vec4(0.0);
    int srow = tid / PARTS, part = tid % PARTS;  // the statistics of row srow: every part keeps them
    float m_run = -EW_INF, l_run = 0.0;
#if QCHUNKS == 1
    load_q(qoff, i0, 0);
#endif
    for (int j0 = 0; j0 < M; j0 += BK) {
        vec4 s[RQ];
        for (int a = 0; a < RQ; ++a) s[a] = vec4(0.0);
        for (int c0 = 0; c0 < D; c0 += DC) {
#if QCHUNKS > 1
            load_q(qoff, i0, c0);
#endif
            load_k(koff, j0, c0);
            barrier();
            for (int cc = 0; cc < DC; ++cc) {
                RVEC qv = sQ[cc * TY + ty];
                vec4 kv = sKV[cc * TX + tx];
                for (int a = 0; a < RQ; ++a) s[a] += COMP(qv, a) * kv;
            }
            barrier();
        }
        for (int t = 0; t < 4; ++t) {
            int j = j0 + tx * 4 + t;
            RVEC col;
            for (int a = 0; a < RQ; ++a) {
                float x = s[a][t];
                if (i0 + ty * RQ + a < N && j < M) {
                    SCORE_STEPS
                }
                COMP(col, a) = x;
            }
            sP[(tx * 4 + t) * TY + ty] = col;
        }
        barrier();
        {                                        // PARTS invocations per row, PCOLS keys each
            int jn = min(BK, M - j0), j1 = part * PCOLS, g = srow / RQ, gi = srow % RQ;
            float mt = -EW_INF;
            for (int jj = j1; jj < min(j1 + PCOLS, jn); ++jj) mt = max(mt, COMP(sP[jj * TY + g], gi));
            sRed[tid] = mt;
            barrier();
            for (int p = 0; p < PARTS; ++p) mt = max(mt, sRed[srow * PARTS + p]);
            float mn = max(m_run, mt), al = 1.0, ls = 0.0;
            if (mn == -EW_INF) {                 // nothing but -inf so far: weights 0, nothing to rescale
                for (int jj = j1; jj < j1 + PCOLS; ++jj) COMP(sP[jj * TY + g], gi) = 0.0;
            } else {
                al = exp((m_run - mn) * BETA);
                for (int jj = j1; jj < j1 + PCOLS; ++jj) {
                    float p = jj < jn ? exp((COMP(sP[jj * TY + g], gi) - mn) * BETA) : 0.0;
                    COMP(sP[jj * TY + g], gi) = p;
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
            float al = sAl[ty * RQ + a];
            for (int u = 0; u < CV4; ++u) acc[a][u] *= al;
        }
        for (int v0 = 0; v0 < BK; v0 += VK) {
            load_v(voff, j0 + v0);
            barrier();
            for (int jj = 0; jj < VK; ++jj) {
                RVEC p = sP[(v0 + jj) * TY + ty];
                for (int u = 0; u < CV4; ++u) {
                    vec4 vv = sKV[jj * VW + u * TX + tx];
                    for (int a = 0; a < RQ; ++a) acc[a][u] += COMP(p, a) * vv;
                }
            }
            barrier();
        }
    }
    if (part == 0) sAl[srow] = l_run > 0.0 ? 1.0 / l_run : EW_NAN;    // NaN sum, or a row of -inf only
    barrier();
    for (int a = 0; a < RQ; ++a) {
        int i = i0 + ty * RQ + a;
        if (i >= N) continue;
        float inv = sAl[ty * RQ + a];
        for (int u = 0; u < CV4; ++u)
            for (int e = 0; e < 4; ++e) {
                int c = (u * TX + tx) * 4 + e;
                if (c < DV) ST(out_, ooff + i * O_SR + c * O_SC, acc[a][u][e] * inv);
            }
    }
}
